/* vm capture: see vm/capture.h. */
#include "vm/capture.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/file.h"
#include "base/log.h"

#define PAGE AL_VMCAP_PAGE
/* Pages moved per read or write: big enough for few system calls, small
 * enough to stay in cache. */
#define CHUNK_PAGES 256u
/* A QEMU's maps are a few hundred lines; more is not a QEMU to trust. */
#define MAPS_MAX (4u << 20)
/* Bits of a /proc/<pid>/pagemap entry (Documentation/admin-guide/mm/
 * pagemap.rst). */
#define PM_PRESENT (1ull << 63)
#define PM_SWAP (1ull << 62)
#define PM_FILE (1ull << 61)

static const char *const capture_files[] = {"devstate", "mem", "pages", "meta"};

static uint64_t mtime_ns(const struct stat *st)
{
	return (uint64_t)st->st_mtim.tv_sec * 1000000000 +
	       (uint64_t)st->st_mtim.tv_nsec;
}

static size_t bitmap_bytes(uint64_t ram)
{
	return (size_t)(ram / PAGE + 7) / 8;
}

static int bit(const uint8_t *map, uint64_t i)
{
	return (map[i / 8] >> (i % 8)) & 1;
}

/* The next run of set bits of map (pages bits) from *i on, at most max
 * long: its first page in *i, its length in *n; 0 when there is none. */
static int next_run(const uint8_t *map, uint64_t pages, uint64_t max,
		    uint64_t *i, uint64_t *n)
{
	while (*i < pages && !bit(map, *i))
		(*i)++;
	if (*i >= pages)
		return 0;
	*n = 1;
	while (*i + *n < pages && *n < max && bit(map, *i + *n))
		(*n)++;
	return 1;
}

static uint64_t popcount(const uint8_t *map, size_t len)
{
	uint64_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += (uint64_t)__builtin_popcount(map[i]);
	return n;
}

/* Read exactly len bytes at off, or fail naming what. */
static int pread_all(int fd, void *buf, size_t len, off_t off, const char *what,
		     al_err *err)
{
	size_t have = 0;
	while (have < len) {
		ssize_t n = pread(fd, (char *)buf + have, len - have,
				  off + (off_t)have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return al_err_sys(err, AL_ESYS, n < 0 ? errno : EIO,
					  "reading %s", what);
		have += (size_t)n;
	}
	return 0;
}

static int pwrite_all(int fd, const void *buf, size_t len, off_t off,
		      const char *what, al_err *err)
{
	size_t have = 0;
	while (have < len) {
		ssize_t n = pwrite(fd, (const char *)buf + have, len - have,
				   off + (off_t)have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			return al_err_sys(err,
					  e == ENOSPC || e == EDQUOT
						  ? AL_EUNAVAIL
						  : AL_ESYS,
					  e, "writing %s", what);
		}
		have += (size_t)n;
	}
	return 0;
}

/* ---- meta ---- */

/* One "key=value" line of meta: a string (cap bytes with its NUL) or a
 * number in [min, max]. */
typedef struct meta_field {
	const char *key;
	size_t off;
	size_t cap; /* 0: a number */
	uint64_t min, max;
} meta_field;

#define META_STR(k)                                                            \
	{                                                                      \
#k, offsetof(al_vmcap_meta, k),                                \
			sizeof(((al_vmcap_meta *)0)->k), 0, 0                  \
	}
#define META_NUM(k, lo, hi)                                                    \
	{                                                                      \
#k, offsetof(al_vmcap_meta, k), 0, lo, hi                      \
	}

static const meta_field meta_fields[] = {
	META_STR(layout),
	META_STR(format),
	META_STR(qemu),
	META_STR(accel),
	META_NUM(vcpus, 1, 1024),
	META_NUM(ram, PAGE, 1ull << 40),
	META_STR(base),
	META_NUM(base_ino, 0, UINT64_MAX),
	META_NUM(base_size, 0, 1ull << 40),
	META_NUM(base_mtime_ns, 0, INT64_MAX),
	META_NUM(dirty_pages, 0, (1ull << 40) / PAGE),
};
#define META_FIELDS (sizeof meta_fields / sizeof *meta_fields)

int al_vmcap_meta_format(const al_vmcap_meta *m, char *out, size_t len)
{
	size_t at = 0;
	for (size_t i = 0; i < META_FIELDS; i++) {
		const meta_field *f = &meta_fields[i];
		const char *p = (const char *)m + f->off;
		int n = f->cap != 0
				? snprintf(out + at, len - at, "%s=%s\n",
					   f->key, p)
				: snprintf(out + at, len - at,
					   "%s=%" PRIu64 "\n", f->key,
					   *(const uint64_t *)(const void *)p);
		if (n < 0 || (size_t)n >= len - at)
			return -1;
		at += (size_t)n;
	}
	return (int)at;
}

/* A decimal number, all of s, in [min, max]. */
static int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *v)
{
	if (*s == '\0' || strlen(s) > 20)
		return -1;
	uint64_t n = 0;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		unsigned d = (unsigned)(*s - '0');
		if (n > (max - d) / 10)
			return -1;
		n = n * 10 + d;
	}
	if (n < min)
		return -1;
	*v = n;
	return 0;
}

/* One line (NUL terminated, printable) into m. */
static int meta_line(char *line, size_t lineno, al_vmcap_meta *m, int *seen,
		     al_err *err)
{
	char *eq = strchr(line, '=');
	if (eq == NULL)
		return al_err_set(err, AL_ESTATE, 0,
				  "capture meta line %zu is no key=value",
				  lineno);
	*eq = '\0';
	size_t k = 0;
	while (k < META_FIELDS && strcmp(meta_fields[k].key, line) != 0)
		k++;
	if (k == META_FIELDS || seen[k])
		return al_err_set(err, AL_ESTATE, 0,
				  "capture meta line %zu: %s key \"%.40s\"",
				  lineno,
				  k == META_FIELDS ? "unknown" : "repeated",
				  line);
	seen[k] = 1;
	const meta_field *f = &meta_fields[k];
	const char *v = eq + 1;
	char *p = (char *)m + f->off;
	if (f->cap != 0
		    ? strlen(v) >= f->cap
		    : parse_u64(v, f->min, f->max, (uint64_t *)(void *)p) < 0)
		return al_err_set(err, AL_ESTATE, 0, "capture meta: bad %s",
				  f->key);
	if (f->cap != 0)
		memcpy(p, v, strlen(v) + 1);
	return 0;
}

int al_vmcap_meta_parse(const char *text, size_t len, al_vmcap_meta *m,
			al_err *err)
{
	memset(m, 0, sizeof *m);
	if (len > AL_VMCAP_META_MAX)
		return al_err_set(err, AL_ESTATE, 0,
				  "capture meta is over %d bytes",
				  AL_VMCAP_META_MAX);
	int seen[META_FIELDS] = {0};
	size_t at = 0, lineno = 0;
	while (at < len) {
		lineno++;
		const char *nl = memchr(text + at, '\n', len - at);
		if (nl == NULL)
			return al_err_set(err, AL_ESTATE, 0,
					  "capture meta line %zu has no end",
					  lineno);
		char line[AL_PATH_MAX + 32];
		size_t ll = (size_t)(nl - (text + at));
		if (ll >= sizeof line)
			return al_err_set(err, AL_ESTATE, 0,
					  "capture meta line %zu is too long",
					  lineno);
		memcpy(line, text + at, ll);
		line[ll] = '\0';
		at += ll + 1;
		for (size_t i = 0; i < ll; i++)
			if (line[i] < ' ' || line[i] > '~')
				return al_err_set(err, AL_ESTATE, 0,
						  "capture meta line %zu is "
						  "not printable",
						  lineno);
		if (meta_line(line, lineno, m, seen, err) < 0)
			return -1;
	}
	for (size_t k = 0; k < META_FIELDS; k++)
		if (!seen[k])
			return al_err_set(err, AL_ESTATE, 0,
					  "capture meta has no %s",
					  meta_fields[k].key);
	return 0;
}

/* ---- the machine's base ---- */

void al_vmcap_base_init(al_vmcap_base *b)
{
	*b = (al_vmcap_base){.tmpl_fd = -1, .prev_fd = -1};
}

void al_vmcap_base_free(al_vmcap_base *b)
{
	if (b == NULL)
		return;
	if (b->tmpl_fd >= 0)
		close(b->tmpl_fd);
	if (b->prev_fd >= 0)
		close(b->prev_fd);
	free(b->prev_pages);
	al_vmcap_base_init(b);
}

int al_vmcap_base_open(al_vmcap_base *b, const char *snapdir, unsigned vcpus,
		       al_vm_accel accel, al_err *err)
{
	al_vmcap_base_free(b);
	char p[AL_PATH_MAX + 8];
	if (al_vm_path(b->snapdir, sizeof b->snapdir, err, "%s", snapdir) < 0 ||
	    al_vm_path(p, sizeof p, err, "%s/mem", snapdir) < 0)
		return -1;
	b->tmpl_fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (b->tmpl_fd < 0 || fstat(b->tmpl_fd, &st) < 0) {
		int e = errno;
		al_vmcap_base_free(b);
		return al_err_sys(err, AL_ESTATE, e,
				  "the template's memory %s is gone", p);
	}
	b->tmpl_ino = (uint64_t)st.st_ino;
	b->tmpl_size = (uint64_t)st.st_size;
	b->tmpl_mtime_ns = mtime_ns(&st);
	b->vcpus = vcpus;
	b->accel = accel;
	return 0;
}

int al_vmcap_base_bind(al_vmcap_base *b, int ram_fd, al_err *err)
{
	struct stat rs, ps;
	char p[AL_PATH_MAX + 8];
	if (b->tmpl_fd < 0)
		return al_err_set(err, AL_EINTERNAL, 0, "no template opened");
	if (fstat(ram_fd, &rs) < 0)
		return al_err_sys(err, AL_ESYS, errno, "fstat guest RAM");
	snprintf(p, sizeof p, "%s/mem", b->snapdir);
	if (stat(p, &ps) < 0 || (uint64_t)ps.st_ino != b->tmpl_ino ||
	    (uint64_t)ps.st_size != b->tmpl_size ||
	    mtime_ns(&ps) != b->tmpl_mtime_ns ||
	    (uint64_t)rs.st_size != b->tmpl_size)
		return al_err_set(err, AL_ESTATE, 0,
				  "the template's memory %s changed while the "
				  "machine started",
				  p);
	b->ram_dev = rs.st_dev;
	b->ram_ino = rs.st_ino;
	b->ram = (uint64_t)rs.st_size;
	return 0;
}

/* ---- finding QEMU's RAM ---- */

/* One field of a maps line: hex digits up to the delimiter. */
static const char *hex_field(const char *s, const char *end, char delim,
			     uint64_t *v)
{
	uint64_t n = 0;
	int digits = 0;
	for (; s < end && *s != delim; s++) {
		int d;
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else
			return NULL;
		if (++digits > 16)
			return NULL;
		n = n << 4 | (uint64_t)d;
	}
	if (s >= end || digits == 0)
		return NULL;
	*v = n;
	return s + 1;
}

static const char *dec_field(const char *s, const char *end, uint64_t *v)
{
	uint64_t n = 0;
	int digits = 0;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		if (++digits > 20 || n > (UINT64_MAX - 9) / 10)
			return NULL;
		n = n * 10 + (uint64_t)(*s - '0');
	}
	if (digits == 0)
		return NULL;
	*v = n;
	return s;
}

/* "start-end perms offset major:minor inode [path]": 1 when it maps the
 * whole of (dev, ino) privately and writable, 0 when not, -1 when the
 * line is malformed. */
static int maps_line(const char *s, const char *end, dev_t dev, ino_t ino,
		     uint64_t ram, uint64_t *start)
{
	uint64_t lo, hi, off, maj, min, in;
	s = hex_field(s, end, '-', &lo);
	if (s == NULL)
		return -1;
	s = hex_field(s, end, ' ', &hi);
	if (s == NULL || end - s < 5 || s[4] != ' ')
		return -1;
	const char *perms = s;
	s = hex_field(s + 5, end, ' ', &off);
	if (s != NULL)
		s = hex_field(s, end, ':', &maj);
	if (s != NULL)
		s = hex_field(s, end, ' ', &min);
	if (s != NULL)
		s = dec_field(s, end, &in);
	if (s == NULL || hi <= lo)
		return -1;
	if (maj != major(dev) || min != minor(dev) || in != (uint64_t)ino)
		return 0;
	/* The file is QEMU's RAM, mapped as QEMU maps it and no other way:
	 * anything else (a part, a second mapping) is refused by the
	 * caller, since it cannot be told from the real one. */
	if (memcmp(perms, "rw-p", 4) != 0 || off != 0 || hi - lo != ram)
		return 2;
	*start = lo;
	return 1;
}

int al_vmcap_find_ram(const char *maps, size_t len, dev_t dev, ino_t ino,
		      uint64_t ram, uint64_t *start, al_err *err)
{
	const char *s = maps, *end = maps + len;
	int found = 0, other = 0;
	uint64_t at = 0;
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *le = nl != NULL ? nl : end;
		uint64_t lo = 0;
		int rc = maps_line(s, le, dev, ino, ram, &lo);
		if (rc < 0)
			return al_err_set(err, AL_EPROTO, 0,
					  "QEMU's memory map has a malformed "
					  "line");
		if (rc == 1) {
			found++;
			at = lo;
		} else if (rc == 2) {
			other++;
		}
		s = le + 1;
	}
	if (found != 1 || other != 0)
		return al_err_set(err, AL_EPROTO, 0,
				  "QEMU maps its guest RAM %d times whole and "
				  "%d times otherwise, not once",
				  found, other);
	*start = at;
	return 0;
}

/* QEMU's RAM mapping: its start address, from /proc/<pid>/maps, checked
 * against the mapped file itself (/proc/<pid>/map_files), which no name
 * in the maps text can forge. */
static int ram_mapping(int proc, dev_t dev, ino_t ino, uint64_t ram,
		       uint64_t *start, al_err *err)
{
	char p[96] = "maps";
	al_autofd int fd = openat(proc, p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open QEMU's %s", p);
	al_autofree char *buf = malloc(MAPS_MAX);
	if (buf == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	size_t have = 0;
	for (;;) {
		ssize_t n = read(fd, buf + have, MAPS_MAX - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return al_err_sys(err, AL_ESYS, errno, "read %s", p);
		if (n == 0)
			break;
		have += (size_t)n;
		if (have == MAPS_MAX)
			return al_err_set(err, AL_EPROTO, 0,
					  "QEMU's memory map is over %u MiB",
					  MAPS_MAX >> 20);
	}
	if (al_vmcap_find_ram(buf, have, dev, ino, ram, start, err) < 0)
		return -1;
	snprintf(p, sizeof p, "map_files/%" PRIx64 "-%" PRIx64, *start,
		 *start + ram);
	struct stat st;
	if (fstatat(proc, p, &st, 0) < 0)
		return al_err_sys(err, AL_EPROTO, errno, "stat QEMU's %s", p);
	if (st.st_dev != dev || st.st_ino != ino)
		return al_err_set(err, AL_EPROTO, 0,
				  "QEMU's guest RAM mapping maps another file");
	return 0;
}

/* ---- capture ---- */

/* The pages of QEMU's RAM mapping the guest wrote: present and not the
 * file's (an anonymous copy), or swapped out (only anonymous pages of a
 * private mapping are). */
static int scan_pages(int proc, uint64_t start, uint64_t ram, uint8_t *map,
		      al_err *err)
{
	const char *p = "QEMU's pagemap";
	al_autofd int fd = openat(proc, "pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", p);
	uint64_t pages = ram / PAGE, ent[4096];
	for (uint64_t i = 0; i < pages;) {
		uint64_t n = pages - i;
		if (n > sizeof ent / sizeof *ent)
			n = sizeof ent / sizeof *ent;
		if (pread_all(fd, ent, n * sizeof *ent,
			      (off_t)((start / PAGE + i) * sizeof *ent), p,
			      err) < 0)
			return -1;
		for (uint64_t j = 0; j < n; j++) {
			uint64_t e = ent[j];
			if (((e & PM_PRESENT) && !(e & PM_FILE)) ||
			    (e & PM_SWAP))
				map[(i + j) / 8] |= (uint8_t)(1u
							      << ((i + j) % 8));
		}
		i += n;
	}
	return 0;
}

int al_vmcap_proc_open(pid_t pid, int pidfd, al_err *err)
{
	char p[32];
	snprintf(p, sizeof p, "/proc/%d", (int)pid);
	int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, AL_ESTATE, errno, "QEMU is gone");
	/* Alive after the open: then the pid was still its own when the
	 * directory was opened, and the directory stays its own. */
	if (pidfd >= 0 &&
	    syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0) {
		int e = errno;
		close(fd);
		return al_err_sys(err, AL_ESTATE, e, "QEMU is gone");
	}
	return fd;
}

int al_vmcap_dirty_pages(int proc, dev_t dev, ino_t ino, uint64_t ram,
			 uint8_t *map, uint64_t *start, al_err *err)
{
	if (ram == 0 || ram % PAGE != 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "mapping size is no whole number of pages");
	if (ram_mapping(proc, dev, ino, ram, start, err) < 0)
		return -1;
	return scan_pages(proc, *start, ram, map, err);
}

typedef struct save_ctx {
	int qmem;	/* /proc/<qemu>/mem */
	uint64_t start; /* the RAM mapping's address there */
	int out;	/* DIR/mem */
	const al_vmcap_base *b;
	const uint8_t *dirty;
	uint8_t *buf, *prev;
	uint64_t written; /* bytes */
} save_ctx;

/* Pages [from, from+n) of the guest, all dirty, into out: each one that
 * differs from the previous capture's (or all, without one). */
static int save_run(save_ctx *c, uint64_t from, uint64_t n, al_err *err)
{
	size_t len = (size_t)(n * PAGE);
	if (pread_all(c->qmem, c->buf, len, (off_t)(c->start + from * PAGE),
		      "the guest's RAM", err) < 0)
		return -1;
	int cmp = c->b->prev_fd >= 0;
	if (cmp && pread_all(c->b->prev_fd, c->prev, len, (off_t)(from * PAGE),
			     "the previous capture", err) < 0)
		return -1;
	for (uint64_t j = 0; j < n;) {
		uint64_t k = j;
		while (k < n && !(cmp && bit(c->b->prev_pages, from + k) &&
				  memcmp(c->buf + k * PAGE, c->prev + k * PAGE,
					 PAGE) == 0))
			k++;
		if (k > j) {
			if (pwrite_all(c->out, c->buf + j * PAGE,
				       (size_t)((k - j) * PAGE),
				       (off_t)((from + j) * PAGE), "mem",
				       err) < 0)
				return -1;
			c->written += (k - j) * PAGE;
		}
		j = k + 1;
	}
	return 0;
}

/* Pages the previous capture had and the guest has no more (QEMU gave
 * them back, they are the template's again): the template's, in out. */
static int revert_page(save_ctx *c, uint64_t i, al_err *err)
{
	if (pread_all(c->b->tmpl_fd, c->buf, PAGE, (off_t)(i * PAGE),
		      "the template's memory", err) < 0 ||
	    pwrite_all(c->out, c->buf, PAGE, (off_t)(i * PAGE), "mem", err) < 0)
		return -1;
	c->written += PAGE;
	return 0;
}

static int write_mem(save_ctx *c, uint64_t pages, al_err *err)
{
	uint64_t n;
	for (uint64_t i = 0; next_run(c->dirty, pages, CHUNK_PAGES, &i, &n);
	     i += n)
		if (save_run(c, i, n, err) < 0)
			return -1;
	for (uint64_t i = 0; c->b->prev_pages != NULL && i < pages; i++)
		if (bit(c->b->prev_pages, i) && !bit(c->dirty, i) &&
		    revert_page(c, i, err) < 0)
			return -1;
	return 0;
}

static int create_in(int dirfd, const char *name, al_err *err)
{
	int fd = openat(dirfd, name,
			O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			0600);
	if (fd < 0)
		return al_err_sys(err, errno == EEXIST ? AL_EEXIST : AL_ESYS,
				  errno, "create %s in the capture directory",
				  name);
	return fd;
}

static int sync_fd(int fd, const char *name, al_err *err)
{
	if (fsync(fd) < 0)
		return al_err_sys(err,
				  errno == ENOSPC || errno == EDQUOT
					  ? AL_EUNAVAIL
					  : AL_ESYS,
				  errno, "fsync %s", name);
	return 0;
}

static double since_ms(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) * 1e3 +
	       (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

static int save_files(al_vm_machine *m, al_vmcap_base *b, int dirfd,
		      al_capture_stats *st, al_vmcap_meta *meta, al_err *err)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int running = al_vm_machine_running(m, err);
	if (running < 0)
		return -1;
	if (running)
		return al_err_set(err, AL_ESTATE, 0,
				  "the machine runs: pause it first");
	if (al_vm_machine_version(m, meta->qemu, sizeof meta->qemu, err) < 0)
		return -1;
	al_autofd int sfd = create_in(dirfd, "devstate", err);
	if (sfd < 0)
		return -1;
	uint64_t state_bytes = 0;
	if (al_vm_machine_save_devices(m, sfd, &state_bytes, err) < 0)
		return -1;
	if (state_bytes == 0)
		return al_err_set(err, AL_EINTERNAL, 0,
				  "QEMU wrote no device state");
	if (sync_fd(sfd, "devstate", err) < 0)
		return -1;
	st->state_ms = since_ms(&t0);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint64_t start = 0, pages = b->ram / PAGE;
	size_t mlen = bitmap_bytes(b->ram);
	al_autofree uint8_t *dirty = calloc(1, mlen);
	if (dirty == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	al_autofd int proc = al_vmcap_proc_open(m->pid, m->pidfd, err);
	if (proc < 0 || al_vmcap_dirty_pages(proc, b->ram_dev, b->ram_ino,
					     b->ram, dirty, &start, err) < 0)
		return -1;
	st->dirty_pages = popcount(dirty, mlen);
	st->scan_ms = since_ms(&t0);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	al_autofd int qmem = openat(proc, "mem", O_RDONLY | O_CLOEXEC);
	if (qmem < 0)
		return al_err_sys(err, AL_ESYS, errno, "open QEMU's mem");
	al_autofd int out = create_in(dirfd, "mem", err);
	if (out < 0)
		return -1;
	/* The pages the guest did not write are the base's already. */
	int base = b->prev_fd >= 0 ? b->prev_fd : b->tmpl_fd;
	if (al_file_clone_fd(base, out, err) < 0)
		return -1;
	struct stat ost;
	if (fstat(out, &ost) < 0 || (uint64_t)ost.st_size != b->ram)
		return al_err_set(err, AL_EINTERNAL, 0,
				  "the base memory is not %" PRIu64 " bytes",
				  b->ram);
	al_autofree uint8_t *buf = malloc(2 * CHUNK_PAGES * PAGE);
	if (buf == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	save_ctx c = {.qmem = qmem,
		      .start = start,
		      .out = out,
		      .b = b,
		      .dirty = dirty,
		      .buf = buf,
		      .prev = buf + CHUNK_PAGES * PAGE};
	if (write_mem(&c, pages, err) < 0 || sync_fd(out, "mem", err) < 0)
		return -1;
	al_autofd int pfd = create_in(dirfd, "pages", err);
	if (pfd < 0 || pwrite_all(pfd, dirty, mlen, 0, "pages", err) < 0 ||
	    sync_fd(pfd, "pages", err) < 0)
		return -1;

	snprintf(meta->layout, sizeof meta->layout, "%s", AL_VMCAP_LAYOUT);
	snprintf(meta->format, sizeof meta->format, "%s",
		 AL_VM_SNAPSHOT_FORMAT);
	snprintf(meta->accel, sizeof meta->accel, "%s",
		 al_vm_accel_name(b->accel));
	snprintf(meta->base, sizeof meta->base, "%s", b->snapdir);
	meta->vcpus = b->vcpus;
	meta->ram = b->ram;
	meta->base_ino = b->tmpl_ino;
	meta->base_size = b->tmpl_size;
	meta->base_mtime_ns = b->tmpl_mtime_ns;
	meta->dirty_pages = st->dirty_pages;
	char text[AL_VMCAP_META_MAX];
	int tl = al_vmcap_meta_format(meta, text, sizeof text);
	if (tl < 0)
		return al_err_set(err, AL_EINVAL, 0, "capture meta too long");
	al_autofd int mfd = create_in(dirfd, "meta", err);
	if (mfd < 0 || pwrite_all(mfd, text, (size_t)tl, 0, "meta", err) < 0 ||
	    sync_fd(mfd, "meta", err) < 0 ||
	    sync_fd(dirfd, "the directory", err) < 0)
		return -1;
	st->write_ms = since_ms(&t0);
	st->bytes = c.written + state_bytes + mlen + (uint64_t)tl;

	/* This capture is the next one's base. */
	int keep = openat(dirfd, "mem", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (keep < 0)
		return al_err_sys(err, AL_ESYS, errno, "reopen mem");
	if (b->prev_fd >= 0)
		close(b->prev_fd);
	free(b->prev_pages);
	b->prev_fd = keep;
	b->prev_pages = dirty;
	dirty = NULL;
	return 0;
}

int al_vmcap_save(al_vm_machine *m, al_vmcap_base *b, const char *dir,
		  al_capture_stats *st, al_err *err)
{
	*st = (al_capture_stats){0};
	if (m == NULL || m->qmp == NULL || m->pid <= 0)
		return al_err_set(err, AL_ESTATE, 0, "vm not running");
	if (b->tmpl_fd < 0 || b->ram == 0)
		return al_err_set(err, AL_ESTATE, 0,
				  "this vm was booted, not restored from a "
				  "template snapshot: no template memory to "
				  "capture against");
	al_autofd int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
						O_CLOEXEC);
	if (dirfd < 0)
		return al_err_sys(err, AL_ENOENT, errno, "capture directory %s",
				  dir);
	/* Empty: then every file in it at a failure is this capture's. */
	DIR *d = fdopendir(dup(dirfd));
	if (d == NULL)
		return al_err_sys(err, AL_ESYS, errno, "read %s", dir);
	struct dirent *e;
	int empty = 1;
	while (empty && (e = readdir(d)) != NULL)
		empty = strcmp(e->d_name, ".") == 0 ||
			strcmp(e->d_name, "..") == 0;
	closedir(d);
	if (!empty)
		return al_err_set(err, AL_EEXIST, 0,
				  "capture directory %s is not empty", dir);
	al_vmcap_meta meta = {0};
	if (save_files(m, b, dirfd, st, &meta, err) == 0) {
		al_info("vm capture %s: %" PRIu64 " dirty pages, %" PRIu64
			" KiB written; state %.1f ms, scan %.1f ms, write "
			"%.1f ms",
			dir, st->dirty_pages, st->bytes >> 10, st->state_ms,
			st->scan_ms, st->write_ms);
		return 0;
	}
	/* Only what this capture made: the directory is the caller's. */
	for (size_t i = 0; i < sizeof capture_files / sizeof *capture_files;
	     i++)
		unlinkat(dirfd, capture_files[i], 0);
	al_err_wrap(err, "capturing the vm into %s", dir);
	return -1;
}

/* ---- restore ---- */

static int open_in(int dirfd, const char *name, struct stat *st, al_err *err)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, AL_ENOENT, errno, "capture file %s",
				  name);
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		close(fd);
		return al_err_set(err, AL_ESTATE, 0,
				  "capture file %s is no regular file", name);
	}
	return fd;
}

static int check_meta(const al_vmcap_meta *mt, const al_vmcap_base *b,
		      al_err *err)
{
	if (strcmp(mt->layout, AL_VMCAP_LAYOUT) != 0)
		return al_err_set(err, AL_ESTATE, 0,
				  "the capture's layout is %s, this Airlock "
				  "reads %s",
				  mt->layout, AL_VMCAP_LAYOUT);
	if (strcmp(mt->format, AL_VM_SNAPSHOT_FORMAT) != 0)
		return al_err_set(err, AL_ESTATE, 0,
				  "the capture is of vm format %s, this "
				  "Airlock's is %s",
				  mt->format, AL_VM_SNAPSHOT_FORMAT);
	if (strcmp(mt->accel, al_vm_accel_name(b->accel)) != 0)
		return al_err_set(err, AL_ESTATE, 0,
				  "the capture was taken under %s, the "
				  "template runs under %s",
				  mt->accel, al_vm_accel_name(b->accel));
	if (mt->vcpus != b->vcpus)
		return al_err_set(err, AL_ESTATE, 0,
				  "the capture has %" PRIu64
				  " vCPUs, the sandbox %u",
				  mt->vcpus, b->vcpus);
	if (mt->ram != ((uint64_t)AL_VM_MEM_MB << 20) ||
	    mt->ram != b->tmpl_size)
		return al_err_set(err, AL_ESTATE, 0,
				  "the capture's guest RAM is %" PRIu64
				  " bytes, not %d MiB",
				  mt->ram, AL_VM_MEM_MB);
	if (strcmp(mt->base, b->snapdir) != 0)
		return al_err_set(err, AL_ESTATE, 0,
				  "the capture was taken against the template "
				  "snapshot %s, the sandbox's is %s",
				  mt->base, b->snapdir);
	if (mt->base_ino != b->tmpl_ino || mt->base_size != b->tmpl_size ||
	    mt->base_mtime_ns != b->tmpl_mtime_ns)
		return al_err_set(err, AL_ESTATE, 0,
				  "the template's memory %s/mem was rebuilt "
				  "since the capture",
				  b->snapdir);
	return 0;
}

/* Have the kernel read the saved pages while QEMU starts: a capture of
 * hours ago is no longer in the page cache. */
static void prefetch(const al_vmcap_load *ld)
{
	uint64_t pages = ld->meta.ram / PAGE, n;
	for (uint64_t i = 0; next_run(ld->pages, pages, pages, &i, &n); i += n)
		(void)posix_fadvise(ld->mem_fd, (off_t)(i * PAGE),
				    (off_t)(n * PAGE), POSIX_FADV_WILLNEED);
}

int al_vmcap_open(const char *dir, const al_vmcap_base *b, al_vmcap_load *ld,
		  al_err *err)
{
	*ld = (al_vmcap_load){.mem_fd = -1, .state_fd = -1, .base = b};
	al_autofd int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
						O_CLOEXEC);
	if (dirfd < 0)
		return al_err_sys(err, AL_ENOENT, errno, "capture directory %s",
				  dir);
	struct stat st;
	/* Before the first goto: the cleanups run at the label. */
	al_autofd int pfd = -1;
	al_autofd int mfd = open_in(dirfd, "meta", &st, err);
	if (mfd < 0)
		return -1;
	char text[AL_VMCAP_META_MAX + 1];
	ssize_t n = read(mfd, text, sizeof text);
	if (n < 0)
		return al_err_sys(err, AL_ESYS, errno, "read meta");
	if (al_vmcap_meta_parse(text, (size_t)n, &ld->meta, err) < 0 ||
	    check_meta(&ld->meta, b, err) < 0)
		goto fail;
	ld->mem_fd = open_in(dirfd, "mem", &st, err);
	if (ld->mem_fd < 0)
		goto fail;
	if ((uint64_t)st.st_size != ld->meta.ram) {
		al_err_set(err, AL_ESTATE, 0,
			   "the capture's mem is %lld bytes, not %" PRIu64,
			   (long long)st.st_size, ld->meta.ram);
		goto fail;
	}
	ld->state_fd = open_in(dirfd, "devstate", &st, err);
	if (ld->state_fd < 0)
		goto fail;
	if (st.st_size <= 0 || st.st_size > AL_VM_DEVSTATE_MAX) {
		al_err_set(err, AL_ESTATE, 0,
			   "the capture's devstate is %lld bytes",
			   (long long)st.st_size);
		goto fail;
	}
	pfd = open_in(dirfd, "pages", &st, err);
	if (pfd < 0)
		goto fail;
	size_t mlen = bitmap_bytes(ld->meta.ram);
	if ((uint64_t)st.st_size != mlen) {
		al_err_set(err, AL_ESTATE, 0,
			   "the capture's pages is %lld bytes, not %zu",
			   (long long)st.st_size, mlen);
		goto fail;
	}
	ld->pages = malloc(mlen);
	if (ld->pages == NULL) {
		al_err_set(err, AL_ENOMEM, 0, "out of memory");
		goto fail;
	}
	if (pread_all(pfd, ld->pages, mlen, 0, "pages", err) < 0)
		goto fail;
	if (popcount(ld->pages, mlen) != ld->meta.dirty_pages) {
		al_err_set(err, AL_ESTATE, 0,
			   "the capture's pages do not match its meta");
		goto fail;
	}
	prefetch(ld);
	return 0;
fail:
	al_err_wrap(err, "capture %s", dir);
	al_vmcap_close(ld);
	return -1;
}

void al_vmcap_close(al_vmcap_load *ld)
{
	if (ld == NULL)
		return;
	if (ld->mem_fd >= 0)
		close(ld->mem_fd);
	if (ld->state_fd >= 0)
		close(ld->state_fd);
	free(ld->pages);
	ld->mem_fd = ld->state_fd = -1;
	ld->pages = NULL;
}

int al_vmcap_before_load(al_vm_machine *m, void *arg, al_err *err)
{
	al_vmcap_load *ld = arg;
	const al_vmcap_base *b = ld->base;
	char v[sizeof ld->meta.qemu];
	if (al_vm_machine_version(m, v, sizeof v, err) < 0)
		return -1;
	if (strcmp(v, ld->meta.qemu) != 0)
		return al_err_set(err, AL_ESTATE, 0,
				  "the capture was taken by QEMU %s, this is "
				  "QEMU %s",
				  ld->meta.qemu, v);
	uint64_t start = 0, pages = ld->meta.ram / PAGE;
	if (b->ram != ld->meta.ram)
		return al_err_set(err, AL_ESTATE, 0,
				  "the machine's RAM is not the capture's");
	al_autofd int proc = al_vmcap_proc_open(m->pid, m->pidfd, err);
	if (proc < 0 ||
	    ram_mapping(proc, b->ram_dev, b->ram_ino, b->ram, &start, err) < 0)
		return -1;
	al_autofd int qmem = openat(proc, "mem", O_RDWR | O_CLOEXEC);
	if (qmem < 0)
		return al_err_sys(err, AL_ESYS, errno, "open QEMU's mem");
	al_autofree uint8_t *buf = malloc(CHUNK_PAGES * PAGE);
	if (buf == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	ld->written = 0;
	uint64_t n;
	for (uint64_t i = 0; next_run(ld->pages, pages, CHUNK_PAGES, &i, &n);
	     i += n) {
		size_t len = (size_t)(n * PAGE);
		/* Into QEMU's private mapping: each page becomes its own
		 * copy there, every other stays the template's, shared. */
		if (pread_all(ld->mem_fd, buf, len, (off_t)(i * PAGE),
			      "the capture's mem", err) < 0 ||
		    pwrite_all(qmem, buf, len, (off_t)(start + i * PAGE),
			       "the guest's RAM", err) < 0)
			return -1;
		ld->written += n;
	}
	return 0;
}

void al_vmcap_base_take(al_vmcap_base *b, al_vmcap_load *ld)
{
	if (b->prev_fd >= 0)
		close(b->prev_fd);
	free(b->prev_pages);
	b->prev_fd = ld->mem_fd;
	b->prev_pages = ld->pages;
	ld->mem_fd = -1;
	ld->pages = NULL;
}
