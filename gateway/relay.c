/* relay: HTTP (port 80) and HTTPS (443) of one guest connection.
 *
 * HTTPS: TLS is terminated with a leaf for the name behind the
 * destination address (gw/tls): a ClientHello whose SNI is another name
 * fails the handshake; one without SNI is served that name's leaf.
 * Then, for EVERY request of the kept-alive connection: the head is
 * parsed strictly (gw/http), its Host (or absolute-form authority) must
 * be that same name and port, and the policy decides on name, port,
 * method and path. A denial answers 403 and closes the connection; a
 * malformed head answers the parser's status and closes.
 *
 * Upstream: each allowed request takes an idle upstream connection to
 * its name, port and kind (TLS or plain) from the gateway's pool
 * (gw/uppool), kept there by an earlier request of any of the sandbox's
 * connections, or dials one by name (dial.c). A connection goes back to
 * the pool only when its response was read to its end, both sides keep
 * alive and the upstream has sent nothing beyond it; any other is
 * closed (a safe request that finds a kept one closed is sent once more
 * on a new one). Heads go upstream re-serialised from the
 * parsed struct (never the guest's bytes), bodies re-framed after the
 * strict decoder (gw/httpbody); responses are parsed strictly and
 * re-serialised the same way. Expect: 100-continue is answered by the
 * gateway after the policy allowed the request (the upstream never sees
 * Expect); interim responses from upstream are dropped.
 *
 * Bounds: the handshake and each head must arrive within g->head_ms, a
 * connection idle either way for g->idle_ms is closed, and at most
 * GW_HIGH_WATER bytes queue towards either side before the other side
 * stops being read (backpressure). */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/bufferevent_struct.h>
#include <event2/event.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cred.h"
#include "dial.h"
#include "gw.h"
#include "gw/http.h"
#include "gw/httpbody.h"
#include "proto/agentproto.h"
#include "tlssess.h"

typedef struct relay {
	gw *g;
	char name[AL_HTTP_HOST_MAX];
	unsigned port;
	bool tls;
	enum al_egress_proto proto;
	struct bufferevent *down;	 /* the guest */
	struct bufferevent *up;		 /* upstream, NULL between requests */
	struct sockaddr_storage up_addr; /* what up is connected to */
	socklen_t up_addrlen;
	gw_dial *dial;
	struct event *tick;
	struct event *reaper;
	int64_t last_ms, head_deadline_ms; /* deadline 0: no head due */
	bool handshaken;		   /* TLS done (always for http) */
	bool closing;			   /* flushing the guest, then free */
	bool dead; /* killed: the reaper frees it from the loop */

	al_http_parser hp;
	al_http_req req;
	bool in_request; /* a head was accepted, its response not done */
	al_httpbody reqb;
	bool req_done;

	al_http_parser rp;
	al_http_resp resp;
	bool have_resp;
	al_httpbody respb;
	bool close_after; /* the guest connection ends with this response */
	bool up_reused;	  /* this request went on a pooled upstream */

	gw_credreq cr;	       /* the request's credentials (cred.h) */
	al_credmask *mask;     /* this response's masker, NULL: none */
	al_credmask *mask_own; /* the relay's, kept while the set is */
	uint64_t mask_version; /* of the set mask_own was built for */
} relay;

static void try_head(relay *r);
static void proceed(relay *r);
static void on_rate(void *arg, bool ok, uint32_t retry_after);
static void on_dialled(void *arg, struct bufferevent *bev,
		       const struct sockaddr *addr, socklen_t addrlen,
		       const char *error);
static void pump_body(relay *r);
static void pump_resp(relay *r);

static void up_drop(relay *r)
{
	gw_tlssess_release(r->up);
	r->up = NULL;
}

/* The response ended cleanly: the upstream waits in the pool for the
 * next request to the same key. */
static void up_park(relay *r)
{
	al_gw_upkey key = {
		.name = r->name,
		.port = r->port,
		.tls = r->tls,
		.addr = (const struct sockaddr *)&r->up_addr,
		.addrlen = r->up_addrlen,
	};
	bufferevent_setcb(r->up, NULL, NULL, NULL, NULL);
	al_gw_uppool_put(r->g->uppool, &key, r->up);
	r->up = NULL;
}

static void destroy(relay *r)
{
	gw_dial_cancel(r->dial);
	up_drop(r);
	if (r->down != NULL)
		bufferevent_free(r->down);
	if (r->tick != NULL)
		event_free(r->tick);
	if (r->reaper != NULL)
		event_free(r->reaper);
	if (r->in_request) {
		gw_credreq_end(r->g, &r->cr, &r->req);
		al_http_req_free(&r->req);
	}
	al_credmask_free(r->mask_own);
	if (r->have_resp)
		al_http_resp_free(&r->resp);
	gw_conn_closed(r->g);
	free(r);
}

/* Freed from the loop later (the reaper event), never inside a callback
 * that may still use it: a killed relay gets no more callbacks. */
static void on_reap(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	destroy(arg);
}

static void relay_kill(relay *r)
{
	if (r->dead)
		return;
	r->dead = true;
	gw_dial_cancel(r->dial);
	r->dial = NULL;
	struct bufferevent *both[2] = {r->down, r->up};
	for (int i = 0; i < 2; i++)
		if (both[i] != NULL) {
			bufferevent_setcb(both[i], NULL, NULL, NULL, NULL);
			bufferevent_disable(both[i], EV_READ | EV_WRITE);
		}
	event_del(r->tick);
	event_active(r->reaper, 0, 0);
}

static void on_down_flushed(struct bufferevent *bev, void *arg)
{
	(void)bev;
	relay *r = arg;
	if (r->closing &&
	    evbuffer_get_length(bufferevent_get_output(r->down)) == 0)
		relay_kill(r);
}

/* Stop reading, send what is queued to the guest, then close. */
static void relay_close(relay *r)
{
	r->closing = true;
	gw_dial_cancel(r->dial);
	r->dial = NULL;
	up_drop(r);
	bufferevent_disable(r->down, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(r->down)) == 0) {
		relay_kill(r);
		return;
	}
	bufferevent_setwatermark(r->down, EV_WRITE, 0, 0);
	bufferevent_setcb(r->down, NULL, on_down_flushed, NULL, r);
	bufferevent_enable(r->down, EV_WRITE);
}

/* A short answer of the gateway's own, then close. */
static void respond(relay *r, int status, const char *why)
{
	char text[160];
	snprintf(text, sizeof text, "airlock gateway: %s", why);
	for (char *p = text; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	al_err err;
	size_t len;
	char *msg = al_http_own_response(status, text, true, &len, &err);
	if (msg != NULL)
		evbuffer_add(bufferevent_get_output(r->down), msg, len);
	free(msg);
	relay_close(r);
}

static void touch(relay *r)
{
	r->last_ms = al_now_ms();
}

/* OpenSSL reads ahead (gw/tls): the next records may sit in its buffer
 * while the socket shows nothing more, and libevent reads a TLS socket
 * only when the socket is readable. So after each read, and whenever
 * reading resumes, what OpenSSL holds is read at once (the bufferevent's
 * own read event, run now; its watermark still bounds it). */
static void read_buffered(struct bufferevent *bev)
{
	SSL *ssl = bev != NULL ? bufferevent_openssl_get_ssl(bev) : NULL;
	if (ssl != NULL && SSL_has_pending(ssl) &&
	    (bufferevent_get_enabled(bev) & EV_READ))
		event_active(&bev->ev_read, EV_READ, 1);
}

/* ---- backpressure: the side written to is full, stop reading the other
 * one until it drains ---- */

static void on_up_drained(struct bufferevent *bev, void *arg)
{
	(void)bev;
	relay *r = arg;
	if (!r->closing) {
		bufferevent_enable(r->down, EV_READ);
		pump_body(r);
		read_buffered(r->down);
	}
}

static void on_down_drained(struct bufferevent *bev, void *arg)
{
	(void)bev;
	relay *r = arg;
	if (r->closing) {
		on_down_flushed(bev, arg);
		return;
	}
	if (r->up != NULL) {
		bufferevent_enable(r->up, EV_READ);
		pump_resp(r);
		read_buffered(r->up);
	}
}

static bool full(struct bufferevent *bev)
{
	return evbuffer_get_length(bufferevent_get_output(bev)) >=
	       GW_HIGH_WATER;
}

/* libevent writes each piece of a TLS bufferevent's output as a TLS
 * record and a write() of its own: a short message in pieces (a head,
 * then its body) is made one piece first, so that it goes as one record,
 * one segment, one read for the peer. At most a record's worth. */
static void coalesce(struct bufferevent *bev)
{
	struct evbuffer *out = bufferevent_get_output(bev);
	size_t len = evbuffer_get_length(out);
	if (len > 0 && len <= 16384 &&
	    evbuffer_peek(out, -1, NULL, NULL, 0) > 1)
		evbuffer_pullup(out, -1);
}

/* Write one decoded piece re-framed: chunked gets a chunk of its own. */
static void put_framed(struct evbuffer *out, enum al_http_body framing,
		       const char *data, size_t len)
{
	if (len == 0)
		return;
	if (framing == AL_HTTP_BODY_CHUNKED) {
		char head[AL_HTTPBODY_CHUNK_HEAD_MAX];
		size_t hl = al_httpbody_chunk_head(len, head);
		evbuffer_add(out, head, hl);
		evbuffer_add(out, data, len);
		evbuffer_add(out, "\r\n", 2);
	} else {
		evbuffer_add(out, data, len);
	}
}

/* Masked bytes on their way to the guest, re-framed. */
typedef struct framed_out {
	struct evbuffer *out;
	enum al_http_body framing;
} framed_out;

static void put_masked(void *arg, const char *p, size_t n)
{
	framed_out *f = arg;
	put_framed(f->out, f->framing, p, n);
}

/* What forward_step does to the data besides forwarding it: a request
 * body is scanned for placeholders (cred), a response body masked. */
typedef struct body_filter {
	relay *r;
	gw_credreq *scan;  /* request: scan (NULL: none) */
	al_credmask *mask; /* response: mask (NULL: none) */
	int status;	   /* after FORWARD_DENIED */
	char why[AL_POLICY_REASON_MAX];
} body_filter;

/* A placeholder in a request body denies it (forward_step). */
#define FORWARD_DENIED (-2)

/* Decode the first contiguous piece of in and write it to out re-framed,
 * the last chunk too when the body ends: the decoder's AL_AGAIN, 0 or
 * -1, or FORWARD_DENIED (nothing of the piece forwarded). Data that is
 * the piece itself (a Content-Length or close-delimited body) moves to
 * out without a copy unless it is masked. */
static int forward_step(struct evbuffer *in, struct evbuffer *out,
			al_httpbody *b, enum al_http_body framing,
			body_filter *flt, al_err *err)
{
	struct evbuffer_iovec v;
	if (evbuffer_peek(in, -1, NULL, &v, 1) < 1 || v.iov_len == 0) {
		/* No contiguous piece at the front: make one. */
		v.iov_len = evbuffer_get_length(in);
		if (v.iov_len > 16384)
			v.iov_len = 16384;
		if (v.iov_len == 0)
			return AL_AGAIN;
		v.iov_base = evbuffer_pullup(in, (ev_ssize_t)v.iov_len);
	}
	const char *p = v.iov_base;
	size_t used = 0, dlen = 0;
	const char *data = NULL;
	int rc = al_httpbody_feed(b, p, v.iov_len, &used, &data, &dlen, err);
	if (rc < 0)
		return -1;
	if (flt->scan != NULL &&
	    gw_cred_body(flt->r->g, flt->scan, &flt->r->req, data, dlen,
			 rc == 0, &flt->status, flt->why) < 0)
		return FORWARD_DENIED;
	if (flt->mask != NULL) {
		framed_out fo = {out, framing};
		if (rc == 0)
			al_credmask_feed_end(flt->mask, data, dlen, put_masked,
					     &fo);
		else
			al_credmask_feed(flt->mask, data, dlen, put_masked,
					 &fo);
		evbuffer_drain(in, used);
	} else if (framing != AL_HTTP_BODY_CHUNKED && dlen == used &&
		   (dlen == 0 || data == p)) {
		evbuffer_remove_buffer(in, out, used);
	} else {
		put_framed(out, framing, data, dlen);
		evbuffer_drain(in, used);
	}
	if (rc == 0 && framing == AL_HTTP_BODY_CHUNKED)
		evbuffer_add(out, AL_HTTPBODY_LAST_CHUNK,
			     strlen(AL_HTTPBODY_LAST_CHUNK));
	return rc;
}

/* ---- the request ---- */

static void response_done(relay *r)
{
	/* The upstream hop keeps alive whatever the guest's does: its
	 * connection is reusable when the whole request went and the whole
	 * response came, and nothing more. */
	bool reuse = r->req_done && r->resp.keep_alive &&
		     r->resp.body != AL_HTTP_BODY_CLOSE && r->up != NULL &&
		     evbuffer_get_length(bufferevent_get_input(r->up)) == 0;
	gw_credreq_end(r->g, &r->cr, &r->req);
	r->mask = NULL;
	al_http_req_free(&r->req);
	r->in_request = false;
	al_http_resp_free(&r->resp);
	r->have_resp = false;
	if (reuse)
		up_park(r);
	else
		up_drop(r);
	if (r->close_after) {
		relay_close(r);
		return;
	}
	al_http_req_parser_init(&r->hp, r->tls);
	r->head_deadline_ms = al_now_ms() + r->g->head_ms;
	bufferevent_enable(r->down, EV_READ);
	try_head(r); /* a pipelined request may be waiting */
	read_buffered(r->down);
}

/* The response head, parsed and re-serialised for the guest: 0, or -1
 * when the relay is done with (answered or cut). */
static int resp_head(relay *r, struct evbuffer *in, struct evbuffer *out)
{
	al_err err;
	size_t len = evbuffer_get_length(in);
	if (len > AL_HTTP_RESP_HEAD_MAX + 4)
		len = AL_HTTP_RESP_HEAD_MAX + 4;
	const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)len);
	size_t head_len;
	int rc = al_http_resp_parse(&r->rp, p, len, &r->req, &r->resp,
				    &head_len, &err);
	if (rc == AL_AGAIN)
		return AL_AGAIN;
	if (rc < 0) {
		gw_note(r->g, "%s: upstream response: %s", r->name, err.msg);
		respond(r, 502, "upstream response refused");
		return -1;
	}
	evbuffer_drain(in, head_len);
	if (r->resp.interim) {
		al_http_resp_free(&r->resp);
		al_http_resp_parser_init(&r->rp);
		return 0;
	}
	char why[AL_POLICY_REASON_MAX];
	if (gw_cred_masker(r->g, &r->mask_own, &r->mask_version, &r->mask) <
		    0 ||
	    gw_cred_response(r->g, &r->cr, &r->req, &r->resp, r->mask, why) <
		    0) {
		al_http_resp_free(&r->resp);
		gw_note(r->g, "%s: %s", r->name, why);
		respond(r, 502, "upstream response refused (credentials)");
		return -1;
	}
	r->have_resp = true;
	if (!r->req_done || !r->req.keep_alive || !r->resp.keep_alive ||
	    r->resp.body == AL_HTTP_BODY_CLOSE)
		r->close_after = true;
	size_t hl;
	char *head = al_http_resp_serialize(&r->resp, r->close_after, &hl,
					    &err);
	if (head == NULL) {
		respond(r, 502, "upstream response refused");
		return -1;
	}
	evbuffer_add(out, head, hl);
	free(head);
	al_httpbody_init(&r->respb, r->resp.body, r->resp.content_length);
	if (r->resp.body == AL_HTTP_BODY_NONE || al_httpbody_done(&r->respb)) {
		response_done(r);
		return -1;
	}
	return 0;
}

static void pump_resp(relay *r)
{
	/* The request's body may have been refused just now (send_head's
	 * pump_body): the upstream is gone then. */
	if (r->up == NULL || r->dead || r->closing)
		return;
	struct evbuffer *in = bufferevent_get_input(r->up);
	struct evbuffer *out = bufferevent_get_output(r->down);
	al_err err;
	while (!r->dead && !r->closing && r->in_request &&
	       evbuffer_get_length(in) > 0) {
		if (!r->have_resp) {
			if (resp_head(r, in, out) != 0)
				return;
			continue;
		}
		body_filter flt = {.r = r, .mask = r->mask};
		int rc = forward_step(in, out, &r->respb, r->resp.body, &flt,
				      &err);
		if (rc < 0) {
			/* Part of the response is with the guest already:
			 * cut the connection, it cannot end cleanly. */
			gw_note(r->g, "%s: upstream body: %s", r->name,
				err.msg);
			relay_kill(r);
			return;
		}
		if (rc == 0) {
			response_done(r);
			return;
		}
		if (full(r->down)) {
			bufferevent_disable(r->up, EV_READ);
			return;
		}
	}
}

static void pump_body(relay *r)
{
	if (!r->in_request || r->req_done || r->up == NULL || r->closing ||
	    r->dead)
		return;
	struct evbuffer *in = bufferevent_get_input(r->down);
	struct evbuffer *out = bufferevent_get_output(r->up);
	al_err err;
	while (evbuffer_get_length(in) > 0) {
		if (full(r->up)) {
			bufferevent_disable(r->down, EV_READ);
			return;
		}
		body_filter flt = {.r = r, .scan = &r->cr};
		int rc = forward_step(in, out, &r->reqb, r->req.body, &flt,
				      &err);
		if (rc == FORWARD_DENIED) {
			/* The upstream never gets the body's end. */
			gw_log(r->g, false, flt.why, r->proto, r->name, r->port,
			       r->req.method, gw_cred_path(&r->cr, &r->req));
			if (r->have_resp) {
				relay_kill(r);
				return;
			}
			respond(r, flt.status, flt.why);
			return;
		}
		if (rc < 0) {
			if (r->have_resp) {
				relay_kill(r);
				return;
			}
			respond(r, 400, err.msg);
			return;
		}
		if (rc == 0) {
			r->req_done = true;
			return;
		}
	}
}

static void send_head(relay *r)
{
	al_err err;
	size_t len;
	/* Keep-alive upstream even when the guest closes after this: the
	 * connection can serve the sandbox's next request (gw/uppool). */
	char *head = al_http_req_serialize(&r->req, false, &len, &err);
	if (head == NULL) {
		respond(r, 400, err.msg);
		return;
	}
	evbuffer_add(bufferevent_get_output(r->up), head, len);
	free(head);
	al_http_resp_parser_init(&r->rp);
	bufferevent_enable(r->up, EV_READ | EV_WRITE);
	pump_body(r);
	if (r->up != NULL)
		coalesce(r->up);
	pump_resp(r);
	read_buffered(r->up);
}

static void on_up_read(struct bufferevent *bev, void *arg)
{
	(void)bev;
	relay *r = arg;
	touch(r);
	pump_resp(r);
	coalesce(r->down);
	read_buffered(r->up);
}

static void on_up_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	relay *r = arg;
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
		return;
	/* What is still buffered first: a CLOSE body ends at EOF. */
	pump_resp(r);
	if (r->closing || !r->in_request)
		return;
	al_err err;
	if (r->have_resp && (what & BEV_EVENT_EOF) &&
	    al_httpbody_eof(&r->respb, &err) == 0) {
		if (r->mask != NULL) {
			framed_out fo = {bufferevent_get_output(r->down),
					 r->resp.body};
			al_credmask_end(r->mask, put_masked, &fo);
		}
		up_drop(r);
		response_done(r);
		return;
	}
	/* A pooled upstream that closed as this request came (its idle
	 * timeout) most likely read none of it: a safe request (GET, HEAD,
	 * OPTIONS: no effect if it did) without a body is sent again, once,
	 * on a new connection, as browsers do. */
	const char *m = r->req.method;
	bool safe = strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 ||
		    strcmp(m, "OPTIONS") == 0;
	bool again = safe && !r->have_resp && r->up_reused &&
		     r->rp.scanned == 0 && r->req.body == AL_HTTP_BODY_NONE &&
		     evbuffer_get_length(bufferevent_get_input(r->up)) == 0;
	up_drop(r);
	if (again) {
		r->up_reused = false;
		r->dial = gw_dial_start(r->g, r->name, r->port, r->proto,
					r->tls, on_dialled, r);
		if (r->dial != NULL)
			return;
	}
	if (!r->have_resp) {
		respond(r, 502, "upstream closed before answering");
		return;
	}
	relay_kill(r); /* the response was cut short */
}

/* bev is this request's upstream now. */
static void up_attach(relay *r, struct bufferevent *bev)
{
	r->up = bev;
	/* Only a write that does not drain times out here: a long upload
	 * reads nothing upstream, and idleness is the tick's (on_tick). */
	struct timeval idle = {r->g->idle_ms / 1000,
			       (r->g->idle_ms % 1000) * 1000};
	bufferevent_set_timeouts(bev, NULL, &idle);
	gw_bev_flow(bev);
	bufferevent_setcb(bev, on_up_read, on_up_drained, on_up_event, r);
	send_head(r);
}

static void on_dialled(void *arg, struct bufferevent *bev,
		       const struct sockaddr *addr, socklen_t addrlen,
		       const char *error)
{
	relay *r = arg;
	r->dial = NULL;
	if (bev == NULL) {
		gw_note(r->g, "%s:%u: %s", r->name, r->port, error);
		respond(r, 502, error);
		return;
	}
	memcpy(&r->up_addr, addr, addrlen);
	r->up_addrlen = addrlen;
	up_attach(r, bev);
}

/* Allowed and injected: answer an Expect, then send the head. */
static void proceed(relay *r)
{
	gw *g = r->g;
	al_http_req *q = &r->req;
	if (q->expect_continue) {
		al_err err;
		size_t len;
		char *cont = al_http_own_response(100, NULL, false, &len, &err);
		if (cont != NULL)
			evbuffer_add(bufferevent_get_output(r->down), cont,
				     len);
		free(cont);
	}
	al_httpbody_init(&r->reqb, q->body, q->content_length);
	r->req_done = q->body == AL_HTTP_BODY_NONE ||
		      al_httpbody_done(&r->reqb);
	r->close_after = false;
	struct bufferevent *kept = al_gw_uppool_take(g->uppool, r->name,
						     r->port, r->tls,
						     &r->up_addr,
						     &r->up_addrlen);
	r->up_reused = kept != NULL;
	if (kept != NULL) {
		up_attach(r, kept);
		return;
	}
	r->dial = gw_dial_start(g, r->name, r->port, r->proto, r->tls,
				on_dialled, r);
	if (r->dial == NULL)
		respond(r, 502, "too many upstream lookups");
}

/* The rate-limit tokens (gw_cred_rate): over the limit, the gateway's
 * own 429 and the upstream is never contacted. */
static void on_rate(void *arg, bool ok, uint32_t retry_after)
{
	relay *r = arg;
	if (r->dead || r->closing)
		return;
	if (ok) {
		proceed(r);
		return;
	}
	gw_log(r->g, false, "credential rate limit", r->proto, r->name, r->port,
	       r->req.method, gw_cred_path(&r->cr, &r->req));
	size_t len;
	char *msg = gw_cred_429(retry_after, &len);
	if (msg != NULL)
		evbuffer_add(bufferevent_get_output(r->down), msg, len);
	free(msg);
	relay_close(r);
}

/* A head is in: bind it to the connection's name, ask the policy. */
static void on_request(relay *r)
{
	gw *g = r->g;
	al_http_req *q = &r->req;
	r->head_deadline_ms = 0;
	char why[AL_POLICY_REASON_MAX];
	if (strcmp(q->host, r->name) != 0 || q->port != r->port) {
		snprintf(why, sizeof why, "Host is not the destination %.90s",
			 r->name);
		gw_log(g, false, why, r->proto, q->host, q->port, q->method,
		       q->path);
		respond(r, 403, "Host is not the destination");
		return;
	}
	if (!gw_decide(g, r->proto, r->name, r->port, q->method, q->path,
		       why)) {
		gw_log(g, false, why, r->proto, r->name, r->port, q->method,
		       q->path);
		respond(r, 403, why);
		return;
	}
	int st;
	char cwhy[AL_POLICY_REASON_MAX];
	if (gw_cred_head(g, &r->cr, q, &st, cwhy) < 0) {
		gw_log(g, false, cwhy, r->proto, r->name, r->port, q->method,
		       gw_cred_path(&r->cr, q));
		respond(r, st, cwhy);
		return;
	}
	gw_log(g, true, why, r->proto, r->name, r->port, q->method,
	       gw_cred_path(&r->cr, q));
	gw_cred_body_start(&r->cr, r->name);
	if (!gw_cred_rate(g, &r->cr, q, on_rate, r))
		proceed(r);
}

static void try_head(relay *r)
{
	if (r->in_request || r->closing || !r->handshaken)
		return;
	struct evbuffer *in = bufferevent_get_input(r->down);
	size_t len = evbuffer_get_length(in);
	if (len == 0)
		return;
	if (len > AL_HTTP_REQ_HEAD_MAX + 4)
		len = AL_HTTP_REQ_HEAD_MAX + 4;
	const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)len);
	size_t head_len;
	al_err err;
	int rc = al_http_req_parse(&r->hp, p, len, &r->req, &head_len, &err);
	if (rc == AL_AGAIN)
		return;
	if (rc < 0) {
		gw_log(r->g, false, err.msg, r->proto, r->name, r->port, NULL,
		       NULL);
		respond(r, r->hp.status, err.msg);
		return;
	}
	evbuffer_drain(in, head_len);
	r->in_request = true;
	on_request(r);
}

static void on_down_read(struct bufferevent *bev, void *arg)
{
	(void)bev;
	relay *r = arg;
	touch(r);
	if (r->in_request)
		pump_body(r);
	else
		try_head(r);
	read_buffered(r->down);
}

static void on_down_event(struct bufferevent *bev, short what, void *arg)
{
	relay *r = arg;
	if (what & BEV_EVENT_CONNECTED) {
		/* TLS is up: the servername callback has already refused a
		 * foreign SNI; an SNI that is not a valid name at all is
		 * refused here. */
		SSL *ssl = bufferevent_openssl_get_ssl(bev);
		const char *sent =
			SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
		const char *sni = al_gw_tls_server_sni(ssl);
		if ((sent != NULL && sni == NULL) ||
		    (sni != NULL && strcmp(sni, r->name) != 0)) {
			gw_log(r->g, false, "SNI is not the destination",
			       r->proto, sent != NULL ? sent : "", r->port,
			       NULL, NULL);
			relay_kill(r);
			return;
		}
		r->handshaken = true;
		touch(r);
		try_head(r);
		read_buffered(r->down);
		return;
	}
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
		return;
	if ((what & BEV_EVENT_EOF) && r->in_request && r->req_done &&
	    !r->closing) {
		/* The guest is done sending (a half-close): it still gets
		 * the answer, then the connection ends. */
		r->close_after = true;
		bufferevent_disable(bev, EV_READ);
		return;
	}
	if (r->tls && !r->handshaken) {
		SSL *ssl = bufferevent_openssl_get_ssl(bev);
		const char *why = al_gw_tls_server_refusal(ssl);
		if (why != NULL && why[0] != '\0') {
			const char *sent = SSL_get_servername(
				ssl, TLSEXT_NAMETYPE_host_name);
			gw_log(r->g, false, why, r->proto,
			       sent != NULL ? sent : r->name, r->port, NULL,
			       NULL);
		}
	}
	relay_kill(r);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	relay *r = arg;
	int64_t now = al_now_ms();
	if (r->head_deadline_ms != 0 && now > r->head_deadline_ms &&
	    !r->in_request && !r->closing) {
		if (r->handshaken &&
		    evbuffer_get_length(bufferevent_get_input(r->down)) > 0) {
			respond(r, 408, "request head too slow");
			return;
		}
		relay_kill(r);
		return;
	}
	if (now - r->last_ms > r->g->idle_ms)
		relay_kill(r);
}

void gw_relay_start(gw *g, int fd, const char *name, unsigned port)
{
	relay *r = calloc(1, sizeof *r);
	if (r == NULL) {
		close(fd);
		gw_conn_closed(g);
		return;
	}
	r->g = g;
	snprintf(r->name, sizeof r->name, "%s", name);
	r->port = port;
	r->tls = port == 443;
	r->proto = r->tls ? AL_EGRESS_HTTPS : AL_EGRESS_HTTP;
	al_err err;
	if (r->tls) {
		SSL *ssl = SSL_new(al_gw_tls_server_ctx(g->tls));
		if (ssl == NULL ||
		    al_gw_tls_server_expect(g->tls, ssl, name, &err) < 0) {
			gw_note(g, "%s: no leaf: %s", name,
				ssl == NULL ? "SSL_new" : err.msg);
			SSL_free(ssl);
			close(fd);
			free(r);
			gw_conn_closed(g);
			return;
		}
		r->down = bufferevent_openssl_socket_new(
			g->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
			BEV_OPT_CLOSE_ON_FREE);
	} else {
		r->down = bufferevent_socket_new(g->base, fd,
						 BEV_OPT_CLOSE_ON_FREE);
		r->handshaken = true;
	}
	r->tick = event_new(g->base, -1, EV_PERSIST, on_tick, r);
	r->reaper = event_new(g->base, -1, 0, on_reap, r);
	if (r->down == NULL || r->tick == NULL || r->reaper == NULL) {
		if (r->down == NULL)
			close(fd);
		destroy(r);
		return;
	}
	struct timeval second = {1, 0};
	event_add(r->tick, &second);
	touch(r);
	r->head_deadline_ms = r->last_ms + g->head_ms;
	al_http_req_parser_init(&r->hp, r->tls);
	gw_bev_flow(r->down);
	bufferevent_setcb(r->down, on_down_read, on_down_drained, on_down_event,
			  r);
	bufferevent_enable(r->down, EV_READ | EV_WRITE);
}
