/* gw/fakeip: the synthetic address map (a tsearch tree by name, an array
 * by address: addresses are handed out contiguously). */
#include <errno.h>
#include <fcntl.h>
#include <search.h> /* tsearch */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/dnsname.h"
#include "gw/fakeip.h"

#define FIRST_ADDR 0xc6120001u /* 198.18.0.1 */
#define HEADER "airlock-fakeip 1\n"
#define NAME_MAX_LEN 253
#define JOURNAL_BROKEN (-2)

typedef struct fk_entry {
	uint32_t addr;
	char name[];
} fk_entry;

struct al_fakeip {
	uint32_t cap;
	uint32_t n, alloc;
	fk_entry **by_addr;   /* [i]: FIRST_ADDR + i */
	void *by_name;	      /* tsearch root of fk_entry * */
	int journal;	      /* al_fakeip_open's file, or -1 */
	size_t journal_bytes; /* its size */
};

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const fk_entry *)a)->name, ((const fk_entry *)b)->name);
}

al_fakeip *al_fakeip_new(uint32_t cap, al_err *err)
{
	if (cap == 0 || cap > AL_FAKEIP_CAP_MAX) {
		al_err_set(err, AL_EINVAL, 0, "fakeip: cap %u (want 1..%u)",
			   cap, AL_FAKEIP_CAP_MAX);
		return NULL;
	}
	al_fakeip *m = calloc(1, sizeof *m);
	if (m == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "fakeip: out of memory");
		return NULL;
	}
	m->cap = cap;
	m->journal = -1;
	return m;
}

static void nop_free(void *p)
{
	(void)p; /* entries are freed through by_addr */
}

void al_fakeip_free(al_fakeip *m)
{
	if (m == NULL)
		return;
	if (m->journal >= 0)
		close(m->journal);
	tdestroy(m->by_name, nop_free);
	for (uint32_t i = 0; i < m->n; i++)
		free(m->by_addr[i]);
	free(m->by_addr);
	free(m);
}

/* A canonical name stays as it is under al_dnsname_canon. */
static bool canonical(const char *name)
{
	char c[NAME_MAX_LEN + 1];
	return al_dnsname_canon(name, c, sizeof c, NULL) == 0 &&
	       strcmp(c, name) == 0;
}

/* Add name (canonical, not in the map) at the next address. */
static int add(al_fakeip *m, const char *name, size_t nl, uint32_t *addr,
	       al_err *err)
{
	if (m->n >= m->cap)
		return al_err_set(err, AL_ENOSPACE, 0,
				  "fakeip: map full (%u names)", m->cap);
	if (m->n == m->alloc) {
		/* double, from 16, up to cap */
		uint32_t want = m->alloc == 0 ? 16 : m->alloc * 2;
		if (want > m->cap)
			want = m->cap;
		fk_entry **g = realloc(m->by_addr, (size_t)want * sizeof *g);
		if (g == NULL)
			return al_err_set(err, AL_ENOMEM, ENOMEM,
					  "fakeip: out of memory");
		m->by_addr = g;
		m->alloc = want;
	}
	fk_entry *e = malloc(sizeof *e + nl + 1);
	if (e == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM,
				  "fakeip: out of memory");
	e->addr = FIRST_ADDR + m->n;
	memcpy(e->name, name, nl + 1);
	fk_entry **slot = tsearch(e, &m->by_name, cmp_entry);
	if (slot == NULL || *slot != e) {
		free(e);
		return slot == NULL ? al_err_set(err, AL_ENOMEM, ENOMEM,
						 "fakeip: out of memory")
				    : al_err_set(err, AL_EEXIST, 0,
						 "fakeip: name twice");
	}
	m->by_addr[m->n++] = e;
	*addr = e->addr;
	return 0;
}

static fk_entry *find(const al_fakeip *m, const char *name, size_t nl)
{
	_Alignas(fk_entry) char key[sizeof(fk_entry) + NAME_MAX_LEN + 1];
	memcpy(((fk_entry *)key)->name, name, nl + 1);
	fk_entry **slot = tfind(key, &m->by_name, cmp_entry);
	return slot != NULL ? *slot : NULL;
}

static size_t format_addr(uint32_t a, char *out);

/* One line for the next address, in one write (O_APPEND). */
static int journal_append(al_fakeip *m, const char *name, size_t nl,
			  al_err *err)
{
	if (m->n >= m->cap)
		return al_err_set(err, AL_ENOSPACE, 0,
				  "fakeip: map full (%u names)", m->cap);
	char line[16 + NAME_MAX_LEN + 2];
	size_t o = format_addr(FIRST_ADDR + m->n, line);
	line[o++] = ' ';
	memcpy(line + o, name, nl);
	o += nl;
	line[o++] = '\n';
	if (m->journal_bytes + o > AL_FAKEIP_JOURNAL_MAX)
		return al_err_set(err, AL_ENOSPACE, 0,
				  "fakeip: journal full (%u bytes)",
				  AL_FAKEIP_JOURNAL_MAX);
	ssize_t w;
	do
		w = write(m->journal, line, o);
	while (w < 0 && errno == EINTR);
	if (w != (ssize_t)o) {
		int e = w < 0 ? errno : EIO;
		if (w > 0) {
			/* A cut line (no newline) the next open drops; no
			 * line may follow it, so no new name from now. */
			close(m->journal);
			m->journal = JOURNAL_BROKEN;
		}
		return al_err_sys(err, AL_ESYS, e, "fakeip: journal write");
	}
	m->journal_bytes += o;
	return 0;
}

int al_fakeip_get(al_fakeip *m, const char *name, uint32_t *addr, al_err *err)
{
	if (name == NULL || !canonical(name))
		return al_err_set(err, AL_EINVAL, 0,
				  "fakeip: name not canonical");
	size_t nl = strlen(name);
	fk_entry *e = find(m, name, nl);
	if (e != NULL) {
		*addr = e->addr;
		return 0;
	}
	if (m->journal == JOURNAL_BROKEN)
		return al_err_set(err, AL_ESYS, 0,
				  "fakeip: journal broken by a failed write");
	if (m->journal >= 0 && journal_append(m, name, nl, err) != 0)
		return -1;
	return add(m, name, nl, addr, err);
}

const char *al_fakeip_name(const al_fakeip *m, uint32_t addr)
{
	if (addr < FIRST_ADDR || addr - FIRST_ADDR >= m->n)
		return NULL;
	return m->by_addr[addr - FIRST_ADDR]->name;
}

size_t al_fakeip_count(const al_fakeip *m)
{
	return m->n;
}

static size_t format_addr(uint32_t a, char *out)
{
	return (size_t)sprintf(out, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255,
			       (a >> 8) & 255, a & 255);
}

int al_fakeip_pack(const al_fakeip *m, char **out, size_t *len, al_err *err)
{
	size_t cap = sizeof HEADER;
	for (uint32_t i = 0; i < m->n; i++)
		cap += 17 + strlen(m->by_addr[i]->name);
	char *buf = malloc(cap);
	if (buf == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM,
				  "fakeip: out of memory");
	size_t o = sizeof HEADER - 1;
	memcpy(buf, HEADER, o);
	for (uint32_t i = 0; i < m->n; i++) {
		o += format_addr(m->by_addr[i]->addr, buf + o);
		buf[o++] = ' ';
		size_t nl = strlen(m->by_addr[i]->name);
		memcpy(buf + o, m->by_addr[i]->name, nl);
		o += nl;
		buf[o++] = '\n';
	}
	*out = buf;
	*len = o;
	return 0;
}

/* "a.b.c.d" exactly: decimal octets without leading zeros. */
static bool parse_addr(const char *s, size_t n, uint32_t *out)
{
	uint32_t a = 0;
	size_t i = 0;
	for (int part = 0; part < 4; part++) {
		if (part > 0) {
			if (i >= n || s[i] != '.')
				return false;
			i++;
		}
		size_t start = i;
		unsigned v = 0;
		while (i < n && s[i] >= '0' && s[i] <= '9' && i - start < 3)
			v = v * 10 + (unsigned)(s[i++] - '0');
		if (i == start || v > 255 || (s[start] == '0' && i - start > 1))
			return false;
		a = a << 8 | v;
	}
	if (i != n)
		return false;
	*out = a;
	return true;
}

al_fakeip *al_fakeip_unpack(const char *buf, size_t len, uint32_t cap,
			    al_err *err)
{
	size_t hl = sizeof HEADER - 1;
	if (len < hl || memcmp(buf, HEADER, hl) != 0) {
		al_err_set(err, AL_EINVAL, 0,
			   "fakeip: not a map (no \"airlock-fakeip 1\" line)");
		return NULL;
	}
	al_fakeip *m = al_fakeip_new(cap, err);
	if (m == NULL)
		return NULL;
	size_t off = hl;
	for (size_t line = 2; off < len; line++) {
		const char *s = buf + off;
		const char *nl = memchr(s, '\n', len - off);
		const char *sp = nl != NULL ? memchr(s, ' ', (size_t)(nl - s))
					    : NULL;
		uint32_t a, got;
		char name[NAME_MAX_LEN + 1];
		size_t namelen = sp != NULL ? (size_t)(nl - sp - 1) : 0;
		if (sp == NULL || namelen == 0 || namelen > NAME_MAX_LEN ||
		    !parse_addr(s, (size_t)(sp - s), &a)) {
			al_err_set(err, AL_EINVAL, 0,
				   "fakeip: line %zu: not \"address name\"",
				   line);
			goto fail;
		}
		memcpy(name, sp + 1, namelen);
		name[namelen] = '\0';
		if (memchr(name, '\0', namelen) != NULL || !canonical(name)) {
			al_err_set(err, AL_EINVAL, 0,
				   "fakeip: line %zu: name not canonical",
				   line);
			goto fail;
		}
		if (a != FIRST_ADDR + m->n) {
			al_err_set(err, AL_EINVAL, 0,
				   "fakeip: line %zu: address out of order"
				   " (want the next one)",
				   line);
			goto fail;
		}
		if (find(m, name, namelen) != NULL) {
			al_err_set(err, AL_EINVAL, 0,
				   "fakeip: line %zu: name twice", line);
			goto fail;
		}
		if (m->n == cap) {
			al_err_set(err, AL_EINVAL, 0,
				   "fakeip: line %zu: more than %u names", line,
				   cap);
			goto fail;
		}
		if (add(m, name, namelen, &got, err) != 0)
			goto fail;
		off = (size_t)(nl - buf) + 1;
	}
	return m;
fail:
	al_fakeip_free(m);
	return NULL;
}

int al_fakeip_save(const al_fakeip *m, const char *path, al_err *err)
{
	al_autofree char *buf = NULL;
	size_t len;
	if (al_fakeip_pack(m, &buf, &len, err) != 0)
		return -1;
	char tmp[4096];
	if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
		return al_err_set(err, AL_EINVAL, 0, "fakeip: path too long");
	al_autofd int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				0600);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "fakeip: open %s", tmp);
	for (size_t o = 0; o < len;) {
		ssize_t w = write(fd, buf + o, len - o);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = errno;
			unlink(tmp);
			return al_err_sys(err, AL_ESYS, e, "fakeip: write %s",
					  tmp);
		}
		o += (size_t)w;
	}
	if (fsync(fd) != 0 || rename(tmp, path) != 0) {
		int e = errno;
		unlink(tmp);
		return al_err_sys(err, AL_ESYS, e, "fakeip: save %s", path);
	}
	return 0;
}

/* The whole of fd (a regular file of at most AL_FAKEIP_FILE_MAX(cap)
 * bytes), malloc'd; *len bytes. */
static char *read_map(int fd, const char *path, uint32_t cap, size_t *len,
		      al_err *err)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > AL_FAKEIP_FILE_MAX(cap)) {
		al_err_set(err, AL_EINVAL, 0,
			   "fakeip: %s: not a file or too large", path);
		return NULL;
	}
	size_t size = (size_t)st.st_size;
	char *buf = malloc(size + 1);
	if (buf == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "fakeip: out of memory");
		return NULL;
	}
	ssize_t r;
	do
		r = pread(fd, buf, size, 0);
	while (r < 0 && errno == EINTR);
	if (r != (ssize_t)size) {
		al_err_sys(err, AL_ESYS, r < 0 ? errno : EIO, "fakeip: read %s",
			   path);
		free(buf);
		return NULL;
	}
	*len = size;
	return buf;
}

al_fakeip *al_fakeip_load(const char *path, uint32_t cap, al_err *err)
{
	al_autofd int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		al_err_sys(err, errno == ENOENT ? AL_ENOENT : AL_ESYS, errno,
			   "fakeip: open %s", path);
		return NULL;
	}
	size_t len;
	al_autofree char *buf = read_map(fd, path, cap, &len, err);
	if (buf == NULL)
		return NULL;
	al_fakeip *m = al_fakeip_unpack(buf, len, cap, err);
	if (m == NULL)
		al_err_wrap(err, "%s", path);
	return m;
}

al_fakeip *al_fakeip_open(const char *path, uint32_t cap, al_err *err)
{
	al_autofd int fd = open(path,
				O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC |
					O_NOFOLLOW,
				0600);
	if (fd < 0) {
		al_err_sys(err, AL_ESYS, errno, "fakeip: open %s", path);
		return NULL;
	}
	size_t size;
	al_autofree char *buf = read_map(fd, path, cap, &size, err);
	if (buf == NULL)
		return NULL;
	if (size == 0) {
		/* A new journal: its header first. */
		size = sizeof HEADER - 1;
		if (write(fd, HEADER, size) != (ssize_t)size) {
			al_err_sys(err, AL_ESYS, errno, "fakeip: write %s",
				   path);
			return NULL;
		}
		free(buf);
		buf = read_map(fd, path, cap, &size, err);
		if (buf == NULL)
			return NULL;
	}
	/* Whole lines only: what follows the last newline, and a line a
	 * failed append ended early, are cut off. */
	size_t keep = size;
	while (keep > 0 && buf[keep - 1] != '\n')
		keep--;
	if (keep < size && ftruncate(fd, (off_t)keep) != 0) {
		al_err_sys(err, AL_ESYS, errno, "fakeip: truncate %s", path);
		return NULL;
	}
	al_fakeip *m = al_fakeip_unpack(buf, keep, cap, err);
	if (m == NULL) {
		al_err_wrap(err, "%s", path);
		return NULL;
	}
	m->journal = al_steal_fd(&fd);
	m->journal_bytes = keep;
	return m;
}
