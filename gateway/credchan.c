/* credchan: the gateway's end of the credential channel (credchan.h). */
#include "credchan.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "net/gwlaunch.h"
#include "proto/agentproto.h"

#define IN_MAX (AL_FRAME_MAX_PAYLOAD + (64u << 10))
#define OUT_MAX (4u << 20)
/* Audit records move from the queue to the socket while less than
 * this is waiting there: the queue is what is bounded and counted. */
#define OUT_AUDIT_LOW (64u << 10)
#define ASK_SEND_MS 1000
/* Audit records wait this long, or until this many are queued, so that
 * a busy gateway writes them in batches: one write, and one wakeup of
 * the controller, per batch rather than per request (a wakeup on another
 * core is an interrupt across cores, dear on virtual machines). */
#define AUDIT_BATCH_MS 20
#define AUDIT_BATCH 128

typedef struct take {
	uint32_t handle;
	int answered, ok;
	uint32_t retry_after;
	int64_t deadline;
	gw_cred_take_cb cb;
	void *arg;
} take;

struct gw_credchan {
	gw *g;
	int fd; /* -1: no channel */
	struct event *rev, *wev, *ask, *tick, *batch;
	al_frame_reader rd;
	al_buf out;
	al_cred_set set;
	bool have_set;
	int backoff_ms;
	take takes[GW_CRED_TAKES_MAX];
	size_t ntakes;
	uint32_t next_handle;
	char *queue[GW_CRED_AUDIT_MAX]; /* packed CRED_USE payloads, a ring */
	size_t head, count;
	unsigned long dropped;
	unsigned long sets, channels;
};

static void wipe_buf(al_buf *b)
{
	if (b->data != NULL)
		OPENSSL_cleanse(b->data, b->cap);
}

/* ---- takes ---- */

static void tick_arm(struct gw_credchan *c);

static void take_answer(take *t, bool ok, uint32_t retry_after)
{
	t->answered = 1;
	t->ok = ok;
	t->retry_after = ok ? 0 : retry_after < 1 ? 1 : retry_after;
}

/* Call back every answered or expired take (outside the table: a
 * callback may take or cancel again). */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct gw_credchan *c = arg;
	int64_t now = al_now_ms();
	take due[GW_CRED_TAKES_MAX];
	size_t n = 0;
	for (size_t i = 0; i < c->ntakes;) {
		take *t = &c->takes[i];
		if (!t->answered && t->deadline <= now)
			take_answer(t, false, 1);
		if (t->answered) {
			due[n++] = *t;
			c->takes[i] = c->takes[--c->ntakes];
			continue;
		}
		i++;
	}
	tick_arm(c);
	for (size_t i = 0; i < n; i++)
		due[i].cb(due[i].arg, due[i].ok != 0, due[i].retry_after);
}

static void tick_arm(struct gw_credchan *c)
{
	int64_t now = al_now_ms(), next = -1;
	for (size_t i = 0; i < c->ntakes; i++) {
		int64_t at = c->takes[i].answered ? now : c->takes[i].deadline;
		if (next < 0 || at < next)
			next = at;
	}
	if (next < 0) {
		event_del(c->tick);
		return;
	}
	int64_t ms = next > now ? next - now : 0;
	struct timeval tv = {.tv_sec = ms / 1000,
			     .tv_usec = (suseconds_t)(ms % 1000) * 1000};
	event_add(c->tick, &tv);
}

/* ---- output ---- */

static void chan_down(struct gw_credchan *c, const char *why);

static void pump(struct gw_credchan *c);

static void want_write(struct gw_credchan *c)
{
	if (c->fd < 0)
		return;
	if (al_buf_pending(&c->out) > 0)
		event_add(c->wev, NULL);
	else
		event_del(c->wev);
}

static int queue_frame(struct gw_credchan *c, uint16_t type, uint32_t id,
		       char *payload)
{
	al_err err;
	int rc = payload != NULL && c->fd >= 0
			 ? al_frame_encode(&c->out, type, id, payload,
					   strlen(payload), &err)
			 : -1;
	free(payload);
	if (rc == 0)
		want_write(c);
	return rc;
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct gw_credchan *c = arg;
	al_err err;
	if (al_buf_flush(&c->out, c->fd, &err) < 0) {
		chan_down(c, err.msg);
		return;
	}
	pump(c);
	want_write(c);
}

/* Move queued audit records to the socket while it keeps up. */
static void pump(struct gw_credchan *c)
{
	while (c->fd >= 0 && al_buf_pending(&c->out) < OUT_AUDIT_LOW &&
	       (c->count > 0 || c->dropped > 0)) {
		if (c->count == 0) {
			al_cred_use drops = {.status = -1};
			snprintf(drops.name, sizeof drops.name, "dropped");
			snprintf(drops.action, sizeof drops.action, "dropped");
			snprintf(drops.reason, sizeof drops.reason,
				 "%lu records dropped by the gateway",
				 c->dropped);
			if (queue_frame(c, AL_F_CRED_USE, 0,
					al_cred_use_pack(&drops, NULL)) < 0)
				return;
			c->dropped = 0;
			continue;
		}
		/* queue_frame frees the payload, sent or not. */
		char *payload = c->queue[c->head];
		c->head = (c->head + 1) % GW_CRED_AUDIT_MAX;
		c->count--;
		if (queue_frame(c, AL_F_CRED_USE, 0, payload) < 0) {
			c->dropped++;
			return;
		}
	}
}

static void on_batch(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	pump(arg);
}

/* ---- the channel ---- */

static void ask_later(struct gw_credchan *c)
{
	struct timeval tv = {.tv_sec = c->backoff_ms / 1000,
			     .tv_usec = (c->backoff_ms % 1000) * 1000};
	event_add(c->ask, &tv);
	c->backoff_ms *= 2;
	if (c->backoff_ms > GW_CREDCHAN_BACKOFF_MAX_MS)
		c->backoff_ms = GW_CREDCHAN_BACKOFF_MAX_MS;
}

/* No channel (any more): takes denied, a new one asked for; the set in
 * use stays. */
static void chan_down(struct gw_credchan *c, const char *why)
{
	if (c->fd >= 0) {
		gw_note(c->g, "credential channel closed: %s", why);
		event_free(c->rev);
		event_free(c->wev);
		c->rev = c->wev = NULL;
		close(c->fd);
		c->fd = -1;
	}
	wipe_buf(&c->rd.in);
	al_frame_reader_free(&c->rd);
	wipe_buf(&c->out);
	al_buf_free(&c->out);
	for (size_t i = 0; i < c->ntakes; i++)
		if (!c->takes[i].answered)
			take_answer(&c->takes[i], false, 1);
	tick_arm(c);
	if (!event_pending(c->ask, EV_TIMEOUT, NULL))
		ask_later(c);
}

static void on_set(struct gw_credchan *c, al_frame *f)
{
	al_err err;
	al_cred_set next;
	int rc = al_cred_set_unpack(f->payload, f->len, &next, &err);
	OPENSSL_cleanse(f->payload, f->len);
	if (rc < 0) {
		chan_down(c, err.msg);
		return;
	}
	al_cred_set_free(&c->set); /* the old values wiped */
	c->set = next;
	if (!c->have_set)
		gw_note(c->g, "credentials: %zu in the first set", next.n);
	c->have_set = true;
	c->sets++;
	c->backoff_ms = GW_CREDCHAN_BACKOFF_MIN_MS;
	queue_frame(c, AL_F_CRED_SET_ACK, 0,
		    al_cred_set_ack_pack(next.version, NULL));
}

static void on_grant(struct gw_credchan *c, const al_frame *f)
{
	al_err err;
	al_cred_grant g;
	if (al_cred_grant_unpack(f->payload, f->len, &g, &err) < 0) {
		chan_down(c, err.msg);
		return;
	}
	for (size_t i = 0; i < c->ntakes; i++)
		if (c->takes[i].handle == g.req && !c->takes[i].answered) {
			take_answer(&c->takes[i], g.ok, g.retry_after);
			tick_arm(c);
			return;
		}
	/* Late (timed out or cancelled): nothing waits for it. */
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct gw_credchan *c = arg;
	al_err err;
	int rc = al_frame_reader_fill(&c->rd, c->fd, &err);
	if (rc <= 0) {
		chan_down(c, rc == 0 ? "the controller went away" : err.msg);
		return;
	}
	al_frame f;
	while (c->fd >= 0 && (rc = al_frame_next(&c->rd, &f, &err)) == 1) {
		if (f.type == AL_F_CRED_SET) {
			on_set(c, &f);
		} else if (f.type == AL_F_CRED_GRANT) {
			on_grant(c, &f);
		} else {
			al_err why;
			if (f.type != AL_F_ERROR ||
			    al_error_unpack(f.payload, f.len, &why, &err) < 0)
				snprintf(why.msg, sizeof why.msg,
					 "unexpected frame %s",
					 al_frame_type_name(f.type));
			chan_down(c, why.msg);
		}
		al_frame_free(&f);
	}
	if (c->fd >= 0 && rc < 0)
		chan_down(c, err.msg);
	if (c->fd >= 0 && al_buf_pending(&c->rd.in) == 0)
		wipe_buf(&c->rd.in);
}

static int attach(struct gw_credchan *c, int fd)
{
	if (evutil_make_socket_nonblocking(fd) < 0) {
		close(fd);
		return -1;
	}
	c->fd = fd;
	al_frame_reader_init(&c->rd);
	c->rd.in.max = IN_MAX;
	al_buf_init(&c->out, OUT_MAX);
	c->rev = event_new(c->g->base, fd, EV_READ | EV_PERSIST, on_read, c);
	c->wev = event_new(c->g->base, fd, EV_WRITE, on_write, c);
	if (c->rev == NULL || c->wev == NULL || event_add(c->rev, NULL) < 0) {
		chan_down(c, "out of memory");
		return -1;
	}
	event_del(c->ask);
	c->channels++;
	pump(c);
	return 0;
}

/* Ask the shim (fd 6) for a channel; the answer comes to
 * gw_credchan_reply through control.c. */
static void on_ask(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct gw_credchan *c = arg;
	if (c->fd >= 0)
		return;
	al_err err;
	if (al_frame_send_until(AL_GWLAUNCH_FD_CONTROL, AL_F_GW_CREDCHAN_REQ, 0,
				"", 0, al_now_ms() + ASK_SEND_MS, &err) < 0)
		gw_note(c->g, "credential channel: asking the shim: %s",
			err.msg);
	/* Asked again later unless a channel comes. */
	ask_later(c);
}

void gw_credchan_reply(gw *g, bool ok, int fd)
{
	struct gw_credchan *c = g->credchan;
	if (c == NULL || !ok || fd < 0 || c->fd >= 0) {
		if (fd >= 0)
			close(fd);
		return;
	}
	attach(c, fd);
}

int gw_credchan_start(gw *g, int fd, al_err *err)
{
	struct gw_credchan *c = calloc(1, sizeof *c);
	if (c == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	c->g = g;
	c->fd = -1;
	c->backoff_ms = GW_CREDCHAN_BACKOFF_MIN_MS;
	c->ask = evtimer_new(g->base, on_ask, c);
	c->tick = evtimer_new(g->base, on_tick, c);
	c->batch = evtimer_new(g->base, on_batch, c);
	if (c->ask == NULL || c->tick == NULL || c->batch == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	g->credchan = c;
	if (fd >= 0 && attach(c, fd) == 0)
		return 0;
	/* None from the launcher: ask at once. */
	struct timeval now = {0, 0};
	event_add(c->ask, &now);
	return 0;
}

const al_cred_set *gw_creds(gw *g)
{
	struct gw_credchan *c = g->credchan;
	return c != NULL && c->have_set ? &c->set : NULL;
}

uint32_t gw_cred_take(gw *g, const char *id, gw_cred_take_cb cb, void *arg)
{
	struct gw_credchan *c = g->credchan;
	if (c == NULL || c->ntakes >= GW_CRED_TAKES_MAX) {
		/* Nowhere to keep it: a denial that never comes would hang
		 * the request, so refuse loudly instead. */
		gw_note(g, "credential rate: too many takes pending");
		return 0;
	}
	if (++c->next_handle == 0)
		c->next_handle = 1;
	take *t = &c->takes[c->ntakes++];
	*t = (take){.handle = c->next_handle,
		    .deadline = al_now_ms() + GW_CRED_TAKE_TIMEOUT_MS,
		    .cb = cb,
		    .arg = arg};
	al_cred_take m = {.req = t->handle};
	snprintf(m.id, sizeof m.id, "%s", id);
	if (c->fd < 0 ||
	    queue_frame(c, AL_F_CRED_TAKE, 0, al_cred_take_pack(&m, NULL)) < 0)
		take_answer(t, false, 1);
	tick_arm(c);
	return t->handle;
}

void gw_cred_take_cancel(gw *g, uint32_t handle)
{
	struct gw_credchan *c = g->credchan;
	for (size_t i = 0; c != NULL && handle != 0 && i < c->ntakes; i++)
		if (c->takes[i].handle == handle) {
			c->takes[i] = c->takes[--c->ntakes];
			tick_arm(c);
			return;
		}
}

void gw_cred_audit(gw *g, const al_cred_use *u)
{
	struct gw_credchan *c = g->credchan;
	if (c == NULL)
		return;
	/* Queued packed: a few hundred bytes, not the record's few KiB. */
	char *payload = c->count < GW_CRED_AUDIT_MAX ? al_cred_use_pack(u, NULL)
						     : NULL;
	if (payload == NULL) {
		c->dropped++;
		return;
	}
	c->queue[(c->head + c->count) % GW_CRED_AUDIT_MAX] = payload;
	c->count++;
	if (c->count >= AUDIT_BATCH) {
		pump(c);
	} else if (!evtimer_pending(c->batch, NULL)) {
		struct timeval tv = {0, AUDIT_BATCH_MS * 1000};
		evtimer_add(c->batch, &tv);
	}
}

void gw_cred_audit_flush(gw *g)
{
	struct gw_credchan *c = g->credchan;
	if (c == NULL || c->fd < 0)
		return;
	pump(c);
	al_err err;
	(void)al_buf_flush(&c->out, c->fd, &err);
}
