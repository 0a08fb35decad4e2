/* egress: the record's JSON line and the gateway's batching writer (see
 * egress.h). */
#include "net/egress.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/config.h"
#include "base/json.h"
#include "base/log.h"
#include "base/ratebucket.h"

static const char *const proto_names[AL_EGRESS_PROTO_MAX + 1] = {
	[AL_EGRESS_DNS] = "dns",	 [AL_EGRESS_HTTP] = "http",
	[AL_EGRESS_HTTPS] = "https",	 [AL_EGRESS_TCP] = "tcp",
	[AL_EGRESS_PROTO_NONE] = "none",
};

const char *al_egress_proto_name(int protocol)
{
	return protocol >= 0 && protocol <= AL_EGRESS_PROTO_NONE
		       ? proto_names[protocol]
		       : "none";
}

int al_egress_proto_from_name(const char *name)
{
	for (int i = 0; name != NULL && i <= AL_EGRESS_PROTO_NONE; i++)
		if (strcmp(name, proto_names[i]) == 0)
			return i;
	return -1;
}

/* src (may be NULL) into dst[0..cap), printable ASCII only. */
static void copy_printable(char *dst, size_t cap, const char *src)
{
	size_t i = 0;
	for (; src != NULL && src[i] != '\0' && i + 1 < cap; i++)
		dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
	dst[i] = '\0';
}

void al_egress_rec_set(al_egress_rec *r, int64_t at_ms, const char *sandbox,
		       bool allow, const char *reason,
		       enum al_egress_proto protocol, const char *name,
		       unsigned port, const char *method, const char *path)
{
	memset(r, 0, sizeof *r);
	r->at_ms = at_ms;
	copy_printable(r->sandbox, sizeof r->sandbox, sandbox);
	r->allow = allow;
	copy_printable(r->reason, sizeof r->reason, reason);
	r->protocol = (unsigned)protocol < AL_EGRESS_PROTO_MAX
			      ? (int)protocol
			      : AL_EGRESS_PROTO_NONE;
	copy_printable(r->name, sizeof r->name, name);
	r->port = port <= 65535 ? port : 0;
	copy_printable(r->method, sizeof r->method, method);
	copy_printable(r->path, sizeof r->path, path);
}

static bool printable(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] >= 0x7f)
			return false;
	return true;
}

static bool rec_valid(const al_egress_rec *r)
{
	return r->at_ms >= 0 && r->at_ms <= AL_EGRESS_AT_MS_MAX &&
	       al_id_valid(r->sandbox) && r->port <= 65535 &&
	       r->protocol >= 0 && r->protocol <= AL_EGRESS_PROTO_NONE &&
	       printable(r->reason, strlen(r->reason)) &&
	       printable(r->name, strlen(r->name)) &&
	       printable(r->method, strlen(r->method)) &&
	       printable(r->path, strlen(r->path)) &&
	       (r->dropped == 0 || r->protocol == AL_EGRESS_PROTO_NONE);
}

int al_egress_pack(const al_egress_rec *r, char *out, size_t outlen,
		   al_err *err)
{
	if (!rec_valid(r))
		return al_err_set(err, AL_EINVAL, 0,
				  "egress record out of bounds");
	json_object *o = json_object_new_object();
	if (o == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	json_object_object_add(o, "at_ms", json_object_new_int64(r->at_ms));
	json_object_object_add(o, "sandbox",
			       json_object_new_string(r->sandbox));
	json_object_object_add(o, "allow", json_object_new_boolean(r->allow));
	json_object_object_add(o, "reason", json_object_new_string(r->reason));
	json_object_object_add(
		o, "protocol",
		json_object_new_string(al_egress_proto_name(r->protocol)));
	json_object_object_add(o, "name", json_object_new_string(r->name));
	json_object_object_add(o, "port", json_object_new_int((int)r->port));
	if (r->method[0] != '\0')
		json_object_object_add(o, "method",
				       json_object_new_string(r->method));
	if (r->path[0] != '\0')
		json_object_object_add(o, "path",
				       json_object_new_string(r->path));
	if (r->dropped > 0)
		json_object_object_add(
			o, "dropped",
			json_object_new_int64((int64_t)(r->dropped > INT64_MAX
								? INT64_MAX
								: r->dropped)));
	const char *t = json_object_to_json_string_ext(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	int n = t != NULL ? snprintf(out, outlen, "%s\n", t) : -1;
	json_object_put(o);
	if (n < 0 || (size_t)n >= outlen)
		return al_err_set(err, AL_ETOOBIG, 0,
				  "egress record longer than a line");
	return n;
}

/* Field key (required or not) of at most max bytes into out. */
static int str_into(json_object *o, const char *key, bool required, size_t max,
		    char *out, al_err *err)
{
	const char *v = NULL;
	size_t n = 0;
	int r = al_json_get_str(o, key, max, &v, &n, err);
	if (r < 0)
		return -1;
	if (r == 0 && required)
		return al_err_set(err, AL_EINVAL, 0, "%s is required", key);
	if (r == 1 && (memchr(v, '\0', n) != NULL || !printable(v, n)))
		return al_err_set(err, AL_EINVAL, 0,
				  "%s must be printable ASCII", key);
	if (r == 1)
		memcpy(out, v, n + 1);
	return 0;
}

int al_egress_unpack(const void *line, size_t len, al_egress_rec *out,
		     al_err *err)
{
	static const char *const fields[] = {"at_ms",	"sandbox",  "allow",
					     "reason",	"protocol", "name",
					     "port",	"method",   "path",
					     "dropped", NULL};
	memset(out, 0, sizeof *out);
	if (len > AL_EGRESS_LINE_MAX)
		return al_err_set(err, AL_EINVAL, 0,
				  "egress line longer than %d bytes",
				  AL_EGRESS_LINE_MAX);
	json_object *o = al_json_parse_object(line, len, err);
	if (o == NULL)
		return -1;
	char proto[8] = "";
	int64_t at = 0, port = 0, dropped = 0;
	int allow = 0;
	int r = -1;
	if (al_json_check_fields(o, fields, err) < 0 ||
	    al_json_get_int(o, "at_ms", 0, AL_EGRESS_AT_MS_MAX, &at, err) !=
		    1 ||
	    str_into(o, "sandbox", true, sizeof out->sandbox - 1, out->sandbox,
		     err) < 0 ||
	    al_json_get_bool(o, "allow", &allow, err) != 1 ||
	    str_into(o, "reason", true, sizeof out->reason - 1, out->reason,
		     err) < 0 ||
	    str_into(o, "protocol", true, sizeof proto - 1, proto, err) < 0 ||
	    str_into(o, "name", true, AL_EGRESS_NAME_MAX, out->name, err) < 0 ||
	    al_json_get_int(o, "port", 0, 65535, &port, err) != 1 ||
	    str_into(o, "method", false, AL_EGRESS_METHOD_MAX, out->method,
		     err) < 0 ||
	    str_into(o, "path", false, AL_EGRESS_PATH_MAX, out->path, err) <
		    0 ||
	    al_json_get_int(o, "dropped", 0, INT64_MAX, &dropped, err) < 0)
		goto out;
	out->at_ms = at;
	out->allow = allow != 0;
	out->port = (unsigned)port;
	out->dropped = (uint64_t)dropped;
	out->protocol = al_egress_proto_from_name(proto);
	if (!rec_valid(out) ||
	    (out->dropped > 0) != (out->protocol == AL_EGRESS_PROTO_NONE)) {
		al_err_set(err, AL_EINVAL, 0,
			   "egress record has a bad sandbox, protocol or"
			   " dropped count");
		goto out;
	}
	r = 0;
out:
	if (r < 0 && err != NULL && err->code == AL_OK)
		al_err_set(err, AL_EINVAL, 0, "egress record is incomplete");
	json_object_put(o);
	if (r < 0)
		memset(out, 0, sizeof *out);
	return r;
}

/* ---- writer ---- */

struct al_egress_writer {
	int dirfd;
	char sandbox[64];
	al_egress_writer_limits lim;
	uint64_t next_seq;
	/* seqs of the files written and not yet seen consumed, oldest
	 * first (a ring of lim.files) */
	uint64_t *pending;
	unsigned n_pending, head;
	al_egress_rec *buf;
	unsigned n_buf;
	/* monotonic ms of the oldest buffered record, or of the first
	 * count since the last file when nothing is buffered */
	int64_t first_at;
	uint64_t dropped; /* since open */
	uint64_t dropped_unlogged;
	al_ratebucket bucket; /* lim.rate, lim.burst */
	uint64_t suppressed;  /* since open */
	uint64_t suppressed_unlogged;
};

static const al_egress_writer_limits default_limits = {
	.batch = AL_EGRESS_BATCH_MAX,
	.flush_ms = AL_EGRESS_FLUSH_MS,
	.files = AL_EGRESS_FILES_MAX,
	.rate = AL_EGRESS_LOG_RATE_DEFAULT,
	.burst = AL_EGRESS_LOG_BURST_DEFAULT,
};

static int egress_dir(const char *run_dir, const char *sandbox, char *out,
		      size_t outlen, al_err *err)
{
	if (!al_id_valid(sandbox))
		return al_err_set(err, AL_EINVAL, 0, "invalid sandbox id");
	int n = snprintf(out, outlen, "%s/egress/%s", run_dir, sandbox);
	if (n < 0 || (size_t)n >= outlen)
		return al_err_set(err, AL_EINVAL, 0, "run dir path too long");
	return 0;
}

static int mkdir_parent(const char *run_dir, al_err *err)
{
	char p[AL_PATH_MAX + 16];
	snprintf(p, sizeof p, "%s/egress", run_dir);
	/* Root's; every sandbox's own directory below it. */
	if (mkdir(p, 0711) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", p);
	return 0;
}

int al_egress_dir_prepare(const char *run_dir, const char *sandbox, uid_t uid,
			  gid_t gid, al_err *err)
{
	char p[AL_PATH_MAX + 96];
	if (egress_dir(run_dir, sandbox, p, sizeof p, err) < 0 ||
	    mkdir_parent(run_dir, err) < 0)
		return -1;
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", p);
	int fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", p);
	int r = 0;
	if (fchown(fd, uid, gid) < 0 || fchmod(fd, 0700) < 0)
		r = al_err_sys(err, AL_ESYS, errno, "chown %s", p);
	close(fd);
	return r;
}

#define SEQ_DIGITS 20

static void seq_name(char *out, size_t outlen, uint64_t seq, bool tmp)
{
	snprintf(out, outlen, tmp ? ".%020" PRIu64 ".tmp" : "%020" PRIu64, seq);
}

/* A batch file's name back to its seq: exactly SEQ_DIGITS digits, at
 * most INT64_MAX (PostgreSQL's bigint); -1 otherwise. */
static int seq_parse(const char *name, uint64_t *seq)
{
	uint64_t v = 0;
	size_t i = 0;
	for (; name[i] >= '0' && name[i] <= '9'; i++) {
		unsigned d = (unsigned)(name[i] - '0');
		if (v > ((uint64_t)INT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (i != SEQ_DIGITS || name[i] != '\0')
		return -1;
	*seq = v;
	return 0;
}

/* The first seq of a new writer: now in µs, or past every file still
 * in the directory (a clock that went back must not reuse a name the
 * controller may have recorded already). */
static uint64_t first_seq(int dirfd)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t next = (uint64_t)ts.tv_sec * 1000000u +
			(uint64_t)ts.tv_nsec / 1000u;
	int fd = dup(dirfd);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (dir == NULL) {
		if (fd >= 0)
			close(fd);
		return next;
	}
	struct dirent *de;
	while ((de = readdir(dir)) != NULL) {
		uint64_t seq;
		if (seq_parse(de->d_name, &seq) == 0 && seq >= next)
			next = seq + 1;
	}
	closedir(dir);
	return next;
}

al_egress_writer *al_egress_writer_open(const char *run_dir,
					const char *sandbox,
					const al_egress_writer_limits *limits,
					al_err *err)
{
	char p[AL_PATH_MAX + 96];
	if (egress_dir(run_dir, sandbox, p, sizeof p, err) < 0)
		return NULL;
	const al_egress_writer_limits *l = limits ? limits : &default_limits;
	if (l->batch == 0 || l->batch > AL_EGRESS_BATCH_MAX || l->files == 0 ||
	    l->flush_ms == 0 || (l->rate > 0 && l->burst == 0)) {
		al_err_set(err, AL_EINVAL, 0, "egress writer limits");
		return NULL;
	}
	/* The launcher prepared it; a gateway run alone makes its own. */
	(void)mkdir_parent(run_dir, NULL);
	if (mkdir(p, 0700) < 0 && errno != EEXIST) {
		al_err_sys(err, AL_ESYS, errno, "mkdir %s", p);
		return NULL;
	}
	al_egress_writer *w = calloc(1, sizeof *w);
	if (w != NULL) {
		w->pending = calloc(l->files, sizeof *w->pending);
		w->buf = calloc(l->batch, sizeof *w->buf);
	}
	if (w == NULL || w->pending == NULL || w->buf == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		goto fail;
	}
	w->dirfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (w->dirfd < 0) {
		al_err_sys(err, AL_ESYS, errno, "open %s", p);
		goto fail;
	}
	snprintf(w->sandbox, sizeof w->sandbox, "%s", sandbox);
	w->lim = *l;
	w->next_seq = first_seq(w->dirfd);
	return w;
fail:
	if (w != NULL) {
		free(w->pending);
		free(w->buf);
		free(w);
	}
	return NULL;
}

/* Forget the files the controller has consumed (unlinked); how many are
 * still there. */
static unsigned pending_files(al_egress_writer *w)
{
	unsigned kept = 0;
	for (unsigned i = 0; i < w->n_pending; i++) {
		uint64_t s = w->pending[(w->head + i) % w->lim.files];
		char name[32];
		seq_name(name, sizeof name, s, false);
		struct stat st;
		if (fstatat(w->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
		    errno != ENOENT)
			w->pending[(w->head + kept++) % w->lim.files] = s;
	}
	w->n_pending = kept;
	return kept;
}

/* Nothing buffered and nothing counted: no file is due. */
static bool writer_idle(const al_egress_writer *w)
{
	return w->n_buf == 0 && w->dropped_unlogged == 0 &&
	       w->suppressed_unlogged == 0;
}

/* A count record (n > 0) of reason onto text[*len..cap). */
static void pack_count(const al_egress_writer *w, int64_t now_unix_ms,
		       const char *reason, uint64_t n, char *text, size_t *len,
		       size_t cap)
{
	if (n == 0)
		return;
	al_egress_rec d;
	al_egress_rec_set(&d, now_unix_ms, w->sandbox, false, reason,
			  AL_EGRESS_PROTO_MAX, "", 0, NULL, NULL);
	d.dropped = n;
	int k = al_egress_pack(&d, text + *len, cap - *len, NULL);
	if (k > 0)
		*len += (size_t)k;
}

/* The buffered records (and the counts) as one file. */
static int write_batch(al_egress_writer *w, int64_t now_unix_ms, al_err *err)
{
	size_t cap = (size_t)(w->n_buf + 2) * AL_EGRESS_LINE_MAX;
	char *text = malloc(cap);
	if (text == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	size_t len = 0;
	for (unsigned i = 0; i < w->n_buf; i++) {
		int n = al_egress_pack(&w->buf[i], text + len, cap - len, NULL);
		if (n > 0)
			len += (size_t)n;
	}
	pack_count(w, now_unix_ms, AL_EGRESS_REASON_DROPPED,
		   w->dropped_unlogged, text, &len, cap);
	pack_count(w, now_unix_ms, AL_EGRESS_REASON_RATE,
		   w->suppressed_unlogged, text, &len, cap);
	char tmp[40], name[32];
	uint64_t seq = w->next_seq;
	seq_name(tmp, sizeof tmp, seq, true);
	seq_name(name, sizeof name, seq, false);
	int fd = openat(w->dirfd, tmp,
			O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
			0600);
	int r = 0;
	/* A regular file takes the whole write or fails (ENOSPC). */
	if (fd < 0 || write(fd, text, len) != (ssize_t)len)
		r = al_err_sys(err, AL_ESYS, errno, "writing egress batch");
	if (fd >= 0)
		close(fd);
	/* No fsync: a record lost in a host crash costs less than an fsync
	 * per batch on the gateway's loop. */
	if (r == 0 && renameat(w->dirfd, tmp, w->dirfd, name) < 0)
		r = al_err_sys(err, AL_ESYS, errno, "renaming egress batch");
	free(text);
	if (r < 0) {
		unlinkat(w->dirfd, tmp, 0);
		return -1;
	}
	w->next_seq++;
	w->pending[(w->head + w->n_pending) % w->lim.files] = seq;
	w->n_pending++;
	w->n_buf = 0;
	w->dropped_unlogged = 0;
	w->suppressed_unlogged = 0;
	return 0;
}

static int64_t unix_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int al_egress_writer_flush(al_egress_writer *w, int64_t now_ms, bool force,
			   al_err *err)
{
	if (writer_idle(w))
		return 0;
	if (!force && w->n_buf < w->lim.batch && now_ms >= 0 &&
	    now_ms - w->first_at < (int64_t)w->lim.flush_ms)
		return 0;
	/* At the cap nothing is written: the buffer's records drop and are
	 * counted, to be reported by the first file that finds room. */
	if (w->n_pending >= w->lim.files && pending_files(w) >= w->lim.files) {
		w->dropped += w->n_buf;
		w->dropped_unlogged += w->n_buf;
		w->n_buf = 0;
		w->first_at = now_ms;
		return 0;
	}
	if (write_batch(w, unix_ms(), err) < 0) {
		w->dropped += w->n_buf;
		w->dropped_unlogged += w->n_buf;
		w->n_buf = 0;
		return -1;
	}
	return 1;
}

void al_egress_writer_add(al_egress_writer *w, const al_egress_rec *r,
			  int64_t now_ms)
{
	if (w->lim.rate > 0 && !al_ratebucket_take(&w->bucket, w->lim.burst,
						   w->lim.rate, now_ms, NULL)) {
		/* The count is due a flush interval after it began. */
		if (writer_idle(w))
			w->first_at = now_ms;
		w->suppressed++;
		w->suppressed_unlogged++;
		return;
	}
	if (w->n_buf >= w->lim.batch)
		(void)al_egress_writer_flush(w, now_ms, true, NULL);
	if (w->n_buf >= w->lim.batch) {
		w->dropped++;
		w->dropped_unlogged++;
		return;
	}
	if (writer_idle(w))
		w->first_at = now_ms;
	al_egress_rec *b = &w->buf[w->n_buf];
	*b = *r;
	snprintf(b->sandbox, sizeof b->sandbox, "%s", w->sandbox);
	if (!rec_valid(b)) {
		w->dropped++;
		w->dropped_unlogged++;
		return;
	}
	w->n_buf++;
	if (w->n_buf >= w->lim.batch)
		(void)al_egress_writer_flush(w, now_ms, true, NULL);
}

int64_t al_egress_writer_due(const al_egress_writer *w)
{
	if (writer_idle(w))
		return -1;
	return w->first_at + (int64_t)w->lim.flush_ms;
}

uint64_t al_egress_writer_dropped(const al_egress_writer *w)
{
	return w->dropped;
}

uint64_t al_egress_writer_suppressed(const al_egress_writer *w)
{
	return w->suppressed;
}

void al_egress_writer_close(al_egress_writer *w)
{
	if (w == NULL)
		return;
	(void)al_egress_writer_flush(w, -1, true, NULL);
	close(w->dirfd);
	free(w->pending);
	free(w->buf);
	free(w);
}

/* ---- reader ---- */

/* A temporary file older than this belongs to a writer that died. */
#define STALE_TMP_S 60

void al_egress_batch_reset(al_egress_batch *b)
{
	b->n = b->n_files = b->n_empty = 0;
}

void al_egress_batch_free(al_egress_batch *b)
{
	free(b->recs);
	free(b->files);
	free(b->file_end);
	free(b->empty);
	memset(b, 0, sizeof *b);
}

/* Room for one more of an array of elem-sized items. */
static int grow(void **p, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 64;
	void *q = realloc(*p, c * elem);
	if (q == NULL)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

static void to_bad(int edir, const char *sandbox, const char *name,
		   const char *why)
{
	char bad[160];
	snprintf(bad, sizeof bad, "bad/%.63s.%.32s", sandbox, name);
	char from[160];
	snprintf(from, sizeof from, "%.63s/%.32s", sandbox, name);
	al_warn("egress: %s: %s (moved to bad/)", from, why);
	if (renameat(edir, from, edir, bad) < 0)
		unlinkat(edir, from, 0);
}

/* Parse file name of sandbox dir d (owned by owner) into b. 1 = taken,
 * 0 = set aside (bad or stale), -1 = out of memory. */
static int read_file(int edir, int d, uid_t owner, const char *sandbox,
		     const char *name, al_egress_batch *b)
{
	uint64_t seq;
	if (seq_parse(name, &seq) < 0) {
		to_bad(edir, sandbox, name, "not a batch name");
		return 0;
	}
	int fd = openat(d, name,
			O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_nlink != 1 || st.st_uid != owner) {
		if (fd >= 0)
			close(fd);
		to_bad(edir, sandbox, name,
		       "not a regular file of the gateway's own");
		return 0;
	}
	if (st.st_size > AL_EGRESS_FILE_MAX) {
		close(fd);
		to_bad(edir, sandbox, name, "too big");
		return 0;
	}
	char *text = malloc((size_t)st.st_size + 1);
	ssize_t got = text != NULL ? read(fd, text, (size_t)st.st_size) : -1;
	close(fd);
	if (got != st.st_size) {
		free(text);
		if (text == NULL)
			return -1;
		to_bad(edir, sandbox, name, "short read");
		return 0;
	}
	size_t first = b->n;
	const char *why = NULL;
	for (size_t off = 0; off < (size_t)got && why == NULL;) {
		const char *nl = memchr(text + off, '\n', (size_t)got - off);
		size_t len = nl != NULL ? (size_t)(nl - text) - off
					: (size_t)got - off;
		if (grow((void **)&b->recs, &b->cap, b->n, sizeof *b->recs) <
		    0) {
			free(text);
			b->n = first;
			return -1;
		}
		al_err e = {0};
		if (al_egress_unpack(text + off, len, &b->recs[b->n], &e) < 0)
			why = "a line is not an egress record";
		else if (strcmp(b->recs[b->n].sandbox, sandbox) != 0)
			why = "a record names another sandbox";
		else {
			b->recs[b->n].seq = seq;
			b->recs[b->n].idx = (unsigned)(b->n - first);
			b->n++;
		}
		off += len + 1;
	}
	free(text);
	if (why != NULL) {
		b->n = first;
		to_bad(edir, sandbox, name, why);
		return 0;
	}
	if (grow((void **)&b->files, &b->cap_files, b->n_files,
		 sizeof *b->files) < 0 ||
	    grow((void **)&b->file_end, &b->cap_ends, b->n_files,
		 sizeof *b->file_end) < 0) {
		b->n = first;
		return -1;
	}
	b->file_end[b->n_files] = b->n;
	snprintf(b->files[b->n_files++], sizeof b->files[0], "%.63s/%.32s",
		 sandbox, name);
	return 1;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files of one sandbox's directory, oldest first, into b. */
static int read_dir(int edir, const char *sandbox, size_t max,
		    al_egress_batch *b)
{
	int d = openat(edir, sandbox,
		       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (d < 0 || fstat(d, &st) < 0) {
		if (d >= 0)
			close(d);
		return 0;
	}
	DIR *dir = fdopendir(d);
	if (dir == NULL) {
		close(d);
		return 0;
	}
	char **names = NULL;
	size_t n = 0, cap = 0, seen = 0;
	struct dirent *de;
	time_t now = time(NULL);
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		seen++;
		if (de->d_name[0] == '.') {
			struct stat t;
			if (fstatat(d, de->d_name, &t, AT_SYMLINK_NOFOLLOW) ==
				    0 &&
			    now - t.st_mtime > STALE_TMP_S)
				unlinkat(d, de->d_name, 0);
			continue;
		}
		if (strlen(de->d_name) > 32) {
			/* No writer makes such a name. */
			al_warn("egress: %s/%.40s...: not a batch name"
				" (removed)",
				sandbox, de->d_name);
			unlinkat(d, de->d_name, 0);
			continue;
		}
		if (grow((void **)&names, &cap, n, sizeof *names) < 0)
			continue;
		names[n] = strdup(de->d_name);
		if (names[n] != NULL)
			n++;
	}
	if (n > 1)
		qsort(names, n, sizeof *names, name_cmp);
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		if (rc >= 0 && b->n < max &&
		    read_file(edir, d, st.st_uid, sandbox, names[i], b) < 0)
			rc = -1;
		free(names[i]);
	}
	free(names);
	if (seen == 0 && grow((void **)&b->empty, &b->cap_empty, b->n_empty,
			      sizeof *b->empty) == 0)
		snprintf(b->empty[b->n_empty++], sizeof b->empty[0], "%.63s",
			 sandbox);
	closedir(dir);
	return rc;
}

int al_egress_read(const char *run_dir, size_t max_records, al_egress_batch *b,
		   al_err *err)
{
	al_egress_batch_reset(b);
	char p[AL_PATH_MAX + 16];
	snprintf(p, sizeof p, "%s/egress", run_dir);
	if (mkdir_parent(run_dir, err) < 0)
		return -1;
	int edir = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (edir < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", p);
	mkdirat(edir, "bad", 0700);
	int fd2 = dup(edir);
	DIR *dir = fd2 >= 0 ? fdopendir(fd2) : NULL;
	if (dir == NULL) {
		if (fd2 >= 0)
			close(fd2);
		close(edir);
		return al_err_sys(err, AL_ESYS, errno, "reading %s", p);
	}
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && b->n < max_records && (de = readdir(dir)) != NULL) {
		if (de->d_name[0] == '.' || strcmp(de->d_name, "bad") == 0 ||
		    !al_id_valid(de->d_name))
			continue;
		if (read_dir(edir, de->d_name, max_records, b) < 0)
			rc = al_err_set(err, AL_ENOMEM, ENOMEM,
					"out of memory reading egress files");
	}
	closedir(dir);
	close(edir);
	return rc < 0 ? -1 : (int)b->n_files;
}

void al_egress_ack_file(const char *run_dir, const al_egress_batch *b, size_t i)
{
	char p[AL_PATH_MAX + 160];
	snprintf(p, sizeof p, "%s/egress/%s", run_dir, b->files[i]);
	if (unlink(p) < 0 && errno != ENOENT)
		al_warn("egress: unlink %s: %s", p, strerror(errno));
}

void al_egress_ack(const char *run_dir, const al_egress_batch *b)
{
	for (size_t i = 0; i < b->n_files; i++)
		al_egress_ack_file(run_dir, b, i);
}

void al_egress_batch_file(const al_egress_batch *b, size_t i, size_t *first,
			  size_t *n)
{
	*first = i > 0 ? b->file_end[i - 1] : 0;
	*n = b->file_end[i] - *first;
}

void al_egress_reject_file(const char *run_dir, const al_egress_batch *b,
			   size_t i, const char *why)
{
	char p[AL_PATH_MAX + 16];
	snprintf(p, sizeof p, "%s/egress", run_dir);
	int edir = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (edir < 0)
		return;
	/* files[i] is "<sandbox>/<seq>". */
	char sandbox[64] = "";
	const char *slash = strchr(b->files[i], '/');
	size_t n = slash != NULL ? (size_t)(slash - b->files[i]) : 0;
	if (n > 0 && n < sizeof sandbox) {
		memcpy(sandbox, b->files[i], n);
		sandbox[n] = '\0';
		to_bad(edir, sandbox, slash + 1, why);
	}
	close(edir);
}

int al_egress_pending(const char *run_dir, const char *sandbox)
{
	char p[AL_PATH_MAX + 96];
	if (egress_dir(run_dir, sandbox, p, sizeof p, NULL) < 0)
		return 0;
	DIR *d = opendir(p);
	if (d == NULL)
		return 0;
	int n = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

int al_egress_dir_remove(const char *run_dir, const char *sandbox)
{
	char p[AL_PATH_MAX + 96];
	if (egress_dir(run_dir, sandbox, p, sizeof p, NULL) < 0)
		return -1;
	return rmdir(p);
}
