/* dial: an upstream connection to a name, never to an address the guest
 * chose: the gateway's own resolver answers, every address is classified
 * (gw/upaddr) and the allowed ones are tried in the resolver's order
 * (IPv4, then IPv6: the same checks for both), each given
 * GW_CONNECT_ADDR_TIMEOUT_MS to accept the TCP connection before the
 * next is tried. An allowed name whose every address is refused
 * (private, loopback, metadata, ...) is a denial, logged. TLS upstreams
 * verify the server for that name against AIRLOCK_UPSTREAM_CA (gw/tls)
 * on the first address that accepted (a server that answers and then
 * fails the handshake is an answer, not a dead address); the callback
 * comes after the handshake. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dial.h"
#include "tlssess.h"

struct gw_dial {
	gw *g;
	char name[AL_HTTP_HOST_MAX];
	unsigned port;
	enum al_egress_proto proto;
	bool tls;
	gw_dial_cb cb;
	void *arg;
	al_resolve_req *rq;
	/* The allowed addresses, tried from next on. */
	struct sockaddr_storage addrs[AL_RESOLVE_ADDRS_MAX];
	socklen_t lens[AL_RESOLVE_ADDRS_MAX];
	size_t n, next;
	int fd;		    /* the TCP connect under way, -1: none */
	struct event *conn; /* its writability, with the address's timeout */
	char last[80];	    /* why the last address failed */
	struct bufferevent *bev; /* TLS: the handshake under way */
};

static void finish(gw_dial *d, struct bufferevent *bev, const char *error)
{
	gw_dial_cb cb = d->cb;
	void *arg = d->arg;
	/* A connection is to the address tried last. */
	struct sockaddr_storage sa;
	socklen_t sl = 0;
	if (bev != NULL) {
		sl = d->lens[d->next - 1];
		memcpy(&sa, &d->addrs[d->next - 1], sl);
	}
	d->bev = NULL;
	gw_dial_cancel(d);
	cb(arg, bev, bev != NULL ? (const struct sockaddr *)&sa : NULL, sl,
	   error);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	gw_dial *d = arg;
	if (what & BEV_EVENT_CONNECTED) {
		bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
		bufferevent_set_timeouts(bev, NULL, NULL);
		finish(d, bev, NULL);
		return;
	}
	char why[160];
	unsigned long ssl_err = bufferevent_get_openssl_error(bev);
	if (ssl_err != 0) {
		char e[120];
		ERR_error_string_n(ssl_err, e, sizeof e);
		snprintf(why, sizeof why, "upstream TLS: %s", e);
	} else {
		snprintf(why, sizeof why, "upstream TLS: %s",
			 what & BEV_EVENT_TIMEOUT ? "handshake timed out"
						  : "connection failed");
	}
	bufferevent_free(bev);
	d->bev = NULL;
	finish(d, NULL, why);
}

/* TCP is up on d->fd: hand it over (plain) or start TLS. */
static void connected(gw_dial *d)
{
	int fd = d->fd;
	d->fd = -1;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	gw *g = d->g;
	struct bufferevent *bev;
	if (!d->tls) {
		bev = bufferevent_socket_new(g->base, fd,
					     BEV_OPT_CLOSE_ON_FREE);
		if (bev == NULL) {
			close(fd);
			finish(d, NULL, "out of memory");
			return;
		}
		finish(d, bev, NULL);
		return;
	}
	SSL *ssl = SSL_new(al_gw_tls_upstream_ctx(g->tls));
	al_err err;
	if (ssl == NULL || al_gw_tls_upstream_prepare(ssl, d->name, &err) < 0) {
		SSL_free(ssl);
		close(fd);
		finish(d, NULL, "upstream TLS setup failed");
		return;
	}
	gw_tlssess_offer(ssl, d->name);
	bev = bufferevent_openssl_socket_new(g->base, fd, ssl,
					     BUFFEREVENT_SSL_CONNECTING,
					     BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL) {
		SSL_free(ssl);
		close(fd);
		finish(d, NULL, "out of memory");
		return;
	}
	struct timeval t = {GW_CONNECT_TIMEOUT_MS / 1000, 0};
	bufferevent_set_timeouts(bev, &t, &t);
	bufferevent_setcb(bev, NULL, NULL, on_event, d);
	d->bev = bev;
	bufferevent_enable(bev, EV_READ | EV_WRITE);
}

static void try_next(gw_dial *d);

static void on_connect(evutil_socket_t fd, short what, void *arg)
{
	gw_dial *d = arg;
	event_free(d->conn);
	d->conn = NULL;
	int e = 0;
	socklen_t el = sizeof e;
	if (what & EV_TIMEOUT)
		e = ETIMEDOUT;
	else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
		e = errno;
	if (e == 0) {
		connected(d);
		return;
	}
	snprintf(d->last, sizeof d->last, "%s", strerror(e));
	close(d->fd);
	d->fd = -1;
	try_next(d);
}

/* Connect to the next allowed address; past the last, fail. */
static void try_next(gw_dial *d)
{
	while (d->next < d->n) {
		size_t i = d->next++;
		const struct sockaddr *sa =
			(const struct sockaddr *)&d->addrs[i];
		int fd = socket(sa->sa_family,
				SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			snprintf(d->last, sizeof d->last, "socket: %s",
				 strerror(errno));
			continue;
		}
		d->fd = fd;
		if (connect(fd, sa, d->lens[i]) == 0) {
			connected(d);
			return;
		}
		int e = errno;
		if (e == EINPROGRESS) {
			struct timeval t = {GW_CONNECT_ADDR_TIMEOUT_MS / 1000,
					    (GW_CONNECT_ADDR_TIMEOUT_MS %
					     1000) * 1000};
			d->conn = event_new(d->g->base, fd, EV_WRITE,
					    on_connect, d);
			if (d->conn != NULL && event_add(d->conn, &t) == 0)
				return;
			if (d->conn != NULL)
				event_free(d->conn);
			d->conn = NULL;
		}
		snprintf(d->last, sizeof d->last, "%s", strerror(e));
		close(fd);
		d->fd = -1;
	}
	char why[160];
	snprintf(why, sizeof why, "upstream connection failed: %s", d->last);
	finish(d, NULL, why);
}

static void on_resolved(const al_resolve_result *r, void *arg)
{
	gw_dial *d = arg;
	d->rq = NULL;
	if (r->status != 0) {
		char why[160];
		snprintf(why, sizeof why, "upstream lookup: %s",
			 r->error != NULL ? r->error : "failed");
		finish(d, NULL, why);
		return;
	}
	if (r->first_allowed == NULL) {
		char why[AL_POLICY_REASON_MAX];
		snprintf(why, sizeof why, "upstream address refused: %s",
			 r->addrs[0].deny);
		gw_log(d->g, false, why, d->proto, d->name, d->port, NULL,
		       NULL);
		finish(d, NULL, why);
		return;
	}
	for (size_t i = 0; i < r->n && i < AL_RESOLVE_ADDRS_MAX; i++)
		if (r->addrs[i].deny == NULL) {
			d->lens[d->n] = al_resolve_addr_sockaddr(
				&r->addrs[i], d->port, &d->addrs[d->n]);
			d->n++;
		}
	try_next(d);
}

gw_dial *gw_dial_start(gw *g, const char *name, unsigned port,
		       enum al_egress_proto proto, bool tls, gw_dial_cb cb,
		       void *arg)
{
	gw_dial *d = calloc(1, sizeof *d);
	if (d == NULL)
		return NULL;
	d->g = g;
	snprintf(d->name, sizeof d->name, "%s", name);
	d->port = port;
	d->proto = proto;
	d->tls = tls;
	d->cb = cb;
	d->arg = arg;
	d->fd = -1;
	snprintf(d->last, sizeof d->last, "no address");
	al_err err;
	d->rq = al_resolve(g->resolver, name, on_resolved, d, &err);
	if (d->rq == NULL) {
		free(d);
		return NULL;
	}
	return d;
}

void gw_dial_cancel(gw_dial *d)
{
	if (d == NULL)
		return;
	if (d->rq != NULL)
		al_resolve_cancel(d->rq);
	if (d->conn != NULL)
		event_free(d->conn);
	if (d->fd >= 0)
		close(d->fd);
	if (d->bev != NULL)
		bufferevent_free(d->bev);
	free(d);
}
