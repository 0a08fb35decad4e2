/* splice: TCP pass-through of a name:port the policy allowed (ports
 * other than 80 and 443). The upstream is dialled by name like any other
 * (dial.c: the gateway's resolver, every address classified); bytes are
 * copied both ways unchanged, at most GW_HIGH_WATER queued per direction
 * (the other side is not read meanwhile); a side's EOF is passed on as a
 * shutdown once what it sent is delivered; idle for g->idle_ms:
 * closed. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dial.h"
#include "gw.h"
#include "proto/agentproto.h"

typedef struct splice {
	gw *g;
	struct bufferevent *down, *up;
	gw_dial *dial;
	struct event *tick; /* idleness: no byte either way for idle_ms */
	int64_t last_ms;
	bool down_eof, up_eof;
} splice;

static void destroy(splice *s)
{
	gw_dial_cancel(s->dial);
	if (s->up != NULL)
		bufferevent_free(s->up);
	if (s->down != NULL)
		bufferevent_free(s->down);
	if (s->tick != NULL)
		event_free(s->tick);
	gw_conn_closed(s->g);
	free(s);
}

static struct bufferevent *other(splice *s, struct bufferevent *b)
{
	return b == s->down ? s->up : s->down;
}

static void on_read(struct bufferevent *b, void *arg)
{
	splice *s = arg;
	s->last_ms = al_now_ms();
	struct bufferevent *to = other(s, b);
	struct evbuffer *out = bufferevent_get_output(to);
	evbuffer_add_buffer(out, bufferevent_get_input(b));
	if (evbuffer_get_length(out) >= GW_HIGH_WATER)
		bufferevent_disable(b, EV_READ);
}

/* to drained below the low mark: read its peer again; after an EOF,
 * pass it on once everything is out. */
static void on_write(struct bufferevent *to, void *arg)
{
	splice *s = arg;
	struct bufferevent *from = other(s, to);
	bool from_eof = from == s->down ? s->down_eof : s->up_eof;
	if (!from_eof) {
		bufferevent_enable(from, EV_READ);
		return;
	}
	if (evbuffer_get_length(bufferevent_get_output(to)) == 0) {
		shutdown(bufferevent_getfd(to), SHUT_WR);
		if (s->down_eof && s->up_eof)
			destroy(s);
	}
}

static void on_event(struct bufferevent *b, short what, void *arg)
{
	splice *s = arg;
	if (what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) {
		destroy(s);
		return;
	}
	if (!(what & BEV_EVENT_EOF))
		return;
	if (b == s->down)
		s->down_eof = true;
	else
		s->up_eof = true;
	struct bufferevent *to = other(s, b);
	bufferevent_setwatermark(to, EV_WRITE, 0, 0);
	on_write(to, s);
}

static void on_dialled(void *arg, struct bufferevent *bev,
		       const struct sockaddr *addr, socklen_t addrlen,
		       const char *error)
{
	(void)addr;
	(void)addrlen;
	splice *s = arg;
	s->dial = NULL;
	if (bev == NULL) {
		gw_note(s->g, "pass-through: %s", error);
		destroy(s);
		return;
	}
	s->up = bev;
	/* A one-way stream reads nothing on one side for long: only a
	 * write that does not drain times out, idleness is the tick's. */
	struct timeval idle = {s->g->idle_ms / 1000,
			       (s->g->idle_ms % 1000) * 1000};
	struct bufferevent *both[2] = {s->down, s->up};
	for (int i = 0; i < 2; i++) {
		bufferevent_set_timeouts(both[i], NULL, &idle);
		gw_bev_flow(both[i]);
		bufferevent_setcb(both[i], on_read, on_write, on_event, s);
		bufferevent_enable(both[i], EV_READ | EV_WRITE);
	}
	/* What the guest sent while the dial went on. */
	on_read(s->down, s);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	splice *s = arg;
	if (al_now_ms() - s->last_ms > s->g->idle_ms)
		destroy(s);
}

void gw_splice_start(gw *g, int fd, const char *name, unsigned port)
{
	splice *s = calloc(1, sizeof *s);
	if (s == NULL) {
		close(fd);
		gw_conn_closed(g);
		return;
	}
	s->g = g;
	s->last_ms = al_now_ms();
	s->down = bufferevent_socket_new(g->base, fd, BEV_OPT_CLOSE_ON_FREE);
	s->tick = event_new(g->base, -1, EV_PERSIST, on_tick, s);
	struct timeval second = {1, 0};
	if (s->down == NULL || s->tick == NULL ||
	    event_add(s->tick, &second) < 0) {
		if (s->down == NULL)
			close(fd);
		destroy(s);
		return;
	}
	/* Nothing is read from the guest until the upstream is there. */
	gw_bev_flow(s->down);
	s->dial = gw_dial_start(g, name, port, AL_EGRESS_TCP, false, on_dialled,
				s);
	if (s->dial == NULL)
		destroy(s);
}
