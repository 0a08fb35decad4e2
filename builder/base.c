/* FROM: the filesystem the first step builds on.
 *
 *   scratch            an empty layer
 *   <template>         that template's current version, as published;
 *                      its key is derived from "template:<name>:<version>"
 *                      so a new version of the base rebuilds what follows
 *   debian:<suite>     debootstrap --variant=minbase on the host, from the
 *                      mirror the host's apt uses, then apt-get install of
 *                      the --include packages in it: the one step trusted
 *                      to run outside a sandbox (it only installs Debian's
 *                      signed packages). Cached by suite + sorted
 *                      packages + mirror. */
#include "builder.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/rmtree.h"
#include "pool/store.h"
#include "proto/agentproto.h"
#include "template/context.h"

#define DEBOOTSTRAP "/usr/sbin/debootstrap"
#define DEBOOTSTRAP_TIMEOUT_MS (60ll * 60 * 1000)

static int from_scratch(bld *b, al_err *err)
{
	const al_af_step *st = &b->af->steps[0];
	char final[AL_PATH_MAX + 160], tmp[AL_PATH_MAX + 160];
	if (al_airlockfile_step_key(NULL, st, NULL, b->key, err) < 0 ||
	    bld_layer_path(b, b->key, final, sizeof final, err) < 0)
		return -1;
	snprintf(b->parent, sizeof b->parent, "%s", final);
	if (al_store_is_subvol(final, NULL) == 1) {
		bld_blog_step(b, st, 1);
		return 0;
	}
	bld_blog_step(b, st, 0);
	b->rebuilt = 1;
	snprintf(tmp, sizeof tmp, "%s/.tmp-%s-%d", b->layers, b->key,
		 (int)getpid());
	if (al_store_subvol_create(tmp, err) < 0)
		return -1;
	bld_tmp_add(b, tmp);
	if (chmod(tmp, 0755) < 0)
		return al_err_sys(err, AL_ESYS, errno, "chmod %s", tmp);
	return bld_layer_install(b, tmp, final, err);
}

static int from_template(bld *b, al_err *err)
{
	const al_af_step *st = &b->af->steps[0];
	const char *name = st->from.template_name;
	if (al_template_get_version(b->db, name, 0, &b->base, err) < 0) {
		if (err != NULL && err->code == AL_ENOENT)
			al_err_set(err, AL_ENOENT, 0,
				   "FROM %s: no such template", name);
		return -1;
	}
	b->has_base = 1;
	char rootfs[AL_PATH_MAX + 160], legacy[AL_PATH_MAX + 96];
	if (al_template_version_rootfs(&b->cfg, name, b->base.version, rootfs,
				       sizeof rootfs, err) < 0)
		return -1;
	if (al_store_is_subvol(rootfs, NULL) != 1) {
		/* A template made before versions existed lives at
		 * pool/templates/<name> itself (a directory, no link). */
		struct stat lst;
		if (al_config_template_root(&b->cfg, name, legacy,
					    sizeof legacy, err) < 0)
			return -1;
		if (lstat(legacy, &lst) < 0 || !S_ISDIR(lst.st_mode) ||
		    al_store_is_subvol(legacy, NULL) != 1)
			return al_err_set(err, AL_ENOENT, 0,
					  "FROM %s: version %d has no "
					  "filesystem",
					  name, b->base.version);
		snprintf(rootfs, sizeof rootfs, "%s", legacy);
	}
	char seed[160], base_key[AL_AF_KEY_HEX];
	snprintf(seed, sizeof seed, "template:%s:%d", name, b->base.version);
	bld_fsroot_sha256_hex(seed, base_key);
	if (al_airlockfile_step_key(base_key, st, NULL, b->key, err) < 0)
		return -1;
	snprintf(b->parent, sizeof b->parent, "%s", rootfs);
	bld_blog_step(b, st, 1);
	bld_blog_info(b, "base: template %s version %d", name, b->base.version);
	return 0;
}

/* ---- the host's Debian mirror ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Run debootstrap into dir, its output streamed into the log. */
static int debootstrap(bld *b, const char *suite, const char *include,
		       const char *mirror, const char *dir, al_err *err)
{
	if (access(DEBOOTSTRAP, X_OK) < 0)
		return al_err_set(err, AL_EUNAVAIL, 0,
				  "%s missing (apt-get install debootstrap)",
				  DEBOOTSTRAP);
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return al_err_sys(err, AL_ESYS, errno, "pipe");
	/* debootstrap makes the minimal system; the packages then come
	 * from apt-get inside it (still on the host, in the same mount
	 * namespace), whose resolver handles what debootstrap's --include
	 * cannot (npm's dependency graph, virtual packages). */
	static const char script[] =
		"set -e\n"
		"dir=$1 suite=$2 mirror=$3; shift 3\n"
		"debootstrap --variant=minbase \"$suite\" \"$dir\" "
		"\"$mirror\"\n"
		"[ $# -gt 0 ] || exit 0\n"
		"echo \"I: apt-get install $*\"\n"
		"mount -t proc proc \"$dir/proc\"\n"
		"trap 'umount -l \"$dir/proc\" 2>/dev/null || true' EXIT\n"
		"printf '#!/bin/sh\\nexit 101\\n' > \"$dir/usr/sbin/policy-rc.d\"\n"
		"chmod 0755 \"$dir/usr/sbin/policy-rc.d\"\n"
		"chroot \"$dir\" apt-get -q update\n"
		"chroot \"$dir\" apt-get -q -y --no-install-recommends "
		"install \"$@\"\n"
		"chroot \"$dir\" apt-get clean\n"
		"rm -f \"$dir/usr/sbin/policy-rc.d\"\n"
		"rm -rf \"$dir\"/var/lib/apt/lists/*\n";
	char *pkgs = strdup(include);
	char **argv = calloc(AL_AF_MAX_PACKAGES + 10, sizeof *argv);
	if (pkgs == NULL || argv == NULL) {
		free(pkgs);
		free(argv);
		close(pfd[0]);
		close(pfd[1]);
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	}
	size_t ac = 0;
	argv[ac++] = "/bin/sh";
	argv[ac++] = "-c";
	argv[ac++] = (char *)script;
	argv[ac++] = "airlock-debootstrap";
	argv[ac++] = (char *)dir;
	argv[ac++] = (char *)suite;
	argv[ac++] = (char *)mirror;
	for (char *save = NULL, *t = strtok_r(pkgs, ",", &save);
	     t != NULL && ac < AL_AF_MAX_PACKAGES + 8;
	     t = strtok_r(NULL, ",", &save))
		argv[ac++] = t;
	argv[ac] = NULL;
	char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
			"DEBIAN_FRONTEND=noninteractive", "HOME=/root", NULL};
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(pfd[0]);
		close(pfd[1]);
		free(pkgs);
		free(argv);
		return al_err_sys(err, AL_ESYS, e, "fork");
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY);
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(pfd[1], 1) < 0 ||
		    dup2(pfd[1], 2) < 0 || chdir("/") < 0)
			_exit(126);
		setsid();
		/* The pool is mounted nodev (sandboxes write there), and
		 * debootstrap needs working device nodes in its target. In a
		 * mount namespace of its own, the target alone is bound
		 * without nodev; what debootstrap mounts inside (proc, sys)
		 * goes away with the namespace. */
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount(dir, dir, NULL, MS_BIND, NULL) < 0 ||
		    mount(NULL, dir, NULL, MS_BIND | MS_REMOUNT | MS_NOSUID,
			  NULL) < 0) {
			dprintf(2,
				"airlock-builder: mount namespace for "
				"debootstrap: %s\n",
				strerror(errno));
			_exit(126);
		}
		execve("/bin/sh", argv, envp);
		_exit(127);
	}
	free(pkgs);
	free(argv);
	close(pfd[1]);
	int64_t deadline = al_now_ms() + DEBOOTSTRAP_TIMEOUT_MS;
	char buf[16384];
	int timed_out = 0;
	for (;;) {
		int64_t left = deadline - al_now_ms();
		if (left <= 0) {
			timed_out = 1;
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			break;
		}
		struct pollfd p = {.fd = pfd[0], .events = POLLIN};
		int r = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			continue;
		ssize_t n = read(pfd[0], buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		bld_blog_output(b, 0, buf, (size_t)n);
	}
	close(pfd[0]);
	bld_blog_output_flush(b);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (timed_out)
		return al_err_set(err, AL_ETIMEDOUT, 0,
				  "debootstrap took longer than %lld s",
				  DEBOOTSTRAP_TIMEOUT_MS / 1000);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return al_err_set(err, AL_ESYS, 0,
				  "debootstrap or apt-get failed (exit %d); "
				  "its output is in the log",
				  WIFEXITED(st) ? WEXITSTATUS(st) : 128);
	return 0;
}

/* Drop the downloaded .debs: a template carries the installed files
 * only. */
static void clean_apt_cache(const char *root)
{
	char dir[AL_PATH_MAX + 200];
	snprintf(dir, sizeof dir, "%s/var/cache/apt/archives", root);
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);
		if (l > 4 && strcmp(de->d_name + l - 4, ".deb") == 0)
			unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}

static int from_debian(bld *b, al_err *err)
{
	const al_af_step *st = &b->af->steps[0];
	const al_af_from *fr = &st->from;
	char mirror[1100];
	if (bld_mirror_of_host(fr->suite, mirror, sizeof mirror, err) < 0)
		return -1;

	/* Sorted and deduplicated: the order written changes nothing. */
	size_t n = fr->npackages;
	const char **pk = calloc(n + 1, sizeof *pk);
	if (pk == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		pk[i] = fr->packages[i];
	qsort(pk, n, sizeof *pk, cmp_str);
	size_t cap = 16;
	for (size_t i = 0; i < n; i++)
		cap += strlen(pk[i]) + 1;
	char *include = calloc(1, cap);
	if (include == NULL) {
		free(pk);
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && strcmp(pk[i], pk[i - 1]) == 0)
			continue;
		if (include[0] != '\0')
			strcat(include, ",");
		strcat(include, pk[i]);
	}
	free(pk);

	size_t seedlen = strlen(include) + strlen(mirror) + 128;
	char *seed = malloc(seedlen);
	if (seed == NULL) {
		free(include);
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	}
	snprintf(seed, seedlen,
		 "airlock-debootstrap-v3\n%s\nminbase+apt\n%s\n%s", fr->suite,
		 include, mirror);
	bld_fsroot_sha256_hex(seed, b->key);
	free(seed);

	char final[AL_PATH_MAX + 160], tmp[AL_PATH_MAX + 160];
	if (bld_layer_path(b, b->key, final, sizeof final, err) < 0) {
		free(include);
		return -1;
	}
	snprintf(b->parent, sizeof b->parent, "%s", final);
	/* The base is like a pulled image: --no-cache rebuilds the steps,
	 * not Debian itself. */
	if (al_store_is_subvol(final, NULL) == 1) {
		free(include);
		bld_blog_step(b, st, 1);
		return 0;
	}
	bld_blog_step(b, st, 0);
	b->rebuilt = 1;
	bld_blog_info(b, "debootstrap %s from %s (packages: %s)", fr->suite,
		      mirror, include[0] != '\0' ? include : "none");
	snprintf(tmp, sizeof tmp, "%s/.tmp-%s-%d", b->layers, b->key,
		 (int)getpid());
	if (al_store_subvol_create(tmp, err) < 0) {
		free(include);
		return -1;
	}
	bld_tmp_add(b, tmp);
	chmod(tmp, 0755);
	int rc = debootstrap(b, fr->suite, include, mirror, tmp, err);
	free(include);
	/* debootstrap mounts /proc and /sys in the target; a failure can
	 * leave them there, and a mounted subvolume cannot be deleted. */
	bld_fsroot_umount_below(tmp);
	if (rc < 0) {
		/* debootstrap's own log says which package broke. */
		char dlog[AL_PATH_MAX + 200];
		size_t len;
		snprintf(dlog, sizeof dlog, "%s/debootstrap/debootstrap.log",
			 tmp);
		char *text = bld_fsroot_read_host_file(dlog, 64u << 20, &len,
						       NULL);
		if (text != NULL) {
			size_t from = len > 8192 ? len - 8192 : 0;
			bld_blog_info(b, "last lines of debootstrap.log:");
			bld_blog_output(b, 1, text + from, len - from);
			bld_blog_output_flush(b);
			free(text);
		}
		return -1;
	}
	clean_apt_cache(tmp);
	/* debootstrap copied the host's own hostname and resolver into the
	 * new system: neither belongs in a template. DNS comes with the
	 * egress gateway. */
	if (bld_fsroot_write_file(tmp, "/etc/hostname", "sandbox\n", 8, 0644,
				  err) < 0 ||
	    bld_fsroot_write_file(tmp, "/etc/resolv.conf", "", 0, 0644, err) <
		    0)
		return -1;
	/* The device nodes debootstrap made: every sandbox gets its own
	 * /dev (the jail's tmpfs, the VM's devtmpfs). */
	char dev[AL_PATH_MAX + 200];
	snprintf(dev, sizeof dev, "%s/dev", tmp);
	if (al_rmtree(dev, err) < 0)
		return -1;
	if (mkdir(dev, 0755) < 0)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", dev);
	return bld_layer_install(b, tmp, final, err);
}

int bld_base_prepare(bld *b, al_err *err)
{
	const al_af_from *fr = b->af->from;
	b->step = 1;
	switch (fr->base) {
	case AL_AF_BASE_SCRATCH:
		return from_scratch(b, err);
	case AL_AF_BASE_TEMPLATE:
		return from_template(b, err);
	case AL_AF_BASE_DEBIAN:
		return from_debian(b, err);
	default:
		return al_err_set(err, AL_EINTERNAL, 0, "unknown FROM kind");
	}
}
