/* gw/uppool: idle upstream connections by key (see uppool.h). A list,
 * most recently parked first: a gateway parks tens at most, and a take
 * that walks them costs far less than the handshake it saves. Idle
 * expiry is each parked bufferevent's read timeout; any byte, EOF or
 * error while parked drops the connection (an upstream out of step, or
 * one that closed it). */
#include "gw/uppool.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>

#include "gw/http.h"

typedef struct parked {
	struct parked *prev, *next;
	al_gw_uppool *pool;
	struct bufferevent *bev;
	char name[AL_HTTP_HOST_MAX];
	unsigned port;
	bool tls;
	struct sockaddr_storage addr;
	socklen_t addrlen;
} parked;

struct al_gw_uppool {
	struct event_base *base;
	al_gw_uppool_config cfg;
	parked *head, *tail; /* head: the most recently parked */
	size_t n;
};

al_gw_uppool *al_gw_uppool_new(struct event_base *base,
			       const al_gw_uppool_config *cfg, al_err *err)
{
	if (base == NULL || cfg == NULL || cfg->max == 0 || cfg->idle_ms <= 0) {
		al_err_set(err, AL_EINVAL, 0, "upstream pool: bad bounds");
		return NULL;
	}
	al_gw_uppool *p = calloc(1, sizeof *p);
	if (p == NULL) {
		al_err_set(err, AL_ENOMEM, 0, "upstream pool");
		return NULL;
	}
	p->base = base;
	p->cfg = *cfg;
	return p;
}

static void release(al_gw_uppool *p, struct bufferevent *bev)
{
	if (p->cfg.release != NULL)
		p->cfg.release(bev);
	else
		bufferevent_free(bev);
}

static void unlink_entry(parked *e)
{
	al_gw_uppool *p = e->pool;
	if (e->prev != NULL)
		e->prev->next = e->next;
	else
		p->head = e->next;
	if (e->next != NULL)
		e->next->prev = e->prev;
	else
		p->tail = e->prev;
	p->n--;
}

/* Out of the pool, the connection closed. */
static void drop(parked *e)
{
	unlink_entry(e);
	bufferevent_setcb(e->bev, NULL, NULL, NULL, NULL);
	release(e->pool, e->bev);
	free(e);
}

static void on_parked_read(struct bufferevent *bev, void *arg)
{
	(void)bev;
	drop(arg); /* bytes nobody asked for */
}

static void on_parked_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what; /* EOF, error or the idle timeout: all end it */
	drop(arg);
}

/* Bytes received and not yet read by the caller: in the bufferevent's
 * input, or decrypted already inside OpenSSL (which no readable event
 * would ever bring out while parked). */
static bool unread(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	return evbuffer_get_length(bufferevent_get_input(bev)) > 0 ||
	       (ssl != NULL && SSL_has_pending(ssl));
}

void al_gw_uppool_put(al_gw_uppool *p, const al_gw_upkey *key,
		      struct bufferevent *bev)
{
	if (bev == NULL)
		return;
	parked *e = NULL;
	if (key->name != NULL && strlen(key->name) < AL_HTTP_HOST_MAX &&
	    key->addr != NULL && key->addrlen <= sizeof e->addr && !unread(bev))
		e = calloc(1, sizeof *e);
	if (e == NULL) {
		bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
		release(p, bev);
		return;
	}
	if (p->n >= p->cfg.max)
		drop(p->tail);
	e->pool = p;
	e->bev = bev;
	strcpy(e->name, key->name);
	e->port = key->port;
	e->tls = key->tls;
	memcpy(&e->addr, key->addr, key->addrlen);
	e->addrlen = key->addrlen;
	e->next = p->head;
	if (p->head != NULL)
		p->head->prev = e;
	else
		p->tail = e;
	p->head = e;
	p->n++;
	struct timeval idle = {p->cfg.idle_ms / 1000,
			       (p->cfg.idle_ms % 1000) * 1000};
	bufferevent_setwatermark(bev, EV_READ, 0, 0);
	bufferevent_set_timeouts(bev, &idle, NULL);
	bufferevent_setcb(bev, on_parked_read, NULL, on_parked_event, e);
	bufferevent_disable(bev, EV_WRITE);
	bufferevent_enable(bev, EV_READ);
}

struct bufferevent *al_gw_uppool_take(al_gw_uppool *p, const char *name,
				      unsigned port, bool tls,
				      struct sockaddr_storage *addr,
				      socklen_t *addrlen)
{
	parked *e = p->head;
	while (e != NULL) {
		parked *next = e->next;
		if (e->port != port || e->tls != tls ||
		    strcmp(e->name, name) != 0) {
			e = next;
			continue;
		}
		if (p->cfg.classify != NULL &&
		    al_upaddr_check(p->cfg.classify,
				    (const struct sockaddr *)&e->addr) !=
			    NULL) {
			drop(e);
			e = next;
			continue;
		}
		struct bufferevent *bev = e->bev;
		bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
		bufferevent_disable(bev, EV_READ | EV_WRITE);
		bufferevent_set_timeouts(bev, NULL, NULL);
		if (addr != NULL)
			memcpy(addr, &e->addr, e->addrlen);
		if (addrlen != NULL)
			*addrlen = e->addrlen;
		unlink_entry(e);
		free(e);
		return bev;
	}
	return NULL;
}

void al_gw_uppool_clear(al_gw_uppool *p)
{
	while (p->head != NULL)
		drop(p->head);
}

size_t al_gw_uppool_count(const al_gw_uppool *p)
{
	return p->n;
}

void al_gw_uppool_free(al_gw_uppool *p)
{
	if (p == NULL)
		return;
	al_gw_uppool_clear(p);
	free(p);
}
