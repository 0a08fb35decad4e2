/* vm snapshot: see vm/snapshot.h. */
#include "vm/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/file.h"
#include "base/log.h"
#include "proto/agentproto.h"
#include "vm/jail.h"
#include "vm/machine.h"
#include "vm/tmplcache.h"

int al_vm_template_dir(const al_config *cfg, const char *tmpl, char *out,
		       size_t outlen, al_err *err)
{
	if (!al_id_valid(tmpl))
		return al_err_set(err, AL_EINVAL, 0, "invalid template name");
	/* A versioned template (pool/templates/<t> -> template-versions/<t>/
	 * <v>/rootfs) keeps its VM artefacts beside that version's rootfs,
	 * so sandboxes of an older version keep theirs. */
	char link[AL_PATH_MAX], real[PATH_MAX], versions[AL_PATH_MAX + 32];
	snprintf(versions, sizeof versions, "%s/template-versions/",
		 cfg->pool_dir);
	if (al_config_template_root(cfg, tmpl, link, sizeof link, NULL) == 0 &&
	    realpath(link, real) != NULL &&
	    strncmp(real, versions, strlen(versions)) == 0) {
		size_t rl = strlen(real);
		if (rl > 7 && strcmp(real + rl - 7, "/rootfs") == 0) {
			real[rl - 7] = '\0';
			int n = snprintf(out, outlen, "%s/vm", real);
			if (n < 0 || (size_t)n >= outlen)
				return al_err_set(err, AL_EINVAL, 0,
						  "path for %s too long", tmpl);
			return 0;
		}
	}
	int n = snprintf(out, outlen, "%s/vm/%s", cfg->pool_dir, tmpl);
	if (n < 0 || (size_t)n >= outlen)
		return al_err_set(err, AL_EINVAL, 0, "path for %s too long",
				  tmpl);
	return 0;
}

/* The template's VM directory (target of tmpl_root/.airlock-vm). */
static int template_vmdir(const char *tmpl_root, char *out, size_t len)
{
	char link[AL_PATH_MAX + 16];
	int k = snprintf(link, sizeof link, "%s/" AL_VM_LINK, tmpl_root);
	if (k < 0 || (size_t)k >= sizeof link)
		return -1;
	ssize_t n = readlink(link, out, len - 1);
	if (n <= 0 || (size_t)n >= len - 16)
		return -1;
	out[n] = '\0';
	return out[0] == '/' ? 0 : -1;
}

int al_vm_template_ready(const char *tmpl_root, char *why, size_t whylen)
{
	char dir[AL_PATH_MAX], p[AL_PATH_MAX + 16];
	if (template_vmdir(tmpl_root, dir, sizeof dir) < 0) {
		snprintf(why, whylen, "the template has no VM image yet");
		return 0;
	}
	static const char *const names[] = {"disk.ext4", AL_VM_BASE_DISK, "mem",
					    "state", "accel"};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		snprintf(p, sizeof p, "%s/%s", dir, names[i]);
		if (access(p, R_OK) < 0) {
			snprintf(why, whylen,
				 "the template's VM snapshot is incomplete "
				 "(no %s)",
				 names[i]);
			return 0;
		}
	}
	why[0] = '\0';
	return 1;
}

uint64_t al_vm_disk_size(uint64_t image_bytes, uint64_t disk_bytes)
{
	uint64_t want = disk_bytes & ~((1ull << 20) - 1);
	return want > image_bytes ? want : image_bytes;
}

int al_vm_snapshot_current(const char *vmdir)
{
	char p[AL_PATH_MAX + 16], got[16] = "";
	if ((size_t)snprintf(p, sizeof p, "%s/format", vmdir) >= sizeof p)
		return 0;
	al_autofd int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, got, sizeof got - 1) : -1;
	if (n < 0)
		return 0;
	got[n] = '\0';
	return strcmp(got, AL_VM_SNAPSHOT_FORMAT) == 0;
}

/* a's modification time is later than b's. */
static int newer(const struct stat *a, const struct stat *b)
{
	if (a->st_mtim.tv_sec != b->st_mtim.tv_sec)
		return a->st_mtim.tv_sec > b->st_mtim.tv_sec;
	return a->st_mtim.tv_nsec > b->st_mtim.tv_nsec;
}

int al_vm_template_stale(const char *tmpl_root, const char *state_dir,
			 al_vm_accel accel)
{
	char dir[AL_PATH_MAX], p[AL_PATH_MAX + 32], why[8], got[8] = "";
	if (!al_vm_template_ready(tmpl_root, why, sizeof why) ||
	    template_vmdir(tmpl_root, dir, sizeof dir) < 0)
		return 1;
	snprintf(p, sizeof p, "%s/accel", dir);
	{
		al_autofd int fd = open(p, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, got, sizeof got - 1) : -1;
		if (n < 0)
			return 1;
		got[n] = '\0';
	}
	if (strcmp(got, al_vm_accel_name(accel)) != 0 ||
	    !al_vm_snapshot_current(dir))
		return 1;
	struct stat snap, in;
	snprintf(p, sizeof p, "%s/state", dir);
	if (stat(p, &snap) < 0)
		return 1;
	al_vm_kernel k;
	al_err err;
	/* A QEMU upgrade may change device state: snapshot again. */
	const char *inputs[4] = {NULL, NULL, NULL, AL_VM_QEMU};
	snprintf(p, sizeof p, "%s/sbin/airlock-agent", tmpl_root);
	inputs[0] = p;
	if (al_vm_kernel_find(state_dir, &k, &err) == 0) {
		inputs[1] = k.vmlinuz;
		inputs[2] = k.initrd;
	}
	for (size_t i = 0; i < 4; i++)
		if (inputs[i] != NULL && stat(inputs[i], &in) == 0 &&
		    newer(&in, &snap))
			return 1;
	return 0;
}

/* ---- template build ---- */

static int run_wait(char *const argv[], al_err *err)
{
	pid_t pid = fork();
	if (pid < 0)
		return al_err_sys(err, AL_ESYS, errno, "fork");
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
		}
		char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
		execve(argv[0], argv, envp);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return al_err_sys(err, AL_ESYS, errno, "waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return al_err_set(err, AL_ESYS, 0, "%s failed (status %d)",
				  argv[0], st);
	return 0;
}

static int build_disk(const char *rootfs, const char *disk, al_err *err)
{
	al_autofd int fd = open(disk, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				0600);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "create %s", disk);
	if (ftruncate(fd, (off_t)AL_VM_DISK_BYTES) < 0)
		return al_err_sys(err, AL_ESYS, errno, "size %s", disk);
	char *argv[] = {"/usr/sbin/mkfs.ext4",
			"-q",
			"-F",
			"-L",
			"airlock",
			"-d",
			(char *)rootfs,
			(char *)disk,
			NULL};
	if (run_wait(argv, err) < 0) {
		al_err_wrap(err, "building the disk image of %s", rootfs);
		return -1;
	}
	return 0;
}

static int fsync_path(const char *path, al_err *err)
{
	al_autofd int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		return al_err_sys(err, AL_ESYS, errno, "fsync %s", path);
	return 0;
}

/* Write the guest RAM of a template boot to path, holes kept. */
static int save_ram(int mem_fd, const char *path, al_err *err)
{
	al_autofd int out = open(path,
				 O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
					 O_NOFOLLOW,
				 0600);
	if (out < 0)
		return al_err_sys(err, AL_ESYS, errno, "create %s", path);
	if (al_file_copy_sparse(mem_fd, out, err) < 0) {
		al_err_wrap(err, "writing %s", path);
		return -1;
	}
	if (fsync(out) < 0)
		return al_err_sys(err, AL_ESYS, errno, "fsync %s", path);
	return 0;
}

/* The guest RAM lives in a memfd QEMU shares (share=on) while it runs;
 * once QEMU is gone it is copied to dir/mem, holes kept. */
int al_vm_snapshot_boot(const char *dir, unsigned vcpus, const al_vm_kernel *k,
			al_vm_accel accel, const char *cgroup, al_err *err)
{
	char disk[AL_PATH_MAX], mem[AL_PATH_MAX], state[AL_PATH_MAX];
	if (al_vm_path(disk, sizeof disk, err, "%s/disk.ext4", dir) < 0 ||
	    al_vm_path(mem, sizeof mem, err, "%s/mem", dir) < 0 ||
	    al_vm_path(state, sizeof state, err, "%s/state", dir) < 0)
		return -1;
	al_autofd int mem_fd = memfd_create("airlock-template-boot",
					    MFD_CLOEXEC);
	if (mem_fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "memfd_create");
	if (ftruncate(mem_fd, (off_t)AL_VM_MEM_MB << 20) < 0)
		return al_err_sys(err, AL_ESYS, errno, "size guest RAM");
	al_vm_machine m;
	al_vm_machine_init(&m);
	al_autofd int agent_fd = -1;
	al_autofd int state_fd = -1;
	al_vm_launch l = {.mode = AL_VM_TEMPLATE,
			  .accel = accel,
			  .kernel = k,
			  .mem_fd = mem_fd,
			  .disk = disk,
			  .agent = "/sbin/airlock-agent",
			  .cgroup = cgroup,
			  .vcpus = vcpus};
	if (al_vmjail_uid_take(dir, &m.uid, err) < 0 ||
	    al_vm_rundir_make(m.rundir, sizeof m.rundir, err) < 0)
		goto fail;
	l.rundir = m.rundir;
	l.uid = m.uid.uid;
	if (al_vm_machine_boot(&m, &l, &agent_fd, err) < 0)
		goto fail;
	/* The guest init now waits for GO with this host connected: the
	 * state every clone resumes in. */
	state_fd = open(state, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (state_fd < 0) {
		al_err_sys(err, AL_ESYS, errno, "create %s", state);
		goto fail;
	}
	if (al_vm_machine_save(&m, state_fd, err) < 0)
		goto fail;
	if (fsync(state_fd) < 0) {
		al_err_sys(err, AL_ESYS, errno, "fsync %s", state);
		goto fail;
	}
	al_vm_machine_quit(&m);
	al_vm_machine_release(&m);
	if (save_ram(mem_fd, mem, err) < 0)
		return -1;
	return fsync_path(disk, err);
fail:
	al_vm_machine_explain(&m, 1, err);
	al_vm_machine_release(&m);
	return -1;
}

static int write_small(const char *path, const char *s, al_err *err)
{
	al_autofd int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				0644);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s) ||
	    fsync(fd) < 0)
		return al_err_sys(err, AL_ESYS, errno, "write %s", path);
	return 0;
}

void al_vm_snapdir_remove(const char *dir)
{
	static const char *const names[] = {"disk.ext4", AL_VM_BASE_DISK,
					    "mem",	 "state",
					    "accel",	 "format"};
	char p[AL_PATH_MAX + 16];
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		snprintf(p, sizeof p, "%s/%s", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
}

/* A VMDIR with the snapshots of other vCPU counts in it (vm/shape.h),
 * their locks and half-made ones. */
static void remove_vmdir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[AL_PATH_MAX + 300];
	while (d != NULL && (e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, AL_VM_SHAPE_PREFIX,
			    sizeof AL_VM_SHAPE_PREFIX - 1) != 0)
			continue;
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		if (unlink(p) < 0 && errno == EISDIR)
			al_vm_snapdir_remove(p);
	}
	if (d != NULL)
		closedir(d);
	al_vm_snapdir_remove(dir);
}

/* The artefacts in nd: from the cache entry of rootfs's key (1) or built
 * (0, and stored in the cache). A cache that fails is only logged: the
 * build goes on without it. */
static int make_artefacts(const char *rootfs, const char *nd,
			  const al_vm_kernel *k, al_vm_accel accel,
			  const char *cache, char *key, al_err *err)
{
	char disk[AL_PATH_MAX], accel_p[AL_PATH_MAX], format_p[AL_PATH_MAX];
	char base[AL_PATH_MAX];
	char kbuf[AL_VM_TMPLCACHE_KEY_LEN + 1] = "";
	if (al_vm_path(disk, sizeof disk, err, "%s/disk.ext4", nd) < 0 ||
	    al_vm_path(base, sizeof base, err, "%s/" AL_VM_BASE_DISK, nd) < 0 ||
	    al_vm_path(accel_p, sizeof accel_p, err, "%s/accel", nd) < 0 ||
	    al_vm_path(format_p, sizeof format_p, err, "%s/format", nd) < 0)
		return -1;
	al_err cerr = {0};
	if (cache != NULL && cache[0] != '\0') {
		if (al_vm_tmplcache_key(rootfs, k, accel, kbuf, &cerr) < 0) {
			al_warn("vm template cache: no key for %s: %s", rootfs,
				cerr.msg);
			kbuf[0] = '\0';
		} else {
			int hit = al_vm_tmplcache_get(cache, kbuf, nd, &cerr);
			if (hit < 0)
				al_warn("vm template cache %s: %s", cache,
					cerr.msg);
			if (hit > 0) {
				if (key != NULL)
					memcpy(key, kbuf, sizeof kbuf);
				return 1;
			}
		}
	}
	if (build_disk(rootfs, base, err) < 0 ||
	    al_file_clone(base, disk, AL_FILE_CLONE_SYNC, NULL, err) < 0 ||
	    al_vm_snapshot_boot(nd, AL_VM_VCPUS, k, accel, NULL, err) < 0 ||
	    write_small(accel_p, al_vm_accel_name(accel), err) < 0 ||
	    write_small(format_p, AL_VM_SNAPSHOT_FORMAT, err) < 0)
		return -1;
	if (kbuf[0] != '\0' && al_vm_tmplcache_put(cache, kbuf, nd, &cerr) < 0)
		al_warn("vm template cache %s: %s", cache, cerr.msg);
	if (key != NULL)
		memcpy(key, kbuf, sizeof kbuf);
	return 0;
}

int al_vm_template_build(const char *rootfs, const char *vmdir,
			 const al_vm_kernel *k, al_vm_accel accel,
			 const char *cache, char *key, al_err *err)
{
	char nd[AL_PATH_MAX], link[AL_PATH_MAX], tmplink[AL_PATH_MAX];
	if (key != NULL)
		key[0] = '\0';
	if (rootfs == NULL || rootfs[0] != '/' || vmdir == NULL ||
	    vmdir[0] != '/')
		return al_err_set(err, AL_EINVAL, 0,
				  "rootfs and vmdir must be absolute");
	if (al_vm_path(nd, sizeof nd, err, "%s.new", vmdir) < 0 ||
	    al_vm_path(link, sizeof link, err, "%s/" AL_VM_LINK, rootfs) < 0 ||
	    al_vm_path(tmplink, sizeof tmplink, err, "%s/" AL_VM_LINK ".new",
		       rootfs) < 0)
		return -1;
	remove_vmdir(nd);
	if (mkdir(nd, 0700) < 0)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", nd);
	/* The link is the host's business; keep it out of the guest. */
	unlink(link);
	int64_t t0 = al_now_ms();
	int cached = make_artefacts(rootfs, nd, k, accel, cache, key, err);
	if (cached < 0)
		goto fail;
	/* Swap the complete new directory in; clones running from the old
	 * one keep their (now unlinked) memory file mapped. */
	if (syscall(SYS_renameat2, AT_FDCWD, nd, AT_FDCWD, vmdir,
		    RENAME_EXCHANGE) == 0) {
		remove_vmdir(nd);
	} else if (errno != ENOENT || rename(nd, vmdir) < 0) {
		al_err_sys(err, AL_ESYS, errno, "rename %s", nd);
		goto fail;
	}
	unlink(tmplink);
	if (symlink(vmdir, tmplink) < 0 || rename(tmplink, link) < 0) {
		al_err_sys(err, AL_ESYS, errno, "link %s", link);
		unlink(tmplink);
		return -1;
	}
	al_info("vm template %s %s in %lld ms", vmdir,
		cached ? "copied from the cache" : "built",
		(long long)(al_now_ms() - t0));
	return cached;
fail:
	remove_vmdir(nd);
	al_err_wrap(err, "building vm template for %s", rootfs);
	return -1;
}
