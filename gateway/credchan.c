/* credchan: PROVISIONAL minimal end of the credential channel (fd 7),
 * written by cred-inject to test injection before cred-svc's module
 * lands; cred-svc's gateway/credchan.c replaces this file whole.
 * What it does: CRED_SET replaces the set and is acknowledged; takes go
 * out as CRED_TAKE and come back as CRED_GRANT, denied after
 * GW_CRED_TAKE_TIMEOUT_MS or when the channel is gone; audit records go
 * out as CRED_USE (dropped and counted when they cannot). Not here yet:
 * re-opening the channel through the shim (GW_CREDCHAN_REQ). */
#include "credchan.h"

#include <event2/event.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentproto.h"

#define SEND_MS 500

typedef struct pending {
	uint32_t req; /* 0: free */
	gw_cred_take_cb cb;
	void *arg;
	int64_t deadline_ms;
	bool ok, answered;
	uint32_t retry_after;
} pending;

typedef struct credchan {
	gw *g;
	int fd; /* -1 when gone */
	struct event *ev, *timer;
	al_frame_reader rd;
	al_cred_set set;
	bool have_set;
	uint32_t next_req;
	pending takes[GW_CRED_TAKES_MAX];
	unsigned long dropped;
} credchan;

static credchan chan = {.fd = -1};

const al_cred_set *gw_creds(gw *g)
{
	(void)g;
	return chan.have_set ? &chan.set : NULL;
}

static void channel_gone(credchan *c, const char *why)
{
	if (c->fd < 0)
		return;
	gw_note(c->g, "credential channel closed%s%s", why ? ": " : "",
		why ? why : "");
	event_del(c->ev);
	close(c->fd);
	c->fd = -1;
	for (size_t i = 0; i < GW_CRED_TAKES_MAX; i++)
		if (c->takes[i].req != 0)
			c->takes[i].deadline_ms = 0;
	event_active(c->timer, EV_TIMEOUT, 0);
}

static void send_frame(credchan *c, uint16_t type, uint32_t id, char *p,
		       bool secret)
{
	al_err err;
	if (p == NULL)
		return;
	if (c->fd >= 0 && al_frame_send_until(c->fd, type, id, p, strlen(p),
					      al_now_ms() + SEND_MS, &err) < 0)
		channel_gone(c, err.msg);
	if (secret)
		OPENSSL_cleanse(p, strlen(p));
	free(p);
}

static void on_set(credchan *c, const al_frame *f)
{
	al_err err;
	al_cred_set next;
	if (al_cred_set_unpack(f->payload, f->len, &next, &err) < 0) {
		gw_note(c->g, "credential set refused: %s", err.msg);
		return;
	}
	al_cred_set_free(&c->set);
	c->set = next;
	c->have_set = true;
	send_frame(c, AL_F_CRED_SET_ACK, f->id,
		   al_cred_set_ack_pack(next.version, &err), false);
}

static void on_grant(credchan *c, const al_frame *f)
{
	al_err err;
	al_cred_grant gr;
	if (al_cred_grant_unpack(f->payload, f->len, &gr, &err) < 0) {
		gw_note(c->g, "credential grant refused: %s", err.msg);
		return;
	}
	for (size_t i = 0; i < GW_CRED_TAKES_MAX; i++) {
		pending *t = &c->takes[i];
		if (t->req == gr.req && !t->answered) {
			t->answered = true;
			t->ok = gr.ok;
			t->retry_after = gr.retry_after;
			event_active(c->timer, EV_TIMEOUT, 0);
			return;
		}
	}
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	credchan *c = arg;
	al_err err;
	int rc = al_frame_reader_fill(&c->rd, c->fd, &err);
	if (rc <= 0) {
		channel_gone(c, rc < 0 ? err.msg : NULL);
		return;
	}
	al_frame f;
	while (c->fd >= 0 && (rc = al_frame_next(&c->rd, &f, &err)) == 1) {
		if (f.type == AL_F_CRED_SET)
			on_set(c, &f);
		else if (f.type == AL_F_CRED_GRANT)
			on_grant(c, &f);
		else
			gw_note(c->g,
				"credential channel: frame type %u"
				" ignored",
				f.type);
		if (f.payload != NULL && f.len > 0)
			OPENSSL_cleanse(f.payload, f.len);
		al_frame_free(&f);
	}
	if (rc < 0)
		channel_gone(c, err.msg);
}

/* Answers due (granted, denied, timed out) go to their callers here,
 * from the loop. */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	credchan *c = arg;
	int64_t now = al_now_ms();
	for (size_t i = 0; i < GW_CRED_TAKES_MAX; i++) {
		pending *t = &c->takes[i];
		if (t->req == 0 || (!t->answered && now < t->deadline_ms))
			continue;
		pending done = *t;
		*t = (pending){0};
		done.cb(done.arg, done.answered && done.ok,
			done.answered ? (done.ok ? 0 : done.retry_after) : 1);
	}
}

uint32_t gw_cred_take(gw *g, const char *id, gw_cred_take_cb cb, void *arg)
{
	credchan *c = &chan;
	(void)g;
	if (++c->next_req == 0)
		c->next_req = 1;
	uint32_t req = c->next_req;
	pending *slot = NULL;
	for (size_t i = 0; i < GW_CRED_TAKES_MAX && slot == NULL; i++)
		if (c->takes[i].req == 0)
			slot = &c->takes[i];
	if (slot == NULL) {
		/* Too many pending: denied, but still from the loop; the
		 * oldest slot's owner is answered first. */
		slot = &c->takes[req % GW_CRED_TAKES_MAX];
		on_timer(-1, 0, c);
	}
	*slot = (pending){.req = req,
			  .cb = cb,
			  .arg = arg,
			  .deadline_ms = al_now_ms() + GW_CRED_TAKE_TIMEOUT_MS};
	al_err err;
	al_cred_take t = {.req = req};
	snprintf(t.id, sizeof t.id, "%s", id);
	if (c->fd >= 0)
		send_frame(c, AL_F_CRED_TAKE, req, al_cred_take_pack(&t, &err),
			   false);
	if (c->fd < 0) {
		slot->deadline_ms = 0;
		event_active(c->timer, EV_TIMEOUT, 0);
	}
	return req;
}

void gw_cred_take_cancel(gw *g, uint32_t handle)
{
	(void)g;
	for (size_t i = 0; i < GW_CRED_TAKES_MAX; i++)
		if (chan.takes[i].req == handle && handle != 0)
			chan.takes[i] = (pending){0};
}

void gw_cred_audit(gw *g, const al_cred_use *u)
{
	(void)g;
	credchan *c = &chan;
	al_err err;
	if (c->fd < 0) {
		c->dropped++;
		return;
	}
	send_frame(c, AL_F_CRED_USE, 0, al_cred_use_pack(u, &err), false);
}

int gw_credchan_start(gw *g, int fd, al_err *err)
{
	credchan *c = &chan;
	c->g = g;
	al_frame_reader_init(&c->rd);
	c->timer = event_new(g->base, -1, EV_PERSIST, on_timer, c);
	struct timeval tick = {0, 200 * 1000};
	if (c->timer == NULL || event_add(c->timer, &tick) < 0)
		return al_err_set(err, AL_ENOMEM, 0, "credchan: timer");
	if (fd < 0)
		return 0;
	evutil_make_socket_nonblocking(fd);
	c->fd = fd;
	c->ev = event_new(g->base, fd, EV_READ | EV_PERSIST, on_readable, c);
	if (c->ev == NULL || event_add(c->ev, NULL) < 0)
		return al_err_set(err, AL_ENOMEM, 0, "credchan: event");
	return 0;
}
