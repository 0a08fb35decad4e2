/* pool: see pool.h. */
#include "net/pool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "net/nl.h"

typedef struct host_ctx {
	al_netpool *p;
	al_err *err;
	int bad;
} host_ctx;

static int host_prefix(void *arg, int kind, uint32_t addr, int len)
{
	host_ctx *c = arg;
	al_net_prefix h = {addr & al_net_prefix_mask(len), len};
	if (kind == 'a')
		h = (al_net_prefix){addr, 32};
	if (al_net_prefix_overlap(&c->p->pool, &h)) {
		char a[AL_NET_PREFIX_STRLEN], b[AL_NET_PREFIX_STRLEN];
		al_net_prefix_format(&c->p->pool, a);
		al_net_prefix_format(&h, b);
		al_err_set(c->err, AL_EINVAL, 0,
			   "%s %s overlaps the host's %s %s: choose another "
			   "pool",
			   AL_NETPOOL_ENV, a, kind == 'a' ? "address" : "route",
			   b);
		c->bad = 1;
		return 1;
	}
	if (kind == 'a' && (addr >> 24) != 127) {
		if (c->p->ndeny == AL_NETPOOL_DENY_MAX) {
			al_err_set(c->err, AL_EINVAL, 0,
				   "the host has more than %d addresses",
				   AL_NETPOOL_DENY_MAX - 12);
			c->bad = 1;
			return 1;
		}
		c->p->deny[c->p->ndeny++] = h;
	}
	return 0;
}

static int dir_ok(const char *path, al_err *err)
{
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", path);
	struct stat st;
	if (lstat(path, &st) < 0)
		return al_err_sys(err, AL_ESYS, errno, "stat %s", path);
	/* Whoever could write here could hand one slot to two sandboxes. */
	if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0)
		return al_err_set(err, AL_EPERM, 0,
				  "%s must be a directory owned by root, "
				  "mode 0700",
				  path);
	return 0;
}

int al_netpool_open(al_netpool *p, const char *state_dir, const char *pool,
		    al_err *err)
{
	memset(p, 0, sizeof *p);
	if (pool == NULL)
		pool = getenv(AL_NETPOOL_ENV);
	if (pool == NULL || *pool == '\0')
		pool = AL_NET_POOL_DEFAULT;
	if (al_net_pool_parse(pool, &p->pool, err) < 0) {
		al_err_wrap(err, "%s", AL_NETPOOL_ENV);
		return -1;
	}
	p->slots = al_net_pool_slots(&p->pool);
	for (size_t i = 0; i < al_net_never_count; i++)
		p->deny[p->ndeny++] = al_net_never[i];
	p->deny[p->ndeny++] = p->pool;

	al_nl nl = {0};
	if (al_nl_open(&nl, err) < 0)
		return -1;
	host_ctx c = {.p = p, .err = err};
	int rc = al_nl_ipv4_walk(&nl, host_prefix, &c, err);
	al_nl_close(&nl);
	if (rc < 0 || c.bad)
		return -1;

	int n = snprintf(p->dir, sizeof p->dir, "%s/run", state_dir);
	if (n < 0 || (size_t)n + sizeof "/net" > sizeof p->dir)
		return al_err_set(err, AL_EINVAL, 0, "state dir too long");
	if (mkdir(p->dir, 0755) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", p->dir);
	strcat(p->dir, "/net");
	if (dir_ok(p->dir, err) < 0)
		return -1;
	char ready[AL_PATH_MAX];
	snprintf(ready, sizeof ready, "%s/ready", p->dir);
	return dir_ok(ready, err);
}

/* ---- a slot's lock and state ---- */

typedef struct slot_state {
	char word[8]; /* "", "prep", "ready", "taken" */
	al_netslot_kind kind;
	int ifindex;
} slot_state;

static int lock_open(const al_netpool *p, uint32_t i, al_err *err)
{
	char path[AL_PATH_MAX];
	snprintf(path, sizeof path, "%s/%u.lock", p->dir, i);
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", path);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		close(fd);
		if (e == EWOULDBLOCK)
			return -2; /* held by a live holder */
		return al_err_sys(err, AL_ESYS, e, "flock %s", path);
	}
	return fd;
}

/* The state is a fixed-size record overwritten in place: no truncate,
 * which on ext4 (auto_da_alloc) flushes the file at close: milliseconds
 * on a take. */
#define STATE_LEN 24

static void state_read(int fd, slot_state *st)
{
	char buf[STATE_LEN + 1] = {0};
	memset(st, 0, sizeof *st);
	ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
	if (n <= 0)
		return;
	char kind[4] = {0};
	int ifindex = 0;
	if (sscanf(buf, "%7s %3s %d", st->word, kind, &ifindex) < 1)
		st->word[0] = '\0';
	st->kind = strcmp(kind, "vm") == 0 ? AL_NETSLOT_VM : AL_NETSLOT_NS;
	st->ifindex = ifindex;
}

static int state_write(int fd, const char *word, al_netslot_kind kind,
		       int ifindex)
{
	char buf[STATE_LEN + 1];
	char text[STATE_LEN];
	if (word[0] == '\0')
		text[0] = '\0';
	else
		snprintf(text, sizeof text, "%s %s %d", word,
			 al_netslot_kind_name(kind), ifindex);
	snprintf(buf, sizeof buf, "%-*s\n", STATE_LEN - 1, text);
	return pwrite(fd, buf, STATE_LEN, 0) == STATE_LEN ? 0 : -1;
}

static void marker_path(char *out, const al_netpool *p, al_netslot_kind kind,
			uint32_t i)
{
	snprintf(out, AL_PATH_MAX, "%s/ready/%s.%u", p->dir,
		 al_netslot_kind_name(kind), i);
}

static int marker_set(const al_netpool *p, al_netslot_kind kind, uint32_t i,
		      int on)
{
	char path[AL_PATH_MAX];
	marker_path(path, p, kind, i);
	if (!on)
		return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* The slot's files and markers go; the caller holds its lock. */
static void slot_clear(const al_netpool *p, uint32_t i, int fd)
{
	al_netslot_remove(p->dir, i);
	marker_set(p, AL_NETSLOT_NS, i, 0);
	marker_set(p, AL_NETSLOT_VM, i, 0);
	state_write(fd, "", AL_NETSLOT_NS, 0);
}

static int spec_of(const al_netpool *p, uint32_t i, al_netslot_kind kind,
		   al_netslot_spec *spec, al_err *err)
{
	*spec = (al_netslot_spec){
		.dir = p->dir,
		.index = i,
		.kind = kind,
		.deny = p->deny,
		.ndeny = p->ndeny,
	};
	return al_net_slot_addr_of(&p->pool, i, &spec->addr, err);
}

long al_netpool_prepare(al_netpool *p, al_netslot_kind kind, al_err *err)
{
	for (uint32_t n = 0; n < p->slots; n++) {
		uint32_t i = (p->cursor + n) % p->slots;
		int fd = lock_open(p, i, err);
		if (fd == -2)
			continue;
		if (fd < 0)
			return -1;
		slot_state st;
		state_read(fd, &st);
		if (strcmp(st.word, "ready") == 0) {
			close(fd);
			continue;
		}
		p->cursor = (i + 1) % p->slots;
		/* Whatever a crash left of it goes first. */
		slot_clear(p, i, fd);
		al_netslot_spec spec;
		al_netslot s;
		if (spec_of(p, i, kind, &spec, err) < 0)
			goto fail;
		if (state_write(fd, "prep", kind, 0) < 0) {
			al_err_sys(err, AL_ESYS, errno, "write slot %u state",
				   i);
			goto fail;
		}
		if (al_netslot_create(&spec, &s, err) < 0)
			goto fail;
		int ifindex = s.ifindex;
		al_netslot_close(&s);
		if (state_write(fd, "ready", kind, ifindex) < 0 ||
		    marker_set(p, kind, i, 1) < 0) {
			al_err_sys(err, AL_ESYS, errno,
				   "mark network slot %u ready", i);
			goto fail;
		}
		close(fd);
		return (long)i;
fail:
		slot_clear(p, i, fd);
		close(fd);
		return -1;
	}
	return al_err_set(err, AL_EUNAVAIL, 0,
			  "all %u network slots of %s are in use", p->slots,
			  p->dir);
}

static int parse_marker(const char *name, al_netslot_kind kind, uint32_t slots,
			uint32_t *i)
{
	const char *k = al_netslot_kind_name(kind);
	size_t kl = strlen(k);
	if (strncmp(name, k, kl) != 0 || name[kl] != '.')
		return -1;
	char *end;
	errno = 0;
	unsigned long v = strtoul(name + kl + 1, &end, 10);
	if (errno != 0 || *end != '\0' || end == name + kl + 1 || v >= slots)
		return -1;
	*i = (uint32_t)v;
	return 0;
}

int al_netpool_take(al_netpool *p, al_netslot_kind kind, al_netlease *l,
		    al_err *err)
{
	l->lock_fd = -1;
	char path[AL_PATH_MAX];
	snprintf(path, sizeof path, "%s/ready", p->dir);
	DIR *d = opendir(path);
	if (d == NULL)
		return al_err_sys(err, AL_ESYS, errno, "open %s", path);
	int rc = AL_DECLINED;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		uint32_t i;
		if (parse_marker(de->d_name, kind, p->slots, &i) < 0)
			continue;
		int fd = lock_open(p, i, err);
		if (fd == -2)
			continue;
		if (fd < 0) {
			rc = -1;
			break;
		}
		slot_state st;
		state_read(fd, &st);
		al_net_slot_addr a;
		if (strcmp(st.word, "ready") != 0 || st.kind != kind ||
		    al_net_slot_addr_of(&p->pool, i, &a, NULL) < 0) {
			close(fd);
			continue;
		}
		if (al_netslot_open(p->dir, i, kind, &a, st.ifindex, &l->slot,
				    err) < 0 ||
		    state_write(fd, "taken", kind, st.ifindex) < 0) {
			/* A ready slot that cannot be opened is broken:
			 * remove it rather than hand it out again. */
			al_netslot_close(&l->slot);
			slot_clear(p, i, fd);
			close(fd);
			continue;
		}
		marker_set(p, kind, i, 0);
		l->lock_fd = fd;
		rc = 0;
		break;
	}
	closedir(d);
	return rc;
}

int al_netpool_lease(al_netpool *p, al_netslot_kind kind, al_netlease *l,
		     int *prepared, al_err *err)
{
	*prepared = 0;
	int rc = al_netpool_take(p, kind, l, err);
	/* What this caller prepared is ready to anyone, and another start
	 * of a burst may take it first: then it prepares again, a bounded
	 * number of times. */
	for (int i = 0; rc == AL_DECLINED && i < AL_NETPOOL_PREPARES; i++) {
		*prepared = 1;
		if (al_netpool_prepare(p, kind, err) < 0)
			return -1;
		rc = al_netpool_take(p, kind, l, err);
	}
	if (rc == AL_DECLINED)
		return al_err_set(err, AL_EUNAVAIL, 0,
				  "the network slots prepared for this "
				  "sandbox were all taken by others");
	return rc;
}

void al_netpool_unpin(al_netpool *p, al_netlease *l)
{
	if (l != NULL && l->lock_fd >= 0)
		al_netslot_remove(p->dir, l->slot.index);
}

void al_netpool_release(al_netpool *p, al_netlease *l)
{
	if (l == NULL || l->lock_fd < 0)
		return;
	al_netslot_close(&l->slot);
	slot_clear(p, l->slot.index, l->lock_fd);
	close(l->lock_fd);
	l->lock_fd = -1;
}

unsigned al_netpool_ready(const al_netpool *p, al_netslot_kind kind)
{
	char path[AL_PATH_MAX];
	snprintf(path, sizeof path, "%s/ready", p->dir);
	DIR *d = opendir(path);
	if (d == NULL)
		return 0;
	unsigned n = 0;
	struct dirent *de;
	uint32_t i;
	while ((de = readdir(d)) != NULL)
		n += parse_marker(de->d_name, kind, p->slots, &i) == 0;
	closedir(d);
	return n;
}

static int file_exists(const char *dir, uint32_t i, const char *suffix)
{
	char path[AL_PATH_MAX];
	struct stat st;
	snprintf(path, sizeof path, "%s/%u.%s", dir, i, suffix);
	return lstat(path, &st) == 0;
}

int al_netpool_reconcile(al_netpool *p, unsigned *cleaned, al_err *err)
{
	*cleaned = 0;
	DIR *d = opendir(p->dir);
	if (d == NULL)
		return al_err_sys(err, AL_ESYS, errno, "open %s", p->dir);
	al_autofree uint8_t *seen = calloc((p->slots + 7) / 8, 1);
	if (seen == NULL) {
		closedir(d);
		return al_err_set(err, AL_ENOMEM, 0, "reconcile");
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		char *end;
		unsigned long i = strtoul(de->d_name, &end, 10);
		if (end == de->d_name || *end != '.' || i >= p->slots)
			continue;
		seen[i / 8] |= (uint8_t)(1u << (i % 8));
	}
	closedir(d);
	for (uint32_t i = 0; i < p->slots; i++) {
		if ((seen[i / 8] & (1u << (i % 8))) == 0)
			continue;
		int fd = lock_open(p, i, err);
		if (fd == -2)
			continue; /* a live holder */
		if (fd < 0)
			return -1;
		slot_state st;
		state_read(fd, &st);
		int whole = file_exists(p->dir, i, "gw") &&
			    (st.kind == AL_NETSLOT_VM ||
			     file_exists(p->dir, i, "guest"));
		if (strcmp(st.word, "ready") == 0 && whole) {
			marker_set(p, st.kind, i, 1);
			marker_set(p,
				   st.kind == AL_NETSLOT_NS ? AL_NETSLOT_VM
							    : AL_NETSLOT_NS,
				   i, 0);
		} else {
			if (st.word[0] != '\0' ||
			    file_exists(p->dir, i, "gw") ||
			    file_exists(p->dir, i, "guest"))
				(*cleaned)++;
			slot_clear(p, i, fd);
		}
		close(fd);
	}
	/* Markers of slots that have no lock file at all. */
	char path[AL_PATH_MAX];
	snprintf(path, sizeof path, "%s/ready", p->dir);
	d = opendir(path);
	if (d != NULL) {
		while ((de = readdir(d)) != NULL) {
			uint32_t i;
			for (int k = 0; k < 2; k++)
				if (parse_marker(de->d_name, (al_netslot_kind)k,
						 p->slots, &i) == 0 &&
				    !file_exists(p->dir, i, "lock"))
					marker_set(p, (al_netslot_kind)k, i, 0);
		}
		closedir(d);
	}
	return 0;
}

void al_netpool_drain(al_netpool *p, al_netslot_kind kind)
{
	al_netlease l;
	while (al_netpool_take(p, kind, &l, NULL) == 0)
		al_netpool_release(p, &l);
}
