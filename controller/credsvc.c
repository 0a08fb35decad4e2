/* The credential service: one thread, one poll loop over the listener
 * and the connections. See credsvc.h. */
#include "credsvc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "base/config.h"
#include "base/log.h"
#include "base/ratebucket.h"
#include "proto/agentproto.h"

#define LOG_EVERY_MS 60000

typedef enum conn_kind { C_NEW, C_CHAN, C_REFRESH } conn_kind;

/* What a channel's TAKEs may draw on: the rated credentials of the set
 * it was sent last (no values kept). */
typedef struct rated {
	char id[AL_CRED_ID_LEN + 1];
	uint32_t requests, per_seconds;
} rated;

typedef struct conn {
	int fd;
	conn_kind kind;
	uid_t uid;
	uint64_t serial;
	int dead;	  /* to be closed at the loop's next turn */
	int64_t deadline; /* C_NEW: its first frame */
	al_frame_reader rd;
	al_buf out;
	al_ratebucket frames;
	/* C_CHAN */
	char sandbox[64];
	al_credsvc_sandbox sb;
	rated *rated;
	size_t n_rated;
	uint64_t pushed, acked; /* versions */
	/* C_REFRESH: the refresh it waits for (index + 1; 0 none) */
	size_t refresh;
} conn;

typedef struct wait_ack {
	uint64_t serial, version;
	int done; /* acked, or the channel went */
} wait_ack;

typedef struct refresh {
	int used;
	uint64_t client; /* serial of the C_REFRESH connection */
	int64_t deadline;
	uint32_t pushed, acked;
	wait_ack *wait;
	size_t n;
} refresh;

typedef struct bucket {
	char id[AL_CRED_ID_LEN + 1];
	uint32_t requests, per_seconds;
	al_ratebucket rb;
	int64_t used_ms;
} bucket;

struct al_credsvc {
	pthread_t thread;
	int lfd, wake[2];
	al_credsvc_store store;
	conn *conns[AL_CREDSVC_CONNS];
	size_t nconns, n_new;
	uint64_t next_serial, version;
	refresh refreshes[AL_CREDSVC_REFRESH_MAX];
	bucket *buckets; /* AL_CREDSVC_BUCKETS */
	size_t n_buckets;
	al_credsvc_row *rows; /* the audit queue */
	size_t n_rows, cap_rows;
	unsigned long dropped, dropped_total;
	int64_t first_row_ms, audit_warned_ms;
	unsigned long hellos, refused, sets, grants, denials;
	struct pollfd *pfd;
	char path[AL_PATH_MAX + 32];
};

static int64_t unix_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- output ---- */

/* Queued bytes may hold values: wipe the whole buffer once it is
 * drained, and before it goes. */
static void out_wipe(al_buf *b)
{
	if (b->data != NULL && al_buf_pending(b) == 0)
		OPENSSL_cleanse(b->data, b->cap);
}

static int flush(conn *c)
{
	al_err err;
	int r = al_buf_flush(&c->out, c->fd, &err);
	out_wipe(&c->out);
	return r < 0 ? -1 : 0;
}

/* Queue one frame and write what the socket takes; -1 when the peer
 * must go (gone, or too far behind). */
static int send_frame(conn *c, uint16_t type, uint32_t id, char *payload,
		      bool secret)
{
	al_err err;
	int r = payload == NULL ? -1
				: al_frame_encode(&c->out, type, id, payload,
						  strlen(payload), &err);
	if (payload != NULL && secret)
		OPENSSL_cleanse(payload, strlen(payload));
	free(payload);
	return r < 0 ? -1 : flush(c);
}

static int send_error(conn *c, al_code code, const char *msg)
{
	return send_frame(c, AL_F_ERROR, 0, al_error_pack(code, msg, NULL),
			  false);
}

/* ---- connections ---- */

static conn *by_serial(al_credsvc *s, uint64_t serial)
{
	for (size_t i = 0; i < s->nconns; i++)
		if (s->conns[i]->serial == serial)
			return s->conns[i];
	return NULL;
}

static void conn_close(al_credsvc *s, size_t i)
{
	conn *c = s->conns[i];
	if (c->kind == C_NEW)
		s->n_new--;
	if (c->kind == C_REFRESH && c->refresh > 0) {
		refresh *r = &s->refreshes[c->refresh - 1];
		free(r->wait);
		memset(r, 0, sizeof *r);
	}
	close(c->fd);
	al_frame_reader_free(&c->rd);
	if (c->out.data != NULL)
		OPENSSL_cleanse(c->out.data, c->out.cap);
	al_buf_free(&c->out);
	free(c->rated);
	free(c);
	s->conns[i] = s->conns[--s->nconns];
}

static size_t index_of(al_credsvc *s, const conn *c)
{
	for (size_t i = 0; i < s->nconns; i++)
		if (s->conns[i] == c)
			return i;
	return s->nconns;
}

static void accept_one(al_credsvc *s)
{
	int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	struct ucred cr;
	socklen_t len = sizeof cr;
	conn *c = NULL;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 ||
	    s->nconns >= AL_CREDSVC_CONNS || s->n_new >= AL_CREDSVC_NEW_MAX ||
	    (c = calloc(1, sizeof *c)) == NULL) {
		close(fd);
		s->refused++;
		return;
	}
	c->fd = fd;
	c->uid = cr.uid;
	c->kind = C_NEW;
	c->serial = ++s->next_serial;
	c->deadline = al_now_ms() + AL_CREDSVC_HELLO_MS;
	al_frame_reader_init(&c->rd);
	c->rd.in.max = AL_CREDSVC_IN_MAX;
	al_buf_init(&c->out, AL_CREDSVC_OUT_MAX);
	s->conns[s->nconns++] = c;
	s->n_new++;
}

/* ---- sets ---- */

static uint64_t next_version(al_credsvc *s)
{
	/* Above any version of an earlier run: unix ms at the least. */
	uint64_t now = (uint64_t)unix_ms();
	s->version = s->version + 1 > now ? s->version + 1 : now;
	return s->version;
}

/* Compute c's set and send it; -1 when it could not (err filled). */
static int push_set(al_credsvc *s, conn *c, al_err *err)
{
	al_cred_set set = {0};
	al_credsvc_sandbox sb = {0};
	if (s->store.effective(s->store.arg, c->sandbox, &sb, &set, err) < 0)
		return -1;
	/* What the store holds but the wire refuses (it would fail the
	 * whole set at the gateway) is left out, said once per push; moved
	 * past n, and n put back before the set is freed (wiped). */
	size_t all = set.n;
	for (size_t i = 0; i < set.n;) {
		const char *bad = al_cred_invalid(&set.creds[i]);
		if (bad == NULL) {
			i++;
			continue;
		}
		al_warn("credentials: sandbox %s: %s left out (invalid %s)",
			c->sandbox, set.creds[i].name, bad);
		al_cred tmp = set.creds[i];
		set.creds[i] = set.creds[--set.n];
		set.creds[set.n] = tmp;
	}
	set.version = next_version(s);
	rated *r = calloc(set.n > 0 ? set.n : 1, sizeof *r);
	char *text = r != NULL ? al_cred_set_pack(&set, err) : NULL;
	if (text == NULL) {
		if (r == NULL)
			al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		free(r);
		set.n = all;
		al_cred_set_free(&set);
		return -1;
	}
	size_t n = 0;
	for (size_t i = 0; i < set.n; i++) {
		const al_cred *k = &set.creds[i];
		if (k->rate_requests == 0)
			continue;
		snprintf(r[n].id, sizeof r[n].id, "%s", k->id);
		r[n].requests = k->rate_requests;
		r[n].per_seconds = k->rate_per_seconds;
		n++;
	}
	uint64_t version = set.version;
	set.n = all;
	al_cred_set_free(&set);
	free(c->rated);
	c->rated = r;
	c->n_rated = n;
	c->sb = sb;
	c->pushed = version;
	s->sets++;
	if (send_frame(c, AL_F_CRED_SET, 0, text, true) < 0)
		return al_err_set(err, AL_EUNAVAIL, 0, "channel closed");
	return 0;
}

/* ---- refreshes ---- */

static void refresh_answer(al_credsvc *s, refresh *r)
{
	conn *client = by_serial(s, r->client);
	if (client != NULL) {
		al_cred_refresh_done d = {.pushed = r->pushed,
					  .acked = r->acked};
		client->refresh = 0;
		/* Closed by the loop once the answer is out. */
		if (send_frame(client, AL_F_CRED_REFRESH_DONE, AL_REQ_ID_CLIENT,
			       al_cred_refresh_done_pack(&d, NULL), false) < 0)
			client->dead = 1;
	}
	free(r->wait);
	memset(r, 0, sizeof *r);
}

/* Settle what is known (acks, channels gone, the deadline) and answer
 * the refreshes that are complete. */
static void refresh_check(al_credsvc *s, int64_t now)
{
	for (size_t k = 0; k < AL_CREDSVC_REFRESH_MAX; k++) {
		refresh *r = &s->refreshes[k];
		if (!r->used)
			continue;
		size_t open = 0;
		for (size_t i = 0; i < r->n; i++) {
			wait_ack *w = &r->wait[i];
			if (w->done)
				continue;
			conn *c = by_serial(s, w->serial);
			if (c != NULL && c->acked >= w->version) {
				w->done = 1;
				r->acked++;
			} else if (c == NULL) {
				w->done = 1;
			} else {
				open++;
			}
		}
		if (open == 0 || now >= r->deadline)
			refresh_answer(s, r);
	}
}

static void on_refresh(al_credsvc *s, conn *c, const al_frame *f)
{
	char project[64];
	al_err err;
	if (c->uid != 0 && c->uid != geteuid()) {
		s->refused++;
		send_error(c, AL_EPERM, "refresh: not allowed for this peer");
		c->dead = 1;
		return;
	}
	if (al_cred_refresh_unpack(f->payload, f->len, project, &err) < 0) {
		send_error(c, err.code, err.msg);
		c->dead = 1;
		return;
	}
	refresh *r = NULL;
	for (size_t k = 0; k < AL_CREDSVC_REFRESH_MAX && r == NULL; k++)
		if (!s->refreshes[k].used)
			r = &s->refreshes[k];
	wait_ack *wait = calloc(s->nconns + 1, sizeof *wait);
	if (r == NULL || wait == NULL) {
		free(wait);
		send_error(c, AL_EUNAVAIL, "refresh: too many at once");
		c->dead = 1;
		return;
	}
	*r = (refresh){.used = 1,
		       .client = c->serial,
		       .deadline = al_now_ms() + AL_CREDSVC_REFRESH_WAIT_MS,
		       .wait = wait};
	c->kind = C_REFRESH;
	s->n_new--;
	c->refresh = (size_t)(r - s->refreshes) + 1;
	for (size_t i = 0; i < s->nconns;) {
		conn *ch = s->conns[i];
		if (ch->kind != C_CHAN ||
		    (project[0] != '\0' &&
		     strcmp(ch->sb.project, project) != 0)) {
			i++;
			continue;
		}
		if (push_set(s, ch, &err) < 0) {
			al_warn("credentials: sandbox %s: %s", ch->sandbox,
				err.msg);
			if (err.code == AL_EUNAVAIL || err.code == AL_ENOENT) {
				conn_close(s, i); /* its gateway asks again */
				continue;
			}
		} else {
			r->wait[r->n++] = (wait_ack){.serial = ch->serial,
						     .version = ch->pushed};
			r->pushed++;
		}
		i++;
	}
	refresh_check(s, al_now_ms());
}

/* ---- channels ---- */

static void on_hello(al_credsvc *s, conn *c, const al_frame *f)
{
	al_err err;
	if (c->uid != 0) {
		s->refused++;
		al_warn("credentials: a HELLO from uid %u refused (root only)",
			(unsigned)c->uid);
		send_error(c, AL_EPERM, "hello: root peers only");
		c->dead = 1;
		return;
	}
	if (al_cred_hello_unpack(f->payload, f->len, c->sandbox, &err) < 0) {
		send_error(c, err.code, err.msg);
		c->dead = 1;
		return;
	}
	/* One channel per sandbox: the newer one wins. */
	for (size_t i = 0; i < s->nconns; i++)
		if (s->conns[i]->kind == C_CHAN &&
		    strcmp(s->conns[i]->sandbox, c->sandbox) == 0) {
			conn_close(s, i);
			break;
		}
	c->kind = C_CHAN;
	s->n_new--;
	s->hellos++;
	if (push_set(s, c, &err) < 0) {
		al_warn("credentials: sandbox %s: %s", c->sandbox, err.msg);
		send_error(c, err.code == AL_ENOENT ? AL_ENOENT : AL_EUNAVAIL,
			   err.code == AL_ENOENT ? "no such sandbox"
						 : "credentials unavailable");
		c->dead = 1;
	}
}

static bucket *bucket_for(al_credsvc *s, const rated *r, int64_t now)
{
	bucket *lru = NULL;
	for (size_t i = 0; i < s->n_buckets; i++) {
		bucket *b = &s->buckets[i];
		if (strcmp(b->id, r->id) == 0) {
			if (b->requests != r->requests ||
			    b->per_seconds != r->per_seconds) {
				/* The limit changed: its tokens carry over,
				 * capped by the new burst. */
				b->requests = r->requests;
				b->per_seconds = r->per_seconds;
			}
			b->used_ms = now;
			return b;
		}
		if (lru == NULL || b->used_ms < lru->used_ms)
			lru = b;
	}
	bucket *b = s->n_buckets < AL_CREDSVC_BUCKETS
			    ? &s->buckets[s->n_buckets++]
			    : lru;
	*b = (bucket){.requests = r->requests,
		      .per_seconds = r->per_seconds,
		      .used_ms = now};
	snprintf(b->id, sizeof b->id, "%s", r->id);
	return b;
}

static int on_take(al_credsvc *s, conn *c, const al_frame *f, bool flooded)
{
	al_cred_take t;
	al_err err;
	if (al_cred_take_unpack(f->payload, f->len, &t, &err) < 0)
		return -1;
	al_cred_grant g = {.req = t.req, .ok = false, .retry_after = 1};
	const rated *r = NULL;
	for (size_t i = 0; i < c->n_rated && r == NULL; i++)
		if (strcmp(c->rated[i].id, t.id) == 0)
			r = &c->rated[i];
	/* Not a rated credential of this sandbox's set: no token. */
	if (r != NULL && !flooded) {
		int64_t now = al_now_ms(), wait = 0;
		bucket *b = bucket_for(s, r, now);
		g.ok = al_ratebucket_take(&b->rb, b->requests,
					  (double)b->requests / b->per_seconds,
					  now, &wait) == 1;
		if (!g.ok) {
			int64_t secs = (wait + 999) / 1000;
			g.retry_after = secs < 1 ? 1
					: secs > AL_CRED_RETRY_AFTER_MAX
						? AL_CRED_RETRY_AFTER_MAX
						: (uint32_t)secs;
		}
	}
	if (g.ok)
		s->grants++;
	else
		s->denials++;
	if (g.ok)
		g.retry_after = 0;
	return send_frame(c, AL_F_CRED_GRANT, f->id,
			  al_cred_grant_pack(&g, NULL), false);
}

static void queue_row(al_credsvc *s, const conn *c, const al_cred_use *u)
{
	if (s->n_rows >= AL_CREDSVC_AUDIT_MAX) {
		s->dropped++;
		return;
	}
	if (s->n_rows == s->cap_rows) {
		size_t cap = s->cap_rows == 0 ? 64 : s->cap_rows * 2;
		al_credsvc_row *grown = realloc(s->rows, cap * sizeof *grown);
		if (grown == NULL) {
			s->dropped++;
			return;
		}
		s->rows = grown;
		s->cap_rows = cap;
	}
	al_credsvc_row *row = &s->rows[s->n_rows++];
	row->at_ms = unix_ms();
	snprintf(row->sandbox, sizeof row->sandbox, "%s", c->sandbox);
	row->sb = c->sb;
	row->use = *u;
	if (s->n_rows == 1)
		s->first_row_ms = al_now_ms();
}

/* Write the queue when it is due (full batch, old enough, or force). */
static void audit_flush(al_credsvc *s, bool force)
{
	int64_t now = al_now_ms();
	if (s->n_rows == 0 && s->dropped == 0)
		return;
	if (!force && s->n_rows < AL_CREDSVC_AUDIT_BATCH &&
	    now - s->first_row_ms < AL_CREDSVC_AUDIT_EVERY_MS)
		return;
	if (s->dropped > 0 && s->n_rows < s->cap_rows) {
		/* The drops, as one row of their own. */
		al_credsvc_row *row = &s->rows[s->n_rows++];
		memset(row, 0, sizeof *row);
		row->at_ms = unix_ms();
		row->use.status = -1;
		snprintf(row->use.action, sizeof row->use.action, "dropped");
		snprintf(row->use.reason, sizeof row->use.reason,
			 "%lu audit records dropped: the queue was full",
			 s->dropped);
	}
	al_err err;
	if (s->store.audit(s->store.arg, s->rows, s->n_rows, &err) < 0) {
		if (now - s->audit_warned_ms >= LOG_EVERY_MS) {
			al_warn("credentials: audit rows kept for later: %s",
				err.msg);
			s->audit_warned_ms = now;
		}
		/* Kept (the drops row too), tried again next turn. */
		if (s->dropped > 0)
			s->dropped = 0;
		s->first_row_ms = now;
		return;
	}
	s->dropped_total += s->dropped;
	s->dropped = 0;
	s->n_rows = 0;
}

/* A frame of a bound channel; -1 closes it. */
static int on_chan_frame(al_credsvc *s, conn *c, const al_frame *f)
{
	bool flooded = al_ratebucket_take(&c->frames, AL_CREDSVC_FRAME_BURST,
					  AL_CREDSVC_FRAME_RATE, al_now_ms(),
					  NULL) == 0;
	al_err err;
	switch (f->type) {
	case AL_F_CRED_SET_ACK: {
		uint64_t v;
		if (al_cred_set_ack_unpack(f->payload, f->len, &v, &err) < 0 ||
		    v > c->pushed)
			return -1;
		if (v > c->acked)
			c->acked = v;
		return 0;
	}
	case AL_F_CRED_TAKE:
		return on_take(s, c, f, flooded);
	case AL_F_CRED_USE: {
		al_cred_use u;
		if (al_cred_use_unpack(f->payload, f->len, &u, &err) < 0)
			return -1;
		if (flooded)
			s->dropped++;
		else
			queue_row(s, c, &u);
		return 0;
	}
	default:
		return -1;
	}
}

/* Read and handle what is there; 1 when the connection is to go. */
static int read_conn(al_credsvc *s, conn *c)
{
	al_err err;
	int rc = al_frame_reader_fill(&c->rd, c->fd, &err);
	if (rc <= 0)
		return 1;
	al_frame f;
	while (!c->dead && (rc = al_frame_next(&c->rd, &f, &err)) == 1) {
		int bad = 0;
		if (c->kind == C_NEW && f.type == AL_F_CRED_HELLO)
			on_hello(s, c, &f);
		else if (c->kind == C_NEW && f.type == AL_F_CRED_REFRESH)
			on_refresh(s, c, &f);
		else if (c->kind == C_CHAN)
			bad = on_chan_frame(s, c, &f) < 0;
		else
			bad = 1;
		al_frame_free(&f);
		if (bad) {
			s->refused++;
			return 1;
		}
	}
	return rc < 0 || c->dead;
}

/* ---- the loop ---- */

static void *loop(void *arg)
{
	al_credsvc *s = arg;
	for (;;) {
		int64_t now = al_now_ms(), next = now + 1000;
		for (size_t i = 0; i < s->nconns;) {
			conn *c = s->conns[i];
			bool answered = c->kind == C_REFRESH &&
					c->refresh == 0 &&
					al_buf_pending(&c->out) == 0;
			if (c->dead || answered ||
			    (c->kind == C_NEW && c->deadline <= now)) {
				conn_close(s, i);
				continue;
			}
			if (c->kind == C_NEW && c->deadline < next)
				next = c->deadline;
			i++;
		}
		refresh_check(s, now);
		for (size_t k = 0; k < AL_CREDSVC_REFRESH_MAX; k++)
			if (s->refreshes[k].used &&
			    s->refreshes[k].deadline < next)
				next = s->refreshes[k].deadline;
		audit_flush(s, false);
		if (s->n_rows > 0 &&
		    s->first_row_ms + AL_CREDSVC_AUDIT_EVERY_MS < next)
			next = s->first_row_ms + AL_CREDSVC_AUDIT_EVERY_MS;
		struct pollfd *p = s->pfd;
		p[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
		/* Full: leave new peers in the backlog. */
		p[1] = (struct pollfd){
			.fd = s->nconns < AL_CREDSVC_CONNS &&
					      s->n_new < AL_CREDSVC_NEW_MAX
				      ? s->lfd
				      : -1,
			.events = POLLIN};
		size_t polled = s->nconns;
		for (size_t i = 0; i < polled; i++) {
			conn *c = s->conns[i];
			short ev = POLLIN;
			if (al_buf_pending(&c->out) > 0)
				ev |= POLLOUT;
			p[2 + i] = (struct pollfd){.fd = c->fd, .events = ev};
		}
		int wait = next > now ? (int)(next - now) : 0;
		int n = poll(p, 2 + polled, wait);
		if (n < 0 && errno != EINTR) {
			al_error("credentials: poll: %s", strerror(errno));
			break;
		}
		if (n <= 0)
			continue;
		if (p[0].revents != 0)
			break;
		/* Back to front: conn_close moves the last one into i; a
		 * close inside a handler (a replaced channel) may move one
		 * polled later, so entries are matched by fd. */
		for (size_t i = polled; i-- > 0;) {
			if (p[2 + i].revents == 0 || i >= s->nconns ||
			    s->conns[i]->fd != p[2 + i].fd)
				continue;
			conn *c = s->conns[i];
			int gone = 0;
			if (p[2 + i].revents & POLLOUT)
				gone = flush(c) < 0;
			if (!gone &&
			    (p[2 + i].revents & (POLLIN | POLLHUP | POLLERR)))
				gone = read_conn(s, c);
			if (gone) {
				size_t j = index_of(s, c);
				if (j < s->nconns)
					conn_close(s, j);
			}
		}
		if (p[1].revents & POLLIN)
			accept_one(s);
	}
	audit_flush(s, true);
	return NULL;
}

al_credsvc *ctl_credsvc_start(const char *state_dir,
			      const al_credsvc_store *store, al_err *err)
{
	al_credsvc *s = calloc(1, sizeof *s);
	if (s == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		return NULL;
	}
	s->lfd = s->wake[0] = s->wake[1] = -1;
	s->store = *store;
	snprintf(s->path, sizeof s->path, "%s/%s", state_dir, AL_CREDSVC_SOCK);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(s->path) >= sizeof sa.sun_path) {
		al_err_set(err, AL_EINVAL, 0,
			   "credential socket path too long: %s", s->path);
		goto fail;
	}
	memcpy(sa.sun_path, s->path, strlen(s->path) + 1);
	s->buckets = calloc(AL_CREDSVC_BUCKETS, sizeof *s->buckets);
	s->pfd = calloc(AL_CREDSVC_CONNS + 2, sizeof *s->pfd);
	if (s->buckets == NULL || s->pfd == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		goto fail;
	}
	if (pipe2(s->wake, O_CLOEXEC) < 0) {
		al_err_sys(err, AL_ESYS, errno, "pipe");
		goto fail;
	}
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->lfd < 0) {
		al_err_sys(err, AL_ESYS, errno, "socket");
		goto fail;
	}
	unlink(s->path);
	/* fcgi workers may run as the stack's uid: anyone may connect,
	 * SO_PEERCRED decides per message. */
	if (bind(s->lfd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    chmod(s->path, 0666) < 0 || listen(s->lfd, 256) < 0) {
		al_err_sys(err, AL_ESYS, errno, "listen on %s", s->path);
		goto fail;
	}
	int rc = pthread_create(&s->thread, NULL, loop, s);
	if (rc != 0) {
		al_err_sys(err, AL_ESYS, rc, "credential service thread");
		unlink(s->path);
		goto fail;
	}
	return s;
fail:
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->wake[0] >= 0)
		close(s->wake[0]), close(s->wake[1]);
	free(s->buckets);
	free(s->pfd);
	free(s);
	return NULL;
}

void ctl_credsvc_stop(al_credsvc *s)
{
	if (s == NULL)
		return;
	(void)!write(s->wake[1], "x", 1);
	pthread_join(s->thread, NULL);
	while (s->nconns > 0)
		conn_close(s, 0);
	for (size_t k = 0; k < AL_CREDSVC_REFRESH_MAX; k++)
		free(s->refreshes[k].wait);
	close(s->lfd);
	close(s->wake[0]);
	close(s->wake[1]);
	unlink(s->path);
	al_info("credentials: stopped (%lu channels opened, %lu sets sent, "
		"%lu tokens granted, %lu denied, %lu refused, %lu audit "
		"records dropped)",
		s->hellos, s->sets, s->grants, s->denials, s->refused,
		s->dropped_total);
	free(s->rows);
	free(s->buckets);
	free(s->pfd);
	free(s);
}
