/* control: the shim's frames on fd 6. GW_CONFIG in (the first one starts
 * serving; later ones replace metadata and network from the next
 * decision on, including on connections already open), one GW_ACK out
 * per GW_CONFIG; GW_CREDCHAN in, with the credential channel's
 * descriptor (credchan.c asks for it). EOF: the shim is gone, and so is
 * the gateway. */
#include <arpa/inet.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "base/fdpass.h"
#include "credchan.h"
#include "gw.h"
#include "proto/agentproto.h"

/* An ACK is a few bytes: a shim that takes none for this long is stuck. */
#define GW_ACK_SEND_MS 2000

typedef struct control {
	gw *g;
	int fd;
	struct event *ev;
	al_frame_reader rd;
	int passed; /* a descriptor the shim sent (SCM_RIGHTS), or -1 */
	int (*first_config)(gw *g, al_err *err);
} control;

static void ack(control *c, uint32_t id, bool ok, const char *why)
{
	al_err err;
	char *p = al_gw_ack_pack(ok, why, &err);
	if (p == NULL ||
	    al_frame_send_until(c->fd, AL_F_GW_ACK, id, p, strlen(p),
				al_now_ms() + GW_ACK_SEND_MS, &err) < 0) {
		gw_note(c->g, "control: cannot answer: %s", err.msg);
		event_base_loopbreak(c->g->base);
	}
	free(p);
}

/* Whether a later config may replace the one in use: the same sandbox
 * for its whole life, only metadata and network change. */
static const char *same_sandbox(const al_gw_config *a, const al_gw_config *b)
{
	if (strcmp(a->sandbox, b->sandbox) != 0)
		return "sandbox changed";
	if (strcmp(a->template_name, b->template_name) != 0 ||
	    strcmp(a->project, b->project) != 0 || a->build != b->build)
		return "template, project or build changed";
	if (strcmp(a->gateway, b->gateway) != 0)
		return "gateway address changed";
	return NULL;
}

static void on_config(control *c, const al_frame *f)
{
	gw *g = c->g;
	al_err err;
	al_gw_config next;
	if (al_gw_config_unpack(f->payload, f->len, &next, &err) < 0) {
		ack(c, f->id, false, err.msg);
		return;
	}
	const char *why = NULL;
	char addr[16];
	struct in_addr in = {htonl(g->gateway)};
	inet_ntop(AF_INET, &in, addr, sizeof addr);
	if (strcmp(next.sandbox, g->sandbox) != 0)
		why = "config for another sandbox";
	else if (strcmp(next.gateway, addr) != 0)
		why = "gateway address is not the slot's";
	else if (g->configured)
		why = same_sandbox(&g->cfg, &next);
	if (why != NULL) {
		al_gw_config_free(&next);
		ack(c, f->id, false, why);
		return;
	}
	al_gw_config old = g->cfg;
	bool first = !g->configured;
	g->cfg = next;
	g->configured = true;
	if (first) {
		memset(&old, 0, sizeof old);
		if (c->first_config(g, &err) < 0) {
			ack(c, f->id, false, err.msg);
			gw_note(g, "cannot serve: %s", err.msg);
			event_base_loopbreak(g->base);
			return;
		}
	} else {
		al_gw_config_free(&old);
		/* Kept upstreams were reached under the old network: none
		 * outlives it (each request is decided again anyway). */
		al_gw_uppool_clear(g->uppool);
	}
	gw_note(g, "network %s (%zu allowed, %zu denied)",
		al_net_mode_name(g->cfg.network.mode), g->cfg.network.n_allow,
		g->cfg.network.n_deny);
	ack(c, f->id, true, NULL);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	control *c = arg;
	al_err err = {0};
	char buf[16384];
	ssize_t n = al_fd_recv(c->fd, buf, sizeof buf, &c->passed, &err);
	if (n < 0 && err.code == AL_OK)
		return; /* EAGAIN */
	int rc = n > 0 ? al_frame_reader_feed(&c->rd, buf, (size_t)n, &err) == 0
		       : (int)n;
	if (rc <= 0) {
		gw_note(c->g, "control closed%s%s: exiting", rc < 0 ? ": " : "",
			rc < 0 ? err.msg : "");
		event_base_loopbreak(c->g->base);
		return;
	}
	al_frame f;
	while ((rc = al_frame_next(&c->rd, &f, &err)) == 1) {
		bool ok = false;
		if (f.type == AL_F_GW_CONFIG) {
			on_config(c, &f);
		} else if (f.type == AL_F_GW_CREDCHAN) {
			if (al_gw_credchan_unpack(f.payload, f.len, &ok, &err) <
			    0)
				gw_note(c->g, "control: %s", err.msg);
			gw_credchan_reply(c->g, ok, c->passed);
			c->passed = -1;
		} else
			gw_note(c->g, "control: frame type %u ignored", f.type);
		al_frame_free(&f);
	}
	if (rc < 0) {
		gw_note(c->g, "control: %s: exiting", err.msg);
		event_base_loopbreak(c->g->base);
	}
}

int gw_control_start(gw *g, int fd, int (*first_config)(gw *g, al_err *err))
{
	control *c = calloc(1, sizeof *c);
	if (c == NULL)
		return -1;
	c->g = g;
	c->fd = fd;
	c->first_config = first_config;
	c->passed = -1;
	al_frame_reader_init(&c->rd);
	evutil_make_socket_nonblocking(fd);
	c->ev = event_new(g->base, fd, EV_READ | EV_PERSIST, on_readable, c);
	if (c->ev == NULL || event_add(c->ev, NULL) < 0)
		return -1;
	/* Lives as long as the process. */
	return 0;
}
