/* spool: see spool.h. */
#include "sandbox/spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/log.h"

/* A temporary file this old belongs to a shim that died mid-write: its
 * event never was durable (the shim's sandbox is reconciled instead). */
#define STALE_TMP_S 300
/* Up to year 3000 in unix ms: a time, not garbage. */
#define AT_MS_MAX ((int64_t)32503680000000)

static int events_dir(const al_config *cfg, char *out, size_t outlen,
		      al_err *err)
{
	if ((size_t)snprintf(out, outlen, "%s/events", cfg->run_dir) >= outlen)
		return al_err_set(err, AL_EINVAL, 0, "events path too long");
	if (mkdir(out, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", out);
	return 0;
}

/* The events a shim makes on its own; the others are fcgi's to record. */
static int spoolable(al_event ev)
{
	return ev == AL_EV_FAIL || ev == AL_EV_DELETE;
}

char *al_spool_pack(const al_spool_entry *e, al_err *err)
{
	json_object *o = json_object_new_object();
	char *out = NULL;
	if (o != NULL) {
		json_object_object_add(o, "id",
				       json_object_new_string(e->e.id));
		json_object_object_add(o, "seq",
				       json_object_new_int64((int64_t)e->seq));
		json_object_object_add(
			o, "event",
			json_object_new_string(al_event_name(e->e.ev)));
		json_object_object_add(o, "detail",
				       json_object_new_string(e->e.detail));
		json_object_object_add(o, "at_ms",
				       json_object_new_int64(e->e.at_ms));
		const char *t = json_object_to_json_string_ext(
			o, JSON_C_TO_STRING_PLAIN |
				   JSON_C_TO_STRING_NOSLASHESCAPE);
		out = t != NULL ? strdup(t) : NULL;
		json_object_put(o);
	}
	if (out == NULL)
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	return out;
}

/* "<id>.<seq>": seq decimal, no sign, no leading zero, fits 64 bits. */
static int parse_name(const char *name, char *id, size_t idlen, uint64_t *seq)
{
	const char *dot = strrchr(name, '.');
	if (dot == NULL || (size_t)(dot - name) >= idlen)
		return -1;
	memcpy(id, name, (size_t)(dot - name));
	id[dot - name] = '\0';
	const char *d = dot + 1;
	size_t n = strlen(d);
	if (!al_id_valid(id) || n == 0 || n > 19 || (d[0] == '0' && n > 1))
		return -1;
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		if (d[i] < '0' || d[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(d[i] - '0');
	}
	*seq = v;
	return 0;
}

int al_spool_parse(const char *name, const void *buf, size_t len,
		   al_spool_entry *out, al_err *err)
{
	static const char *const fields[] = {"id",     "seq",	"event",
					     "detail", "at_ms", NULL};
	char id[64];
	uint64_t seq = 0;
	memset(out, 0, sizeof *out);
	if (strlen(name) >= sizeof out->name ||
	    parse_name(name, id, sizeof id, &seq) < 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "spool file name is not <id>.<seq>");
	if (len > AL_SPOOL_FILE_MAX)
		return al_err_set(err, AL_EINVAL, 0, "spool file too big");
	al_err e = {0};
	/* Strict JSON, valid UTF-8, one object. An empty file is not an
	 * event (the parser would make it {}): caught by "id" below. */
	json_object *o = al_json_parse_object(buf, len, &e);
	if (o == NULL)
		goto bad;
	const char *fid = NULL, *ev = NULL, *detail = NULL;
	int64_t fseq = -1, at = 0;
	if (al_json_check_fields(o, fields, &e) < 0 ||
	    al_json_get_str(o, "id", 63, &fid, NULL, &e) != 1 ||
	    al_json_get_int(o, "seq", 0, INT64_MAX, &fseq, &e) != 1 ||
	    al_json_get_str(o, "event", 16, &ev, NULL, &e) != 1 ||
	    al_json_get_str(o, "detail", sizeof out->e.detail - 1, &detail,
			    NULL, &e) != 1 ||
	    al_json_get_int(o, "at_ms", 1, AT_MS_MAX, &at, &e) != 1) {
		if (e.code == AL_OK)
			al_err_set(&e, AL_EINVAL, 0,
				   "spool file lacks a field");
		json_object_put(o);
		goto bad;
	}
	int evn = -1;
	for (int i = 0; i < AL_EV_MAX; i++)
		if (strcmp(al_event_name((al_event)i), ev) == 0)
			evn = i;
	if (strcmp(fid, id) != 0 || (uint64_t)fseq != seq)
		al_err_set(&e, AL_EINVAL, 0,
			   "spool file content does not match its name");
	else if (evn < 0 || !spoolable((al_event)evn))
		al_err_set(&e, AL_EINVAL, 0, "not an event a shim spools");
	if (e.code == AL_OK) {
		snprintf(out->e.id, sizeof out->e.id, "%s", id);
		out->e.ev = (al_event)evn;
		snprintf(out->e.detail, sizeof out->e.detail, "%s", detail);
		out->e.at_ms = at;
		out->seq = seq;
		snprintf(out->name, sizeof out->name, "%s", name);
	}
	json_object_put(o);
	if (e.code == AL_OK)
		return 0;
bad:
	if (err != NULL)
		*err = e;
	memset(out, 0, sizeof *out);
	return -1;
}

/* src as valid UTF-8 (other bytes become '?') of fewer than outlen
 * bytes, never cut inside a character. */
static void utf8_copy(char *out, size_t outlen, const char *src)
{
	size_t o = 0;
	for (size_t i = 0; src[i] != '\0' && o + 1 < outlen;) {
		size_t n = 1;
		unsigned char c = (unsigned char)src[i];
		if (c >= 0xc0)
			n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
		if (n > 1 &&
		    (strnlen(src + i, n) < n || !al_utf8_valid(src + i, n)))
			n = 0; /* not a character: one byte becomes '?' */
		else if (n == 1 && (c >= 0x80 || c < 0x20))
			n = 0;
		if (n == 0) {
			out[o++] = '?';
			i++;
			continue;
		}
		if (o + n >= outlen)
			break;
		memcpy(out + o, src + i, n);
		o += n;
		i += n;
	}
	out[o] = '\0';
}

static uint64_t next_seq(void)
{
	static uint64_t last;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000 +
		       (uint64_t)ts.tv_nsec / 1000;
	last = now > last ? now : last + 1;
	return last;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* body as dir/<id>.<seq>: content, then name, then the name's
 * directory entry on disk. */
static int place(const char *dir, const al_spool_entry *e, const char *body,
		 al_err *err)
{
	char tmp[AL_PATH_MAX + 128], path[AL_PATH_MAX + 128];
	snprintf(tmp, sizeof tmp, "%s/.%s.%" PRIu64 ".tmp", dir, e->e.id,
		 e->seq);
	snprintf(path, sizeof path, "%s/%s.%" PRIu64, dir, e->e.id, e->seq);
	al_autofd int fd = open(tmp,
				O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
					O_NOFOLLOW,
				0600);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "create %s", tmp);
	if (write_all(fd, body, strlen(body)) < 0 || fsync(fd) < 0) {
		al_err_sys(err, AL_ESYS, errno, "write %s", tmp);
		unlink(tmp);
		return -1;
	}
	if (rename(tmp, path) < 0) {
		al_err_sys(err, AL_ESYS, errno, "rename %s", tmp);
		unlink(tmp);
		return -1;
	}
	al_autofd int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0)
		return al_err_sys(err, AL_ESYS, errno, "fsync %s", dir);
	return 0;
}

int al_spool_write(const al_config *cfg, const char *id, al_event ev,
		   const char *detail, al_err *err)
{
	if (!al_id_valid(id) || !spoolable(ev))
		return al_err_set(err, AL_EINVAL, 0, "not a spoolable event");
	char dir[AL_PATH_MAX + 16];
	if (events_dir(cfg, dir, sizeof dir, err) < 0)
		return -1;
	al_spool_entry e = {.seq = next_seq()};
	snprintf(e.e.id, sizeof e.e.id, "%s", id);
	e.e.ev = ev;
	utf8_copy(e.e.detail, sizeof e.e.detail, detail != NULL ? detail : "");
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	e.e.at_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	char *body = al_spool_pack(&e, err);
	if (body == NULL)
		return -1;
	int rc = place(dir, &e, body, err);
	free(body);
	return rc;
}

int al_spool_watch(const al_config *cfg, al_err *err)
{
	char dir[AL_PATH_MAX + 16];
	if (events_dir(cfg, dir, sizeof dir, err) < 0)
		return -1;
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "inotify_init1");
	/* Event files only ever appear by rename. */
	if (inotify_add_watch(fd, dir, IN_MOVED_TO) < 0) {
		al_err_sys(err, AL_ESYS, errno, "inotify_add_watch %s", dir);
		close(fd);
		return -1;
	}
	return fd;
}

void al_spool_watch_clear(int fd)
{
	char buf[4096];
	while (fd >= 0 && read(fd, buf, sizeof buf) > 0)
		;
}

static void quarantine(const char *dir, const char *name, const char *why)
{
	char bad[AL_PATH_MAX + 32], from[AL_PATH_MAX + 300],
		to[AL_PATH_MAX + 320];
	snprintf(bad, sizeof bad, "%s/bad", dir);
	if (mkdir(bad, 0700) < 0 && errno != EEXIST)
		return;
	snprintf(from, sizeof from, "%s/%s", dir, name);
	snprintf(to, sizeof to, "%s/%s", bad, name);
	al_warn("spool: %s/%s moved to bad/: %s", dir, name, why);
	if (rename(from, to) < 0)
		unlink(from);
}

/* The content of dir/name if it is a small regular file, else -1. */
static ssize_t read_small(int dfd, const char *name, char *buf, size_t max)
{
	al_autofd int fd = openat(dfd, name,
				  O_RDONLY | O_CLOEXEC | O_NOFOLLOW |
					  O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > (off_t)max)
		return -1;
	size_t n = 0;
	while (n < max) {
		ssize_t r = read(fd, buf + n, max - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	return (ssize_t)n;
}

static int entry_cmp(const void *a, const void *b)
{
	const al_spool_entry *x = a, *y = b;
	int c = strcmp(x->e.id, y->e.id);
	if (c != 0)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* A shim's temporary file, removed once it is old (see STALE_TMP_S). */
static void drop_stale_tmp(int dfd, const char *name)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    time(NULL) - st.st_mtime > STALE_TMP_S)
		unlinkat(dfd, name, 0);
}

int al_spool_read(const al_config *cfg, al_spool_entry *out, int max,
		  al_err *err)
{
	char dir[AL_PATH_MAX + 16];
	if (events_dir(cfg, dir, sizeof dir, err) < 0)
		return -1;
	DIR *d = opendir(dir);
	if (d == NULL)
		return al_err_sys(err, AL_ESYS, errno, "opendir %s", dir);
	int n = 0;
	struct dirent *de;
	/* Read every name, keep the max first in (id, seq) order: a later
	 * batch never holds an event older than one applied before it. */
	al_spool_entry *all = NULL;
	int cap = 0, count = 0;
	while ((de = readdir(d)) != NULL) {
		const char *name = de->d_name;
		if (name[0] == '.') {
			if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0)
				drop_stale_tmp(dirfd(d), name);
			continue;
		}
		if (strcmp(name, "bad") == 0)
			continue;
		char buf[AL_SPOOL_FILE_MAX + 1];
		ssize_t len = read_small(dirfd(d), name, buf, sizeof buf - 1);
		al_err e = {0};
		al_spool_entry ent;
		if (len < 0) {
			quarantine(dir, name, "not a small regular file");
			continue;
		}
		if (al_spool_parse(name, buf, (size_t)len, &ent, &e) < 0) {
			quarantine(dir, name, e.msg);
			continue;
		}
		if (count == cap) {
			int ncap = cap > 0 ? cap * 2 : 64;
			al_spool_entry *p = realloc(all,
						    (size_t)ncap * sizeof *p);
			if (p == NULL)
				break; /* the rest waits for the next pass */
			all = p;
			cap = ncap;
		}
		all[count++] = ent;
	}
	closedir(d);
	if (count > 0)
		qsort(all, (size_t)count, sizeof *all, entry_cmp);
	for (n = 0; n < count && n < max; n++)
		out[n] = all[n];
	free(all);
	return n;
}

void al_spool_ack(const al_config *cfg, const al_spool_entry *e)
{
	char path[AL_PATH_MAX + 128];
	if (strchr(e->name, '/') != NULL || e->name[0] == '.' ||
	    (size_t)snprintf(path, sizeof path, "%s/events/%s", cfg->run_dir,
			     e->name) >= sizeof path)
		return;
	if (unlink(path) < 0 && errno != ENOENT)
		al_warn("spool: unlink %s: %s", path, strerror(errno));
}

void al_spool_reject(const al_config *cfg, const al_spool_entry *e,
		     const char *why)
{
	char dir[AL_PATH_MAX];
	if (events_dir(cfg, dir, sizeof dir, NULL) == 0)
		quarantine(dir, e->name, why);
}

int al_spool_pending(const al_config *cfg, const char *id)
{
	char dir[AL_PATH_MAX + 16];
	if ((size_t)snprintf(dir, sizeof dir, "%s/events", cfg->run_dir) >=
	    sizeof dir)
		return 0;
	DIR *d = opendir(dir);
	if (d == NULL)
		return 0;
	size_t n = strlen(id);
	int found = 0;
	struct dirent *de;
	while (!found && (de = readdir(d)) != NULL)
		found = strncmp(de->d_name, id, n) == 0 && de->d_name[n] == '.';
	closedir(d);
	return found;
}
