/* dial: an upstream connection to a name, never to an address the guest
 * chose: the gateway's own resolver answers, every address is classified
 * (gw/upaddr) and the first one allowed is dialled (IPv4 or IPv6: the
 * same checks for both). An allowed name
 * whose every address is refused (private, loopback, metadata, ...) is a
 * denial, logged. TLS upstreams verify the server for that name against
 * AIRLOCK_UPSTREAM_CA (gw/tls); the callback comes after the handshake. */
#include <arpa/inet.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	struct bufferevent *bev;
};

static void finish(gw_dial *d, struct bufferevent *bev, const char *error)
{
	gw_dial_cb cb = d->cb;
	void *arg = d->arg;
	d->bev = NULL;
	free(d);
	cb(arg, bev, error);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	gw_dial *d = arg;
	if (what & BEV_EVENT_CONNECTED) {
		int one = 1;
		setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY,
			   &one, sizeof one);
		bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
		finish(d, bev, NULL);
		return;
	}
	char why[160];
	unsigned long ssl_err = d->tls ? bufferevent_get_openssl_error(bev) : 0;
	if (ssl_err != 0) {
		char e[120];
		ERR_error_string_n(ssl_err, e, sizeof e);
		snprintf(why, sizeof why, "upstream TLS: %s", e);
	} else {
		snprintf(why, sizeof why, "upstream %s",
			 what & BEV_EVENT_TIMEOUT ? "connect timed out"
						  : "connection failed");
	}
	bufferevent_free(bev);
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
	gw *g = d->g;
	struct bufferevent *bev;
	if (d->tls) {
		SSL *ssl = SSL_new(al_gw_tls_upstream_ctx(g->tls));
		al_err err;
		if (ssl == NULL ||
		    al_gw_tls_upstream_prepare(ssl, d->name, &err) < 0) {
			SSL_free(ssl);
			finish(d, NULL, "upstream TLS setup failed");
			return;
		}
		gw_tlssess_offer(ssl, d->name);
		bev = bufferevent_openssl_socket_new(g->base, -1, ssl,
						     BUFFEREVENT_SSL_CONNECTING,
						     BEV_OPT_CLOSE_ON_FREE);
	} else {
		bev = bufferevent_socket_new(g->base, -1,
					     BEV_OPT_CLOSE_ON_FREE);
	}
	if (bev == NULL) {
		finish(d, NULL, "out of memory");
		return;
	}
	struct sockaddr_storage sa;
	socklen_t sl = al_resolve_addr_sockaddr(r->first_allowed, d->port, &sa);
	struct timeval t = {GW_CONNECT_TIMEOUT_MS / 1000, 0};
	bufferevent_set_timeouts(bev, &t, &t);
	bufferevent_setcb(bev, NULL, NULL, on_event, d);
	d->bev = bev;
	if (bufferevent_socket_connect(bev, (struct sockaddr *)&sa, (int)sl) <
	    0) {
		/* The event callback has not run: fail here. */
		d->bev = NULL;
		bufferevent_free(bev);
		finish(d, NULL, "upstream connect failed");
	}
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
	if (d->bev != NULL)
		bufferevent_free(d->bev);
	free(d);
}
