/* vm template cache: see vm/tmplcache.h. */
#include "vm/tmplcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <linux/fs.h>

#include "base/cleanup.h"
#include "base/file.h"
#include "vm/guest.h"

#define MKFS "/usr/sbin/mkfs.ext4"
/* A tree deeper than this is not a root filesystem we built. */
#define MAX_DEPTH 64

static const char *const entry_files[] = {"disk.ext4", AL_VM_BASE_DISK,
					  "mem",       "state",
					  "accel",     "format"};
#define N_ENTRY_FILES (sizeof entry_files / sizeof *entry_files)

typedef struct hasher {
	EVP_MD_CTX *md;
	char path[PATH_MAX];
	size_t root_len;
	al_err *err;
} hasher;

static int put(hasher *h, const void *p, size_t n)
{
	if (EVP_DigestUpdate(h->md, p, n) != 1)
		return al_err_set(h->err, AL_ESYS, 0, "sha256 update");
	return 0;
}

/* A length, then the bytes: no two different fields hash alike. */
static int put_field(hasher *h, const void *p, size_t n)
{
	char len[24];
	int k = snprintf(len, sizeof len, "%zu:", n);
	return put(h, len, (size_t)k) < 0 ? -1 : put(h, p, n);
}

static int put_str(hasher *h, const char *s)
{
	return put_field(h, s, strlen(s));
}

static int put_fd(hasher *h, int fd)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return al_err_sys(h->err, AL_ESYS, errno, "read %s",
					  h->path);
		if (n == 0)
			return 0;
		if (put(h, buf, (size_t)n) < 0)
			return -1;
	}
}

/* The file's contents, prefixed by the bytes read (it may have changed
 * size since the stat). */
static int put_file(hasher *h, const char *path)
{
	al_autofd int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(h->err, AL_ESYS, errno, "open %s", path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return al_err_sys(h->err, AL_ESYS, errno, "stat %s", path);
	char size[32];
	snprintf(size, sizeof size, "%lld", (long long)st.st_size);
	return put_str(h, size) < 0 ? -1 : put_fd(h, fd);
}

/* Size and mtime of a program: a new package changes them. */
static int put_program(hasher *h, const char *path)
{
	struct stat st;
	char s[96];
	if (stat(path, &st) < 0)
		snprintf(s, sizeof s, "missing");
	else
		snprintf(s, sizeof s, "%lld %lld.%09ld", (long long)st.st_size,
			 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	return put_str(h, path) < 0 ? -1 : put_str(h, s);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Extended attributes (file capabilities, ACLs), sorted by name: the
 * kernel lists them in its own storage order. */
static int put_xattrs(hasher *h)
{
	char names[4096], val[4096];
	const char *v[256];
	size_t nv = 0;
	ssize_t n = llistxattr(h->path, names, sizeof names);
	if (n < 0 && (errno == ENOTSUP || errno == ENODATA))
		n = 0;
	if (n < 0)
		return al_err_sys(h->err, AL_ESYS, errno, "xattrs of %s",
				  h->path);
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
		if (nv == sizeof v / sizeof *v)
			return al_err_set(h->err, AL_EINVAL, 0,
					  "%s: too many xattrs", h->path);
		v[nv++] = names + i;
	}
	if (nv > 1)
		qsort(v, nv, sizeof *v, cmp_names);
	for (size_t i = 0; i < nv; i++) {
		ssize_t len = lgetxattr(h->path, v[i], val, sizeof val);
		if (len < 0)
			return al_err_sys(h->err, AL_ESYS, errno,
					  "xattr %s of %s", v[i], h->path);
		if (put_str(h, v[i]) < 0 || put_field(h, val, (size_t)len) < 0)
			return -1;
	}
	return 0;
}

static void free_names(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* The names in directory h->path but . and .., sorted. */
static int list_dir(hasher *h, char ***out, size_t *nout)
{
	int fd = open(h->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (d == NULL) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return al_err_sys(h->err, AL_ESYS, e, "opendir %s", h->path);
	}
	char **v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	errno = 0;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			char **nv = realloc(v, cap * sizeof *v);
			if (nv == NULL)
				goto oom;
			v = nv;
		}
		if ((v[n] = strdup(e->d_name)) == NULL)
			goto oom;
		n++;
	}
	closedir(d);
	if (n > 1)
		qsort(v, n, sizeof *v, cmp_names);
	*out = v;
	*nout = n;
	return 0;
oom:
	closedir(d);
	free_names(v, n);
	return al_err_set(h->err, AL_ENOMEM, 0, "listing %s", h->path);
}

static int put_tree(hasher *h, int depth);

/* One entry at h->path: its metadata, then what it holds. */
static int put_entry(hasher *h, int depth)
{
	struct stat st;
	if (lstat(h->path, &st) < 0)
		return al_err_sys(h->err, AL_ESYS, errno, "stat %s", h->path);
	char meta[160];
	/* A directory's link count is the filesystem's business. */
	snprintf(meta, sizeof meta, "%o %u %u %lld %lu %llx",
		 (unsigned)st.st_mode, (unsigned)st.st_uid, (unsigned)st.st_gid,
		 S_ISDIR(st.st_mode) ? 0LL : (long long)st.st_size,
		 S_ISDIR(st.st_mode) ? 0UL : (unsigned long)st.st_nlink,
		 (unsigned long long)st.st_rdev);
	if (put_str(h, h->path + h->root_len) < 0 || put_str(h, meta) < 0 ||
	    put_xattrs(h) < 0)
		return -1;
	if (S_ISREG(st.st_mode))
		return put_file(h, h->path);
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlink(h->path, target, sizeof target);
		if (n < 0 || (size_t)n >= sizeof target)
			return al_err_sys(h->err, AL_ESYS, errno, "readlink %s",
					  h->path);
		return put_field(h, target, (size_t)n);
	}
	if (S_ISDIR(st.st_mode))
		return put_tree(h, depth + 1);
	return 0;
}

static int put_tree(hasher *h, int depth)
{
	if (depth > MAX_DEPTH)
		return al_err_set(h->err, AL_EINVAL, 0,
				  "%s: directories nested too deep", h->path);
	char **names = NULL;
	size_t n = 0;
	if (list_dir(h, &names, &n) < 0)
		return -1;
	size_t len = strlen(h->path);
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		/* The host's links into the state dir, not the guest's. */
		if (depth == 0 && (strcmp(names[i], AL_VM_LINK) == 0 ||
				   strcmp(names[i], AL_VM_DISK) == 0))
			continue;
		if (len + 1 + strlen(names[i]) >= sizeof h->path) {
			rc = al_err_set(h->err, AL_EINVAL, 0,
					"path under %s too long", h->path);
			break;
		}
		snprintf(h->path + len, sizeof h->path - len, "/%s", names[i]);
		rc = put_entry(h, depth);
		h->path[len] = '\0';
	}
	free_names(names, n);
	return rc;
}

int al_vm_tmplcache_key(const char *rootfs, const al_vm_kernel *k,
			al_vm_accel accel, char *key, al_err *err)
{
	hasher *h = calloc(1, sizeof *h);
	if (h == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "vm template key");
	h->err = err;
	h->md = EVP_MD_CTX_new();
	int rc = -1;
	char sizes[64];
	snprintf(sizes, sizeof sizes, "%d MiB %llu", AL_VM_MEM_MB,
		 (unsigned long long)AL_VM_DISK_BYTES);
	if (strlen(rootfs) >= sizeof h->path) {
		al_err_set(err, AL_EINVAL, 0, "rootfs path too long");
		goto out;
	}
	snprintf(h->path, sizeof h->path, "%s", rootfs);
	h->root_len = strlen(h->path);
	if (h->md == NULL ||
	    EVP_DigestInit_ex(h->md, EVP_sha256(), NULL) != 1) {
		al_err_set(err, AL_ESYS, 0, "sha256 init");
		goto out;
	}
	if (put_str(h, "airlock vm template") < 0 ||
	    put_str(h, AL_VM_SNAPSHOT_FORMAT) < 0 ||
	    put_str(h, al_vm_accel_name(accel)) < 0 || put_str(h, sizes) < 0 ||
	    put_file(h, k->vmlinuz) < 0 || put_file(h, k->initrd) < 0 ||
	    put_program(h, AL_VM_QEMU) < 0 || put_program(h, MKFS) < 0 ||
	    put_tree(h, 0) < 0)
		goto out;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	if (EVP_DigestFinal_ex(h->md, md, &mdlen) != 1 || mdlen != 32) {
		al_err_set(err, AL_ESYS, 0, "sha256 final");
		goto out;
	}
	for (unsigned i = 0; i < mdlen; i++)
		snprintf(key + 2 * i, 3, "%02x", md[i]);
	rc = 0;
out:
	EVP_MD_CTX_free(h->md);
	free(h);
	return rc;
}

/* The cache dir is ours alone: what is in it is restored into every
 * sandbox, so one that others can write is refused. */
static int cache_safe(const char *cache, al_err *err)
{
	struct stat st;
	if (lstat(cache, &st) < 0)
		return al_err_sys(err, AL_ESYS, errno, "vm template cache %s",
				  cache);
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022) != 0)
		return al_err_set(err, AL_EPERM, 0,
				  "vm template cache %s: not a directory of "
				  "ours that only we can write",
				  cache);
	return 0;
}

/* src to dst: a reflink where the filesystem can, else the data extents
 * (the disk and RAM images are sparse). */
static int clone_files(const char *from, const char *to, al_err *err)
{
	char s[PATH_MAX], d[PATH_MAX];
	for (size_t i = 0; i < N_ENTRY_FILES; i++) {
		if ((size_t)snprintf(s, sizeof s, "%s/%s", from,
				     entry_files[i]) >= sizeof s ||
		    (size_t)snprintf(d, sizeof d, "%s/%s", to,
				     entry_files[i]) >= sizeof d)
			return al_err_set(err, AL_EINVAL, 0, "path too long");
		if (al_file_clone(s, d, AL_FILE_CLONE_SYNC, NULL, err) < 0)
			return -1;
	}
	return 0;
}

static void remove_entry(const char *dir)
{
	char p[PATH_MAX + 16];
	for (size_t i = 0; i < N_ENTRY_FILES; i++) {
		snprintf(p, sizeof p, "%s/%s", dir, entry_files[i]);
		unlink(p);
	}
	rmdir(dir);
}

static int key_valid(const char *key)
{
	if (strlen(key) != AL_VM_TMPLCACHE_KEY_LEN)
		return 0;
	return strspn(key, "0123456789abcdef") == AL_VM_TMPLCACHE_KEY_LEN;
}

int al_vm_tmplcache_get(const char *cache, const char *key, const char *dst,
			al_err *err)
{
	if (!key_valid(key))
		return al_err_set(err, AL_EINVAL, 0, "bad vm template key");
	char entry[PATH_MAX], p[PATH_MAX + 16];
	if ((size_t)snprintf(entry, sizeof entry, "%s/%s", cache, key) >=
	    sizeof entry)
		return al_err_set(err, AL_EINVAL, 0, "cache path too long");
	if (access(cache, F_OK) < 0 && errno == ENOENT)
		return 0;
	if (cache_safe(cache, err) < 0)
		return -1;
	for (size_t i = 0; i < N_ENTRY_FILES; i++) {
		snprintf(p, sizeof p, "%s/%s", entry, entry_files[i]);
		if (access(p, R_OK) < 0)
			return 0;
	}
	if (clone_files(entry, dst, err) < 0) {
		for (size_t i = 0; i < N_ENTRY_FILES; i++) {
			snprintf(p, sizeof p, "%s/%s", dst, entry_files[i]);
			unlink(p);
		}
		return -1;
	}
	return 1;
}

int al_vm_tmplcache_put(const char *cache, const char *key, const char *src,
			al_err *err)
{
	if (!key_valid(key))
		return al_err_set(err, AL_EINVAL, 0, "bad vm template key");
	char entry[PATH_MAX], tmp[PATH_MAX];
	if ((size_t)snprintf(entry, sizeof entry, "%s/%s", cache, key) >=
		    sizeof entry ||
	    (size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d", entry,
			     (int)getpid()) >= sizeof tmp)
		return al_err_set(err, AL_EINVAL, 0, "cache path too long");
	if (mkdir(cache, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", cache);
	if (cache_safe(cache, err) < 0)
		return -1;
	if (access(entry, F_OK) == 0)
		return 0;
	remove_entry(tmp);
	if (mkdir(tmp, 0700) < 0)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", tmp);
	if (clone_files(src, tmp, err) < 0) {
		remove_entry(tmp);
		return -1;
	}
	if (rename(tmp, entry) < 0) {
		int e = errno;
		remove_entry(tmp);
		/* Another build stored the same snapshot first. */
		if (e == EEXIST || e == ENOTEMPTY)
			return 0;
		return al_err_sys(err, AL_ESYS, e, "rename %s", tmp);
	}
	return 0;
}
