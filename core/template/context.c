#include "template/context.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <linux/openat2.h>
#include <openssl/evp.h>

#include "base/cleanup.h"
#include "base/log.h"

/* Inside the unpacked context: nothing but plain directories on the way
 * down, so no entry can be redirected anywhere. */
#define CTX_RESOLVE                                                            \
	(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |       \
	 RESOLVE_NO_XDEV)
/* Inside a rootfs: its symlinks are legitimate (/bin -> usr/bin) but are
 * resolved as if the rootfs were "/", so none leads out of it. */
#define ROOT_RESOLVE (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

#define IO_BUF (128 * 1024)

static int xopenat2(int dirfd, const char *path, int flags, mode_t mode,
		    uint64_t resolve)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.mode = (flags & O_CREAT) != 0 ? mode : 0,
		.resolve = resolve,
	};
	for (int tries = 0;; tries++) {
		long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
		/* EAGAIN: a concurrent rename raced the lookup; retry. */
		if (fd < 0 &&
		    (errno == EINTR || (errno == EAGAIN && tries < 16)))
			continue;
		return (int)fd;
	}
}

/* An entry's name for a message: printable ASCII only, shortened, since
 * names come from the archive and messages end up in API answers. */
static const char *shown(const char *s, char *buf, size_t cap)
{
	size_t n = 0;
	for (; s[n] != '\0' && n + 4 < cap; n++) {
		unsigned char c = (unsigned char)s[n];
		buf[n] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	if (s[n] != '\0') {
		memcpy(buf + n, "...", 3);
		n += 3;
	}
	buf[n] = '\0';
	return buf;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, buf, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Normalize a relative name into out (PATH_MAX): "./" and empty
 * components dropped; absolute names, "..", control characters, over-long
 * names and components are refused. An empty result is "". */
static int rel_clean(const char *name, char *out, const char *what, al_err *err)
{
	char sb[96];
	if (name == NULL || name[0] == '\0')
		return al_err_set(err, AL_EPATH, 0, "%s with an empty name",
				  what);
	size_t len = strnlen(name, PATH_MAX);
	if (len >= PATH_MAX)
		return al_err_set(err, AL_EPATH, 0,
				  "%s name longer than %d bytes", what,
				  PATH_MAX - 1);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c < 0x20 || c == 0x7f)
			return al_err_set(err, AL_EPATH, 0,
					  "%s '%s': control character in the "
					  "name",
					  what, shown(name, sb, sizeof sb));
	}
	if (name[0] == '/')
		return al_err_set(err, AL_EPATH, 0,
				  "%s '%s': absolute names are not allowed",
				  what, shown(name, sb, sizeof sb));
	size_t o = 0;
	int depth = 0;
	const char *c = name;
	while (*c != '\0') {
		size_t n = strcspn(c, "/");
		if (n == 2 && c[0] == '.' && c[1] == '.')
			return al_err_set(err, AL_EPATH, 0,
					  "%s '%s': '..' is not allowed", what,
					  shown(name, sb, sizeof sb));
		if (n > NAME_MAX)
			return al_err_set(err, AL_EPATH, 0,
					  "%s '%s': a component is longer "
					  "than %d bytes",
					  what, shown(name, sb, sizeof sb),
					  NAME_MAX);
		if (n > 0 && !(n == 1 && c[0] == '.')) {
			if (++depth > AL_CONTEXT_MAX_DEPTH)
				return al_err_set(err, AL_EPATH, 0,
						  "%s '%s': deeper than %d "
						  "levels",
						  what,
						  shown(name, sb, sizeof sb),
						  AL_CONTEXT_MAX_DEPTH);
			if (o > 0)
				out[o++] = '/';
			memcpy(out + o, c, n);
			o += n;
		}
		c += n;
		if (*c == '/')
			c++;
	}
	out[o] = '\0';
	return 0;
}

static int resolve_err(int e, const char *what, const char *name, al_err *err)
{
	char sb[96];
	shown(name, sb, sizeof sb);
	if (e == ELOOP)
		return al_err_set(err, AL_EPATH, e,
				  "%s '%s' goes through a symlink", what, sb);
	if (e == ENOTDIR)
		return al_err_set(err, AL_EPATH, e,
				  "%s '%s' goes through a non-directory", what,
				  sb);
	if (e == EXDEV)
		return al_err_set(err, AL_EPATH, e,
				  "%s '%s' leaves its directory", what, sb);
	if (e == ENOENT)
		return al_err_set(err, AL_ENOENT, e, "%s '%s' does not exist",
				  what, sb);
	return al_err_sys(err, AL_ESYS, e, "%s '%s'", what, sb);
}

/* Open (O_PATH) the directory that holds the last component of rel, a
 * clean relative name, beneath rootfd and through real directories only;
 * missing ones are created (0755) when create. *base points into rel. */
static int ctx_parent(int rootfd, const char *rel, int create,
		      const char **base, const char *what, al_err *err)
{
	const char *slash = strrchr(rel, '/');
	*base = slash != NULL ? slash + 1 : rel;
	int cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
	if (cur < 0)
		return al_err_sys(err, AL_ESYS, errno, "dup");
	const char *c = rel;
	while (slash != NULL && c < slash) {
		char comp[NAME_MAX + 1];
		size_t n = strcspn(c, "/");
		memcpy(comp, c, n);
		comp[n] = '\0';
		int fd = xopenat2(cur, comp, O_PATH | O_DIRECTORY, 0,
				  CTX_RESOLVE);
		if (fd < 0 && errno == ENOENT && create) {
			if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST) {
				int e = errno;
				close(cur);
				return al_err_sys(err, AL_ESYS, e, "mkdir");
			}
			fd = xopenat2(cur, comp, O_PATH | O_DIRECTORY, 0,
				      CTX_RESOLVE);
		}
		if (fd < 0) {
			int e = errno;
			close(cur);
			return resolve_err(e, what, rel, err);
		}
		close(cur);
		cur = fd;
		c += n + 1;
	}
	return cur;
}

/* Remove a non-directory at parent/base, if any, so a new entry never
 * writes through an old one (a hardlink or a symlink). */
static int clear_slot(int parent, const char *base, const char *rel,
		      al_err *err)
{
	char sb[96];
	if (unlinkat(parent, base, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno == EISDIR || errno == EPERM)
		return al_err_set(err, AL_EPATH, errno,
				  "entry '%s' would replace a directory",
				  shown(rel, sb, sizeof sb));
	return al_err_sys(err, AL_ESYS, errno, "unlink '%s'",
			  shown(rel, sb, sizeof sb));
}

typedef struct unpack {
	struct archive *a;
	int rootfd;
	uint64_t bytes;
	uint64_t entries;
	al_context_limits lim;
	char *buf;
} unpack;

static int unpack_file(unpack *u, struct archive_entry *ent, int parent,
		       const char *base, const char *rel, al_err *err)
{
	char sb[96];
	int64_t size = archive_entry_size(ent);
	if (size < 0 || (uint64_t)size > u->lim.max_bytes - u->bytes)
		return al_err_set(err, AL_ETOOBIG, 0,
				  "build context is larger than %llu bytes",
				  (unsigned long long)u->lim.max_bytes);
	if (clear_slot(parent, base, rel, err) < 0)
		return -1;
	al_autofd int fd = openat(parent, base,
				  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
					  O_CLOEXEC,
				  0600);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "create '%s'",
				  shown(rel, sb, sizeof sb));
	for (;;) {
		la_ssize_t n = archive_read_data(u->a, u->buf, IO_BUF);
		if (n == 0)
			break;
		if (n < 0)
			return al_err_set(err, AL_EINVAL, 0,
					  "build context: damaged tar at '%s': "
					  "%s",
					  shown(rel, sb, sizeof sb),
					  archive_error_string(u->a));
		if ((uint64_t)n > u->lim.max_bytes - u->bytes)
			return al_err_set(err, AL_ETOOBIG, 0,
					  "build context is larger than %llu "
					  "bytes",
					  (unsigned long long)u->lim.max_bytes);
		u->bytes += (uint64_t)n;
		if (write_all(fd, u->buf, (size_t)n) < 0)
			return al_err_sys(err, AL_ESYS, errno, "write '%s'",
					  shown(rel, sb, sizeof sb));
	}
	mode_t mode = (archive_entry_perm(ent) & 0777) | 0400;
	if (fchmod(fd, mode) < 0)
		return al_err_sys(err, AL_ESYS, errno, "chmod '%s'",
				  shown(rel, sb, sizeof sb));
	return 0;
}

static int unpack_dir(struct archive_entry *ent, int parent, const char *base,
		      const char *rel, al_err *err)
{
	char sb[96];
	if (mkdirat(parent, base, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir '%s'",
				  shown(rel, sb, sizeof sb));
	al_autofd int fd = xopenat2(parent, base, O_RDONLY | O_DIRECTORY, 0,
				    CTX_RESOLVE);
	if (fd < 0) {
		if (errno == ENOTDIR || errno == ELOOP)
			return al_err_set(err, AL_EPATH, errno,
					  "directory entry '%s' conflicts "
					  "with an earlier entry",
					  shown(rel, sb, sizeof sb));
		return al_err_sys(err, AL_ESYS, errno, "open '%s'",
				  shown(rel, sb, sizeof sb));
	}
	if (fchmod(fd, (archive_entry_perm(ent) & 0777) | 0700) < 0)
		return al_err_sys(err, AL_ESYS, errno, "chmod '%s'",
				  shown(rel, sb, sizeof sb));
	return 0;
}

static int unpack_symlink(struct archive_entry *ent, int parent,
			  const char *base, const char *rel, al_err *err)
{
	char sb[96];
	const char *target = archive_entry_symlink(ent);
	if (target == NULL || target[0] == '\0' ||
	    strnlen(target, PATH_MAX) >= PATH_MAX)
		return al_err_set(err, AL_EPATH, 0,
				  "symlink '%s' has an empty or over-long "
				  "target",
				  shown(rel, sb, sizeof sb));
	for (const char *t = target; *t != '\0'; t++)
		if ((unsigned char)*t < 0x20 || *t == 0x7f)
			return al_err_set(err, AL_EPATH, 0,
					  "symlink '%s': control character "
					  "in the target",
					  shown(rel, sb, sizeof sb));
	if (clear_slot(parent, base, rel, err) < 0)
		return -1;
	if (symlinkat(target, parent, base) < 0)
		return al_err_sys(err, AL_ESYS, errno, "symlink '%s'",
				  shown(rel, sb, sizeof sb));
	return 0;
}

static int unpack_hardlink(unpack *u, const char *target, int parent,
			   const char *base, const char *rel, al_err *err)
{
	char sb[96];
	char trel[PATH_MAX];
	if (rel_clean(target, trel, "hardlink target", err) < 0)
		return -1;
	if (trel[0] == '\0')
		return al_err_set(err, AL_EPATH, 0,
				  "hardlink '%s' points at the context root",
				  shown(rel, sb, sizeof sb));
	const char *tbase;
	al_err terr = {0};
	al_autofd int tparent = ctx_parent(u->rootfd, trel, 0, &tbase,
					   "hardlink target", &terr);
	if (tparent < 0) {
		if (terr.code == AL_ENOENT)
			return al_err_set(err, AL_EPATH, terr.sys_errno,
					  "hardlink '%s' must point at an "
					  "earlier file of the archive",
					  shown(rel, sb, sizeof sb));
		if (err != NULL)
			*err = terr;
		return -1;
	}
	if (clear_slot(parent, base, rel, err) < 0)
		return -1;
	/* No AT_SYMLINK_FOLLOW: a link to a symlink links the symlink. */
	if (linkat(tparent, tbase, parent, base, 0) < 0) {
		if (errno == ENOENT || errno == EPERM)
			return al_err_set(err, AL_EPATH, errno,
					  "hardlink '%s' must point at an "
					  "earlier file of the archive",
					  shown(rel, sb, sizeof sb));
		return al_err_sys(err, AL_ESYS, errno, "link '%s'",
				  shown(rel, sb, sizeof sb));
	}
	return 0;
}

static int unpack_entry(unpack *u, struct archive_entry *ent, al_err *err)
{
	char sb[96];
	char rel[PATH_MAX];
	if (rel_clean(archive_entry_pathname(ent), rel, "entry", err) < 0)
		return -1;
	const char *hl = archive_entry_hardlink(ent);
	mode_t type = archive_entry_filetype(ent);
	if (rel[0] == '\0') {
		/* "./" itself: nothing to create. */
		if (hl == NULL && type == AE_IFDIR)
			return 0;
		return al_err_set(err, AL_EPATH, 0,
				  "entry '.' must be a directory");
	}
	if (hl == NULL && type != AE_IFREG && type != AE_IFDIR &&
	    type != AE_IFLNK)
		return al_err_set(err, AL_EPATH, 0,
				  "entry '%s' is a device, FIFO or socket: "
				  "only files, directories and links are "
				  "allowed",
				  shown(rel, sb, sizeof sb));
	const char *base;
	al_autofd int parent = ctx_parent(u->rootfd, rel, 1, &base, "entry",
					  err);
	if (parent < 0)
		return -1;
	if (hl != NULL)
		return unpack_hardlink(u, hl, parent, base, rel, err);
	switch (type) {
	case AE_IFREG:
		return unpack_file(u, ent, parent, base, rel, err);
	case AE_IFDIR:
		return unpack_dir(ent, parent, base, rel, err);
	default:
		return unpack_symlink(ent, parent, base, rel, err);
	}
}

static int dir_is_empty(int fd, al_err *err)
{
	int d2 = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d2 < 0)
		return al_err_sys(err, AL_ESYS, errno, "open");
	DIR *d = fdopendir(d2);
	if (d == NULL) {
		close(d2);
		return al_err_sys(err, AL_ESYS, errno, "fdopendir");
	}
	int empty = 1;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			empty = 0;
	closedir(d);
	return empty;
}

int al_context_unpack(int tar_fd, const char *dir, const al_context_limits *lim,
		      al_err *err)
{
	unpack u = {0};
	u.lim.max_bytes = AL_CONTEXT_MAX_BYTES;
	u.lim.max_entries = AL_CONTEXT_MAX_ENTRIES;
	if (lim != NULL)
		u.lim = *lim;
	al_autofd int rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
						 O_CLOEXEC);
	if (rootfd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", dir);
	int empty = dir_is_empty(rootfd, err);
	if (empty < 0)
		return -1;
	if (!empty)
		return al_err_set(err, AL_EINVAL, 0,
				  "unpack target %s is not empty", dir);
	u.rootfd = rootfd;
	al_autofree char *buf = malloc(IO_BUF);
	u.a = archive_read_new();
	if (buf == NULL || u.a == NULL) {
		archive_read_free(u.a);
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	}
	u.buf = buf;
	int rc = -1;
	/* Only tar, plain or gzip: no format or filter that would make
	 * libarchive run an external program. */
	if (archive_read_support_format_tar(u.a) != ARCHIVE_OK ||
	    archive_read_support_filter_gzip(u.a) != ARCHIVE_OK) {
		al_err_set(err, AL_EINTERNAL, 0,
			   "libarchive lacks built-in tar or gzip support");
		goto out;
	}
	if (archive_read_open_fd(u.a, tar_fd, 64 * 1024) != ARCHIVE_OK) {
		al_err_set(err, AL_EINVAL, 0,
			   "build context is not a tar archive: %s",
			   archive_error_string(u.a));
		goto out;
	}
	for (;;) {
		struct archive_entry *ent;
		int r = archive_read_next_header(u.a, &ent);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			al_err_set(err, AL_EINVAL, 0,
				   "build context is not a valid tar: %s",
				   archive_error_string(u.a));
			goto out;
		}
		if (++u.entries > u.lim.max_entries) {
			al_err_set(err, AL_ETOOBIG, 0,
				   "build context has more than %llu entries",
				   (unsigned long long)u.lim.max_entries);
			goto out;
		}
		if (unpack_entry(&u, ent, err) < 0)
			goto out;
	}
	rc = 0;
out:
	archive_read_free(u.a);
	return rc;
}

/* --- sorted directory listing --- */

typedef struct names {
	char **v;
	size_t n;
} names;

static void names_free(names *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in directory fd, byte-sorted; *budget counts down entries
 * across a whole walk (AL_ETOOBIG when it runs out). */
static int list_dir(int fd, names *out, uint64_t *budget, al_err *err)
{
	out->v = NULL;
	out->n = 0;
	int d2 = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d2 < 0)
		return al_err_sys(err, AL_ESYS, errno, "open directory");
	DIR *d = fdopendir(d2);
	if (d == NULL) {
		close(d2);
		return al_err_sys(err, AL_ESYS, errno, "fdopendir");
	}
	size_t cap = 0;
	int rc = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (*budget == 0) {
			rc = al_err_set(err, AL_ETOOBIG, 0,
					"more than %d entries",
					AL_CONTEXT_MAX_ENTRIES);
			break;
		}
		(*budget)--;
		if (out->n == cap) {
			cap = cap != 0 ? cap * 2 : 32;
			char **v = realloc(out->v, cap * sizeof *v);
			if (v == NULL) {
				rc = al_err_set(err, AL_ENOMEM, 0,
						"out of memory");
				break;
			}
			out->v = v;
		}
		out->v[out->n] = strdup(e->d_name);
		if (out->v[out->n] == NULL) {
			rc = al_err_set(err, AL_ENOMEM, 0, "out of memory");
			break;
		}
		out->n++;
	}
	closedir(d);
	if (rc < 0) {
		names_free(out);
		return -1;
	}
	if (out->n > 1)
		qsort(out->v, out->n, sizeof *out->v, cmp_names);
	return 0;
}

static int join(char *out, const char *dir, const char *name)
{
	int n = dir[0] == '\0' ? snprintf(out, PATH_MAX, "%s", name)
			       : snprintf(out, PATH_MAX, "%s/%s", dir, name);
	return n < 0 || n >= PATH_MAX ? -1 : 0;
}

/* --- hashing --- */

typedef struct hasher {
	EVP_MD_CTX *md;
	uint64_t budget;
	char *buf;
} hasher;

static int h_field(hasher *h, const char *s, size_t n)
{
	char len[32];
	int l = snprintf(len, sizeof len, "%zu:", n);
	if (EVP_DigestUpdate(h->md, len, (size_t)l) != 1 ||
	    EVP_DigestUpdate(h->md, s, n) != 1)
		return -1;
	return 0;
}

static int h_str(hasher *h, const char *s)
{
	return h_field(h, s, strlen(s));
}

/* Hash the entry name in dfd, labelled label (its path relative to the
 * hashed root, "" for the root). */
static int hash_entry(hasher *h, int dfd, const char *name, const char *label,
		      int depth, al_err *err)
{
	char sb[96];
	char mode[16];
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return al_err_sys(err, AL_ESYS, errno, "stat '%s'",
				  shown(label, sb, sizeof sb));
	snprintf(mode, sizeof mode, "%o", (unsigned)(st.st_mode & 07777));
	int r = 0;
	if (S_ISREG(st.st_mode)) {
		r |= h_str(h, "f");
		r |= h_str(h, label);
		r |= h_str(h, mode);
		al_autofd int fd = openat(dfd, name,
					  O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return al_err_sys(err, AL_ESYS, errno, "open '%s'",
					  shown(label, sb, sizeof sb));
		if (fstat(fd, &st) < 0)
			return al_err_sys(err, AL_ESYS, errno, "stat '%s'",
					  shown(label, sb, sizeof sb));
		/* The size goes first so content cannot run into the next
		 * record; reading exactly that much pins it. */
		char sz[32];
		snprintf(sz, sizeof sz, "%lld", (long long)st.st_size);
		r |= h_str(h, sz);
		uint64_t left = (uint64_t)st.st_size;
		while (left > 0) {
			ssize_t n = read(fd, h->buf,
					 left < IO_BUF ? (size_t)left : IO_BUF);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return al_err_sys(err, AL_ESYS, errno,
						  "read '%s'",
						  shown(label, sb, sizeof sb));
			if (n == 0)
				return al_err_set(err, AL_ESYS, 0,
						  "'%s' changed while hashed",
						  shown(label, sb, sizeof sb));
			if (EVP_DigestUpdate(h->md, h->buf, (size_t)n) != 1)
				r = -1;
			left -= (uint64_t)n;
		}
	} else if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(dfd, name, target, sizeof target);
		if (n < 0 || (size_t)n >= sizeof target)
			return al_err_sys(err, AL_ESYS, n < 0 ? errno : 0,
					  "readlink '%s'",
					  shown(label, sb, sizeof sb));
		r |= h_str(h, "l");
		r |= h_str(h, label);
		r |= h_str(h, mode);
		r |= h_field(h, target, (size_t)n);
	} else if (S_ISDIR(st.st_mode)) {
		if (depth > AL_CONTEXT_MAX_DEPTH)
			return al_err_set(err, AL_EPATH, 0,
					  "'%s' is deeper than %d levels",
					  shown(label, sb, sizeof sb),
					  AL_CONTEXT_MAX_DEPTH);
		r |= h_str(h, "d");
		r |= h_str(h, label);
		r |= h_str(h, mode);
		al_autofd int fd = openat(dfd, name,
					  O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
						  O_CLOEXEC);
		if (fd < 0)
			return al_err_sys(err, AL_ESYS, errno, "open '%s'",
					  shown(label, sb, sizeof sb));
		names l;
		if (list_dir(fd, &l, &h->budget, err) < 0)
			return -1;
		char child[PATH_MAX];
		for (size_t i = 0; i < l.n && r == 0; i++) {
			if (join(child, label, l.v[i]) < 0) {
				names_free(&l);
				return al_err_set(err, AL_EPATH, 0,
						  "path too long under '%s'",
						  shown(label, sb, sizeof sb));
			}
			if (hash_entry(h, fd, l.v[i], child, depth + 1, err) <
			    0) {
				names_free(&l);
				return -1;
			}
		}
		names_free(&l);
		r |= h_str(h, "end");
	} else {
		return al_err_set(err, AL_EPATH, 0,
				  "'%s' is not a file, directory or symlink",
				  shown(label, sb, sizeof sb));
	}
	if (r != 0)
		return al_err_set(err, AL_EINTERNAL, 0, "sha256 failed");
	return 0;
}

static void to_hex(const unsigned char *md, char *out)
{
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
}

static int hash_finish(hasher *h, char *out, al_err *err)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	if (EVP_DigestFinal_ex(h->md, md, &len) != 1 || len != 32)
		return al_err_set(err, AL_EINTERNAL, 0, "sha256 failed");
	to_hex(md, out);
	return 0;
}

int al_context_hash(const char *dir, const char *relpath,
		    char out[AL_CONTEXT_HASH_HEX], al_err *err)
{
	char rel[PATH_MAX];
	if (rel_clean(relpath, rel, "COPY source", err) < 0)
		return -1;
	al_autofd int rootfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", dir);
	const char *base = ".";
	al_autofd int parent = -1;
	if (rel[0] != '\0') {
		parent = ctx_parent(rootfd, rel, 0, &base, "COPY source", err);
		if (parent < 0)
			return -1;
		struct stat st;
		if (fstatat(parent, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return resolve_err(errno, "COPY source", rel, err);
	}
	hasher h = {0};
	h.budget = AL_CONTEXT_MAX_ENTRIES;
	al_autofree char *buf = malloc(IO_BUF);
	h.md = EVP_MD_CTX_new();
	h.buf = buf;
	int rc = -1;
	if (buf == NULL || h.md == NULL) {
		al_err_set(err, AL_ENOMEM, 0, "out of memory");
		goto out;
	}
	if (EVP_DigestInit_ex(h.md, EVP_sha256(), NULL) != 1 ||
	    h_str(&h, "airlock-context-v1") != 0) {
		al_err_set(err, AL_EINTERNAL, 0, "sha256 failed");
		goto out;
	}
	if (hash_entry(&h, parent >= 0 ? parent : rootfd, base, "", 0, err) < 0)
		goto out;
	rc = hash_finish(&h, out, err);
out:
	EVP_MD_CTX_free(h.md);
	return rc;
}

int al_context_hash_srcs(const char *dir, const char *const *srcs, size_t n,
			 char out[AL_CONTEXT_HASH_HEX], al_err *err)
{
	hasher h = {0};
	h.md = EVP_MD_CTX_new();
	if (h.md == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	int rc = -1;
	char num[32];
	snprintf(num, sizeof num, "%zu", n);
	if (EVP_DigestInit_ex(h.md, EVP_sha256(), NULL) != 1 ||
	    h_str(&h, "airlock-copy-v1") != 0 || h_str(&h, num) != 0) {
		al_err_set(err, AL_EINTERNAL, 0, "sha256 failed");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		char one[AL_CONTEXT_HASH_HEX];
		if (al_context_hash(dir, srcs[i], one, err) < 0)
			goto out;
		if (h_str(&h, srcs[i]) != 0 || h_str(&h, one) != 0) {
			al_err_set(err, AL_EINTERNAL, 0, "sha256 failed");
			goto out;
		}
	}
	rc = hash_finish(&h, out, err);
out:
	EVP_MD_CTX_free(h.md);
	return rc;
}

/* --- copy into a rootfs --- */

typedef struct copier {
	int rootfd;
	int chmod;
	uid_t uid;
	gid_t gid;
	int chown;
	char *buf;
	uint64_t budget;
} copier;

/* Open the directory at abs (an absolute path inside the rootfs, "" or
 * "/" for its root) with RESOLVE_IN_ROOT, creating missing components
 * (0755). *created tells whether the last one was made here. */
static int root_dir(copier *c, const char *abs, int *created, al_err *err)
{
	char sb[96];
	if (created != NULL)
		*created = 0;
	int fd = xopenat2(c->rootfd, abs[0] != '\0' ? abs : "/",
			  O_RDONLY | O_DIRECTORY, 0, ROOT_RESOLVE);
	if (fd >= 0 || errno != ENOENT) {
		if (fd < 0)
			return resolve_err(errno, "destination", abs, err);
		return fd;
	}
	/* Walk from the root, making what is missing. The parent of each
	 * new directory is itself resolved inside the root, and mkdirat
	 * never follows the name it creates. */
	char prefix[PATH_MAX];
	size_t pl = 0;
	int cur = xopenat2(c->rootfd, "/", O_RDONLY | O_DIRECTORY, 0,
			   ROOT_RESOLVE);
	if (cur < 0)
		return al_err_sys(err, AL_ESYS, errno, "open rootfs");
	const char *p = abs;
	while (*p != '\0') {
		while (*p == '/')
			p++;
		size_t n = strcspn(p, "/");
		if (n == 0)
			break;
		if (pl + 1 + n >= sizeof prefix || n > NAME_MAX) {
			close(cur);
			return al_err_set(err, AL_EPATH, 0,
					  "destination path too long");
		}
		prefix[pl++] = '/';
		memcpy(prefix + pl, p, n);
		pl += n;
		prefix[pl] = '\0';
		char comp[NAME_MAX + 1];
		memcpy(comp, p, n);
		comp[n] = '\0';
		p += n;
		int made = 0;
		int next = xopenat2(c->rootfd, prefix, O_RDONLY | O_DIRECTORY,
				    0, ROOT_RESOLVE);
		if (next < 0 && errno == ENOENT) {
			if (mkdirat(cur, comp, 0755) == 0)
				made = 1;
			else if (errno != EEXIST) {
				int e = errno;
				close(cur);
				return al_err_sys(err, AL_ESYS, e,
						  "mkdir '%s' in the rootfs",
						  shown(prefix, sb, sizeof sb));
			}
			next = xopenat2(c->rootfd, prefix,
					O_RDONLY | O_DIRECTORY, 0,
					ROOT_RESOLVE);
		}
		if (next < 0) {
			int e = errno;
			close(cur);
			return resolve_err(e, "destination", prefix, err);
		}
		close(cur);
		cur = next;
		if (created != NULL)
			*created = made;
	}
	return cur;
}

static int own(copier *c, int fd, mode_t mode, const char *label, al_err *err)
{
	char sb[96];
	if (c->chown && fchown(fd, c->uid, c->gid) < 0)
		return al_err_sys(err, AL_ESYS, errno, "chown '%s'",
				  shown(label, sb, sizeof sb));
	/* After chown, which clears setuid/setgid bits. */
	if (fchmod(fd, c->chmod >= 0 ? (mode_t)c->chmod : mode) < 0)
		return al_err_sys(err, AL_ESYS, errno, "chmod '%s'",
				  shown(label, sb, sizeof sb));
	return 0;
}

static int copy_data(copier *c, int in, int out, const char *label, al_err *err)
{
	char sb[96];
	for (;;) {
		ssize_t n = read(in, c->buf, IO_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return al_err_sys(err, AL_ESYS, errno, "read '%s'",
					  shown(label, sb, sizeof sb));
		if (n == 0)
			return 0;
		if (write_all(out, c->buf, (size_t)n) < 0)
			return al_err_sys(err, AL_ESYS, errno, "write '%s'",
					  shown(label, sb, sizeof sb));
	}
}

/* Copy the non-directory sname (in sdir) to dname in ddir, a directory
 * of the rootfs; whatever non-directory was at dname is replaced. */
static int copy_leaf(copier *c, int sdir, const char *sname, int ddir,
		     const char *dname, const char *label, al_err *err)
{
	char sb[96];
	struct stat st;
	if (fstatat(sdir, sname, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return al_err_sys(err, AL_ESYS, errno, "stat '%s'",
				  shown(label, sb, sizeof sb));
	if (unlinkat(ddir, dname, 0) < 0 && errno != ENOENT) {
		if (errno == EISDIR || errno == EPERM)
			return al_err_set(err, AL_EPATH, errno,
					  "cannot replace directory '%s' with "
					  "a file",
					  shown(label, sb, sizeof sb));
		return al_err_sys(err, AL_ESYS, errno, "unlink '%s'",
				  shown(label, sb, sizeof sb));
	}
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(sdir, sname, target, sizeof target - 1);
		if (n < 0)
			return al_err_sys(err, AL_ESYS, errno, "readlink '%s'",
					  shown(label, sb, sizeof sb));
		target[n] = '\0';
		if (symlinkat(target, ddir, dname) < 0)
			return al_err_sys(err, AL_ESYS, errno, "symlink '%s'",
					  shown(label, sb, sizeof sb));
		if (c->chown && fchownat(ddir, dname, c->uid, c->gid,
					 AT_SYMLINK_NOFOLLOW) < 0)
			return al_err_sys(err, AL_ESYS, errno, "chown '%s'",
					  shown(label, sb, sizeof sb));
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return al_err_set(err, AL_EPATH, 0,
				  "'%s' is not a file, directory or symlink",
				  shown(label, sb, sizeof sb));
	al_autofd int in = openat(sdir, sname,
				  O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return al_err_sys(err, AL_ESYS, errno, "open '%s'",
				  shown(label, sb, sizeof sb));
	al_autofd int out = openat(ddir, dname,
				   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
					   O_CLOEXEC,
				   0600);
	if (out < 0)
		return al_err_sys(err, AL_ESYS, errno, "create '%s'",
				  shown(label, sb, sizeof sb));
	if (copy_data(c, in, out, label, err) < 0)
		return -1;
	return own(c, out, st.st_mode & 0777, label, err);
}

/* Copy the contents of directory sfd into the rootfs directory at dabs. */
static int copy_tree(copier *c, int sfd, const char *dabs, int depth,
		     al_err *err)
{
	char sb[96];
	if (depth > AL_CONTEXT_MAX_DEPTH)
		return al_err_set(err, AL_EPATH, 0,
				  "'%s' is deeper than %d levels",
				  shown(dabs, sb, sizeof sb),
				  AL_CONTEXT_MAX_DEPTH);
	al_autofd int dfd = root_dir(c, dabs, NULL, err);
	if (dfd < 0)
		return -1;
	names l;
	if (list_dir(sfd, &l, &c->budget, err) < 0)
		return -1;
	int rc = 0;
	char child[PATH_MAX];
	for (size_t i = 0; i < l.n && rc == 0; i++) {
		const char *name = l.v[i];
		struct stat st;
		if (snprintf(child, sizeof child, "%s/%s",
			     strcmp(dabs, "/") == 0 ? "" : dabs,
			     name) >= (int)sizeof child) {
			rc = al_err_set(err, AL_EPATH, 0,
					"destination path too long");
			break;
		}
		if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = al_err_sys(err, AL_ESYS, errno, "stat");
			break;
		}
		if (!S_ISDIR(st.st_mode)) {
			rc = copy_leaf(c, sfd, name, dfd, name, child, err);
			continue;
		}
		int made = 0;
		if (mkdirat(dfd, name, 0700) == 0)
			made = 1;
		else if (errno != EEXIST) {
			rc = al_err_sys(err, AL_ESYS, errno, "mkdir '%s'",
					shown(child, sb, sizeof sb));
			break;
		}
		if (made) {
			al_autofd int nd = openat(dfd, name,
						  O_RDONLY | O_DIRECTORY |
							  O_NOFOLLOW |
							  O_CLOEXEC);
			if (nd < 0 ||
			    own(c, nd, st.st_mode & 0777, child, err) < 0) {
				if (nd < 0)
					al_err_sys(err, AL_ESYS, errno,
						   "open '%s'",
						   shown(child, sb, sizeof sb));
				rc = -1;
				break;
			}
		}
		al_autofd int sub = openat(sfd, name,
					   O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
						   O_CLOEXEC);
		if (sub < 0) {
			rc = al_err_sys(err, AL_ESYS, errno, "open '%s'",
					shown(child, sb, sizeof sb));
			break;
		}
		rc = copy_tree(c, sub, child, depth + 1, err);
	}
	names_free(&l);
	return rc;
}

int al_context_copy(const char *context_dir, const char *src_rel,
		    const char *dest_root, const char *dest_abs, int chmod,
		    uid_t uid, gid_t gid, al_err *err)
{
	char sb[96];
	char rel[PATH_MAX];
	if (rel_clean(src_rel, rel, "COPY source", err) < 0)
		return -1;
	if (dest_abs == NULL || dest_abs[0] != '/' ||
	    strnlen(dest_abs, PATH_MAX) >= PATH_MAX)
		return al_err_set(err, AL_EPATH, 0,
				  "COPY destination must be an absolute path");
	char dest[PATH_MAX];
	/* rel_clean checks the destination too ('..', control bytes). */
	if (dest_abs[1] != '\0' &&
	    rel_clean(dest_abs + 1, dest, "COPY destination", err) < 0)
		return -1;
	if (chmod > 07777)
		return al_err_set(err, AL_EINVAL, 0, "bad chmod bits");
	size_t dl = strlen(dest_abs);
	int dest_dir = dest_abs[dl - 1] == '/';

	al_autofd int ctxfd = open(context_dir,
				   O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (ctxfd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", context_dir);
	al_autofd int rootfd = open(dest_root,
				    O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", dest_root);
	al_autofree char *buf = malloc(IO_BUF);
	if (buf == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	copier c = {
		.rootfd = rootfd,
		.chmod = chmod,
		.uid = uid,
		.gid = gid,
		.chown = uid != geteuid() || gid != getegid(),
		.buf = buf,
		.budget = AL_CONTEXT_MAX_ENTRIES,
	};

	/* The source, beneath the context and never through a symlink. */
	const char *sbase = ".";
	al_autofd int sparent = -1;
	if (rel[0] != '\0') {
		sparent = ctx_parent(ctxfd, rel, 0, &sbase, "COPY source", err);
		if (sparent < 0)
			return -1;
	}
	int sdir = sparent >= 0 ? sparent : ctxfd;
	struct stat st;
	if (fstatat(sdir, sbase, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return resolve_err(errno, "COPY source", src_rel, err);

	/* "/" + the cleaned destination. */
	char dabs[PATH_MAX + 1];
	snprintf(dabs, sizeof dabs, "/%s", dest_abs[1] != '\0' ? dest : "");

	if (S_ISDIR(st.st_mode)) {
		int made;
		al_autofd int dfd = root_dir(&c, dabs, &made, err);
		if (dfd < 0)
			return -1;
		if (made && own(&c, dfd, st.st_mode & 0777, dabs, err) < 0)
			return -1;
		al_autofd int sfd = openat(sdir, sbase,
					   O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
						   O_CLOEXEC);
		if (sfd < 0)
			return al_err_sys(err, AL_ESYS, errno, "open '%s'",
					  shown(src_rel, sb, sizeof sb));
		return copy_tree(&c, sfd, dabs, 0, err);
	}

	/* A file or symlink: into dest when it is (or is written as) a
	 * directory, else as dest. */
	const char *sname = strrchr(rel, '/');
	sname = sname != NULL ? sname + 1 : rel;
	char target[PATH_MAX + 1];
	int into = dest_dir;
	if (!into) {
		int probe = xopenat2(rootfd, dabs, O_PATH | O_DIRECTORY, 0,
				     ROOT_RESOLVE);
		if (probe >= 0) {
			into = 1;
			close(probe);
		}
	}
	if (into) {
		if (snprintf(target, sizeof target, "%s/%s",
			     strcmp(dabs, "/") == 0 ? "" : dabs,
			     sname) >= PATH_MAX)
			return al_err_set(err, AL_EPATH, 0,
					  "destination path too long");
	} else {
		memcpy(target, dabs, strlen(dabs) + 1);
	}
	char *slash = strrchr(target, '/');
	const char *dname = slash + 1;
	char parent[PATH_MAX + 1];
	memcpy(parent, target, (size_t)(slash - target));
	parent[slash - target] = '\0';
	al_autofd int pfd = root_dir(&c, parent, NULL, err);
	if (pfd < 0)
		return -1;
	return copy_leaf(&c, sdir, sbase, pfd, dname, target, err);
}

/* --- pack --- */

typedef struct packer {
	struct archive *a;
	uint64_t budget;
	uint64_t bytes;
	char *buf;
} packer;

static int pack_dir(packer *p, int fd, const char *prefix, int depth,
		    al_err *err)
{
	char sb[96];
	if (depth > AL_CONTEXT_MAX_DEPTH)
		return al_err_set(err, AL_EPATH, 0,
				  "'%s' is deeper than %d levels",
				  shown(prefix, sb, sizeof sb),
				  AL_CONTEXT_MAX_DEPTH);
	names l;
	if (list_dir(fd, &l, &p->budget, err) < 0)
		return -1;
	int rc = 0;
	char rel[PATH_MAX];
	for (size_t i = 0; i < l.n && rc == 0; i++) {
		const char *name = l.v[i];
		struct stat st;
		if (join(rel, prefix, name) < 0) {
			rc = al_err_set(err, AL_EPATH, 0,
					"path too long under '%s'",
					shown(prefix, sb, sizeof sb));
			break;
		}
		if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = al_err_sys(err, AL_ESYS, errno, "stat '%s'",
					shown(rel, sb, sizeof sb));
			break;
		}
		if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) &&
		    !S_ISLNK(st.st_mode)) {
			al_warn("build context: skipping '%s' (not a file, "
				"directory or symlink)",
				shown(rel, sb, sizeof sb));
			continue;
		}
		struct archive_entry *e = archive_entry_new();
		if (e == NULL) {
			rc = al_err_set(err, AL_ENOMEM, 0, "out of memory");
			break;
		}
		archive_entry_set_pathname(e, rel);
		archive_entry_set_mode(e, st.st_mode & (S_IFMT | 0777));
		archive_entry_set_uid(e, 0);
		archive_entry_set_gid(e, 0);
		archive_entry_set_mtime(e, st.st_mtim.tv_sec, 0);
		al_autofd int in = -1;
		if (S_ISREG(st.st_mode)) {
			if ((uint64_t)st.st_size >
			    AL_CONTEXT_MAX_BYTES - p->bytes) {
				archive_entry_free(e);
				rc = al_err_set(err, AL_ETOOBIG, 0,
						"build context is larger "
						"than %llu bytes",
						AL_CONTEXT_MAX_BYTES);
				break;
			}
			in = openat(fd, name,
				    O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
			if (in < 0 || fstat(in, &st) < 0) {
				archive_entry_free(e);
				rc = al_err_sys(err, AL_ESYS, errno,
						"open '%s'",
						shown(rel, sb, sizeof sb));
				break;
			}
			archive_entry_set_size(e, st.st_size);
		} else if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			ssize_t n = readlinkat(fd, name, target,
					       sizeof target - 1);
			if (n < 0) {
				archive_entry_free(e);
				rc = al_err_sys(err, AL_ESYS, errno,
						"readlink '%s'",
						shown(rel, sb, sizeof sb));
				break;
			}
			target[n] = '\0';
			archive_entry_set_symlink(e, target);
		}
		if (archive_write_header(p->a, e) < ARCHIVE_WARN) {
			rc = al_err_set(err, AL_ESYS, 0, "tar '%s': %s",
					shown(rel, sb, sizeof sb),
					archive_error_string(p->a));
			archive_entry_free(e);
			break;
		}
		archive_entry_free(e);
		if (S_ISREG(st.st_mode)) {
			/* Exactly the size in the header, even if the file
			 * changes meanwhile. */
			uint64_t left = (uint64_t)st.st_size;
			while (left > 0 && rc == 0) {
				ssize_t n = read(in, p->buf,
						 left < IO_BUF ? (size_t)left
							       : IO_BUF);
				if (n < 0 && errno == EINTR)
					continue;
				if (n <= 0) {
					rc = al_err_sys(err, AL_ESYS,
							n < 0 ? errno : EIO,
							"read '%s'",
							shown(rel, sb,
							      sizeof sb));
					break;
				}
				if (archive_write_data(p->a, p->buf,
						       (size_t)n) != n) {
					rc = al_err_set(
						err, AL_ESYS, 0, "tar: %s",
						archive_error_string(p->a));
					break;
				}
				left -= (uint64_t)n;
				p->bytes += (uint64_t)n;
			}
		} else if (S_ISDIR(st.st_mode)) {
			al_autofd int sub = openat(fd, name,
						   O_RDONLY | O_DIRECTORY |
							   O_NOFOLLOW |
							   O_CLOEXEC);
			if (sub < 0)
				rc = al_err_sys(err, AL_ESYS, errno,
						"open '%s'",
						shown(rel, sb, sizeof sb));
			else
				rc = pack_dir(p, sub, rel, depth + 1, err);
		}
	}
	names_free(&l);
	return rc;
}

int al_context_pack(const char *dir, int out_fd, al_err *err)
{
	al_autofd int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", dir);
	al_autofree char *buf = malloc(IO_BUF);
	packer p = {
		.a = archive_write_new(),
		.budget = AL_CONTEXT_MAX_ENTRIES,
		.buf = buf,
	};
	if (buf == NULL || p.a == NULL) {
		archive_write_free(p.a);
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	}
	int rc = -1;
	if (archive_write_set_format_pax_restricted(p.a) != ARCHIVE_OK ||
	    archive_write_open_fd(p.a, out_fd) != ARCHIVE_OK) {
		al_err_set(err, AL_ESYS, 0, "tar: %s",
			   archive_error_string(p.a));
		goto out;
	}
	if (pack_dir(&p, fd, "", 0, err) < 0)
		goto out;
	if (archive_write_close(p.a) != ARCHIVE_OK) {
		al_err_set(err, AL_ESYS, 0, "tar: %s",
			   archive_error_string(p.a));
		goto out;
	}
	rc = 0;
out:
	archive_write_free(p.a);
	return rc;
}
