/* File operations inside a layer. A layer's tree is what earlier steps
 * (user commands) left there: a symlink /sbin -> / or /etc -> /host must
 * still land inside the layer. Every path is resolved with openat2()
 * RESOLVE_IN_ROOT from the layer's root directory, like al_context_copy
 * does, and the last component is then created relative to its resolved
 * parent, never through a path string. */
#include "builder.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/rmtree.h"
#include "template/context.h"

#define RESOLVE_FLAGS                                                          \
	(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

static int open_in_root(int rootfd, const char *rel, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.resolve = RESOLVE_FLAGS,
	};
	long fd;
	do
		fd = syscall(SYS_openat2, rootfd, rel, &how, sizeof how);
	while (fd < 0 && (errno == EAGAIN || errno == EINTR));
	return (int)fd;
}

/* Split abs ("/a/b") into checked components in buf; NULL-terminated. */
static int components(const char *abs, char *buf, size_t buflen, char **comp,
		      size_t maxcomp, size_t *n, al_err *err)
{
	if (abs == NULL || abs[0] != '/' || strlen(abs) >= buflen)
		return al_err_set(err, AL_EPATH, 0, "path %s is not absolute",
				  abs != NULL ? abs : "(null)");
	snprintf(buf, buflen, "%s", abs);
	*n = 0;
	for (char *save = NULL, *c = strtok_r(buf, "/", &save); c != NULL;
	     c = strtok_r(NULL, "/", &save)) {
		if (strcmp(c, ".") == 0)
			continue;
		if (strcmp(c, "..") == 0)
			return al_err_set(err, AL_EPATH, 0,
					  "path %s has a '..' component", abs);
		if (*n >= maxcomp)
			return al_err_set(err, AL_EPATH, 0,
					  "path %s is too deep", abs);
		comp[(*n)++] = c;
	}
	return 0;
}

/* fd of directory abs inside root, created (mode) when missing. */
static int open_dir_p(int rootfd, const char *abs, mode_t mode, al_err *err)
{
	char buf[4200];
	char *comp[256];
	size_t n = 0;
	if (components(abs, buf, sizeof buf, comp, 256, &n, err) < 0)
		return -1;
	int cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		return al_err_sys(err, AL_ESYS, errno, "dup");
	char prefix[4200] = "";
	size_t plen = 0;
	for (size_t i = 0; i < n; i++) {
		/* The prefix is resolved from the layer's root every time,
		 * so a symlink met on the way (absolute or relative) is
		 * followed inside the layer; a missing component is made
		 * in its resolved parent. */
		int w = snprintf(prefix + plen, sizeof prefix - plen, "%s%s",
				 plen > 0 ? "/" : "", comp[i]);
		if (w < 0 || (size_t)w >= sizeof prefix - plen) {
			close(cur);
			return al_err_set(err, AL_EPATH, 0, "path %s too long",
					  abs);
		}
		plen += (size_t)w;
		int next = open_in_root(rootfd, prefix, O_DIRECTORY | O_RDONLY);
		if (next < 0 && errno == ENOENT &&
		    (mkdirat(cur, comp[i], mode) == 0 || errno == EEXIST))
			next = open_in_root(rootfd, prefix,
					    O_DIRECTORY | O_RDONLY);
		if (next < 0) {
			int e = errno;
			close(cur);
			return al_err_sys(err,
					  e == ENOTDIR ? AL_EPATH : AL_ESYS, e,
					  "directory %s in the layer", abs);
		}
		close(cur);
		cur = next;
	}
	return cur;
}

static int open_root(const char *root, al_err *err)
{
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", root);
	return fd;
}

int bld_fsroot_mkdir_p(const char *root, const char *abs, mode_t mode,
		       al_err *err)
{
	al_autofd int rootfd = open_root(root, err);
	if (rootfd < 0)
		return -1;
	int fd = open_dir_p(rootfd, abs, mode, err);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

int bld_fsroot_write_file(const char *root, const char *abs, const void *data,
			  size_t len, mode_t mode, al_err *err)
{
	char dir[4200];
	if (abs == NULL || abs[0] != '/' || strlen(abs) >= sizeof dir)
		return al_err_set(err, AL_EPATH, 0, "bad path");
	snprintf(dir, sizeof dir, "%s", abs);
	char *slash = strrchr(dir, '/');
	const char *base = abs + (slash - dir) + 1;
	if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return al_err_set(err, AL_EPATH, 0, "bad file name in %s", abs);
	if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';

	al_autofd int rootfd = open_root(root, err);
	if (rootfd < 0)
		return -1;
	al_autofd int dfd = open_dir_p(rootfd, dir, 0755, err);
	if (dfd < 0)
		return -1;
	char tmp[300];
	snprintf(tmp, sizeof tmp, ".%.200s.airlock-new", base);
	unlinkat(dfd, tmp, 0);
	al_autofd int fd = openat(dfd, tmp,
				  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
					  O_CLOEXEC,
				  0600);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "create %s", abs);
	const char *p = data;
	size_t off = 0;
	while (off < len) {
		ssize_t w = write(fd, p + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = errno;
			unlinkat(dfd, tmp, 0);
			return al_err_sys(err, AL_ESYS, e, "write %s", abs);
		}
		off += (size_t)w;
	}
	if (fchown(fd, 0, 0) < 0 || fchmod(fd, mode) < 0 ||
	    renameat(dfd, tmp, dfd, base) < 0) {
		int e = errno;
		unlinkat(dfd, tmp, 0);
		return al_err_sys(err, AL_ESYS, e, "install %s", abs);
	}
	return 0;
}

int bld_fsroot_ensure_sysdirs(const char *root, al_err *err)
{
	static const struct {
		const char *name;
		mode_t mode;
	} dirs[] = {
		{"proc", 0555},
		{"dev", 0755},
		{"sys", 0555},
		{"tmp", 01777},
	};
	al_autofd int rootfd = open_root(root, err);
	if (rootfd < 0)
		return -1;
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		struct stat st;
		if (fstatat(rootfd, dirs[i].name, &st, AT_SYMLINK_NOFOLLOW) ==
		    0) {
			/* The jail mounts over these: a symlink would
			 * redirect the mount (it refuses to start then). */
			if (!S_ISDIR(st.st_mode))
				return al_err_set(err, AL_EPATH, 0,
						  "/%s in the template is not "
						  "a directory",
						  dirs[i].name);
			continue;
		}
		if (mkdirat(rootfd, dirs[i].name, dirs[i].mode) < 0 ||
		    fchmodat(rootfd, dirs[i].name, dirs[i].mode, 0) < 0)
			return al_err_sys(err, AL_ESYS, errno, "mkdir /%s",
					  dirs[i].name);
	}
	return 0;
}

int bld_fsroot_remove_top(const char *root, const char *name, al_err *err)
{
	al_autofd int rootfd = open_root(root, err);
	if (rootfd < 0)
		return -1;
	struct stat st;
	if (fstatat(rootfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0
				       : al_err_sys(err, AL_ESYS, errno,
						    "stat /%s", name);
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(rootfd, name, 0) < 0)
			return al_err_sys(err, AL_ESYS, errno, "unlink /%s",
					  name);
		return 0;
	}
	char path[AL_PATH_MAX + 300];
	snprintf(path, sizeof path, "%s/%s", root, name);
	return al_rmtree(path, err);
}

/* Read all of fd (a regular file of at most max bytes); name for errors. */
static char *read_fd(int fd, const char *name, size_t max, size_t *len,
		     al_err *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > max) {
		al_err_set(err, AL_EINVAL, 0,
			   "%s is not a regular file of at most %zu bytes",
			   name, max);
		return NULL;
	}
	size_t n = (size_t)st.st_size;
	char *buf = malloc(n + 1);
	if (buf == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		return NULL;
	}
	size_t off = 0;
	while (off < n) {
		ssize_t r = read(fd, buf + off, n - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		off += (size_t)r;
	}
	if (off != n) {
		free(buf);
		al_err_set(err, AL_ESYS, 0, "short read of %s", name);
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

char *bld_fsroot_read_host_file(const char *path, size_t max, size_t *len,
				al_err *err)
{
	al_autofd int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		al_err_sys(err, errno == ENOENT ? AL_ENOENT : AL_ESYS, errno,
			   "open %s", path);
		return NULL;
	}
	return read_fd(fd, path, max, len, err);
}

char *bld_fsroot_read_file(const char *root, const char *abs, size_t max,
			   size_t *len, al_err *err)
{
	if (abs == NULL || abs[0] != '/') {
		al_err_set(err, AL_EPATH, 0, "bad path");
		return NULL;
	}
	al_autofd int rootfd = open_root(root, err);
	if (rootfd < 0)
		return NULL;
	al_autofd int fd = open_in_root(rootfd, abs + 1, O_RDONLY);
	if (fd < 0) {
		al_err_sys(err, errno == ENOENT ? AL_ENOENT : AL_ESYS, errno,
			   "open %s in the layer", abs);
		return NULL;
	}
	return read_fd(fd, abs, max, len, err);
}

void bld_fsroot_umount_below(const char *path)
{
	size_t pl = strlen(path);
	/* Deepest first: repeat until nothing below path is mounted. */
	for (int round = 0; round < 64; round++) {
		FILE *f = fopen("/proc/self/mountinfo", "re");
		if (f == NULL)
			return;
		char line[4096], best[4096] = "";
		while (fgets(line, sizeof line, f) != NULL) {
			char mp[4096];
			/* id parent maj:min root mountpoint ... */
			if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
				continue;
			if (strncmp(mp, path, pl) == 0 &&
			    (mp[pl] == '/' || mp[pl] == '\0') &&
			    strlen(mp) > strlen(best))
				snprintf(best, sizeof best, "%s", mp);
		}
		fclose(f);
		if (best[0] == '\0')
			return;
		if (umount2(best, MNT_DETACH) < 0) {
			al_warn("umount %s: %s", best, strerror(errno));
			return;
		}
	}
}

void bld_fsroot_sha256_hex(const char *s, char out[AL_AF_KEY_HEX])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	static const char hex[] = "0123456789abcdef";
	if (EVP_Digest(s, strlen(s), md, &mdlen, EVP_sha256(), NULL) != 1 ||
	    mdlen != 32) {
		memset(out, '0', 64);
		out[64] = '\0';
		return;
	}
	for (unsigned int i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
}
