/* gw/uppool: the gateway's idle upstream connections, kept after a
 * response ended cleanly and handed to the next request for the same
 * upstream, from any guest connection of the sandbox (one gateway serves
 * one sandbox: nothing is shared between tenants).
 *
 * A connection is parked under its key: the canonical name it was
 * dialled (and, for TLS, verified) for, the port, TLS or plain, and the
 * exact address it is connected to. Only the caller decides what may be
 * parked (a response fully read, both sides keeping alive, nothing more
 * buffered); the pool drops a parked connection that sends anything,
 * closes, fails, or stays idle for idle_ms, and the oldest one when a
 * put finds max parked already. A take re-checks the parked address
 * with the classifier (gw/upaddr), and the caller re-checks the policy
 * for every request as before: a parked connection carries no decision.
 * Single-threaded, on the caller's event_base. */
#ifndef AL_GW_UPPOOL_H
#define AL_GW_UPPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "base/err.h"
#include "gw/upaddr.h"

struct bufferevent;
struct event_base;

typedef struct al_gw_uppool al_gw_uppool;

typedef struct al_gw_uppool_config {
	unsigned max; /* connections parked at most (>= 1) */
	long idle_ms; /* a parked connection idle this long is closed */
	const al_upaddr *classify; /* not owned; NULL: no re-check */
	/* How a dropped connection is freed (NULL: bufferevent_free); the
	 * gateway keeps the TLS session resumable first. */
	void (*release)(struct bufferevent *bev);
} al_gw_uppool_config;

/* What a connection is parked under. */
typedef struct al_gw_upkey {
	const char *name; /* canonical */
	unsigned port;
	bool tls;
	const struct sockaddr *addr; /* connected to */
	socklen_t addrlen;
} al_gw_upkey;

/* A pool; NULL and AL_EINVAL / AL_ENOMEM. */
al_gw_uppool *al_gw_uppool_new(struct event_base *base,
			       const al_gw_uppool_config *cfg, al_err *err);
/* Closes every parked connection. */
void al_gw_uppool_free(al_gw_uppool *p);

/* Park bev under key: the pool owns it from now on (its callbacks and
 * timeouts are the pool's). A key whose name or address does not fit,
 * a bev with bytes unread (in its input, or inside OpenSSL), or a pool
 * that cannot, releases bev at once. */
void al_gw_uppool_put(al_gw_uppool *p, const al_gw_upkey *key,
		      struct bufferevent *bev);
/* The most recently parked connection for name, port and tls whose
 * address the classifier still allows (one it refuses is closed), or
 * NULL. The caller owns it, with no callbacks and no timeouts set, and
 * reading disabled. addr/addrlen (may be NULL): its address. */
struct bufferevent *al_gw_uppool_take(al_gw_uppool *p, const char *name,
				      unsigned port, bool tls,
				      struct sockaddr_storage *addr,
				      socklen_t *addrlen);
/* Close every parked connection (the network's configuration changed). */
void al_gw_uppool_clear(al_gw_uppool *p);
/* Connections parked now. */
size_t al_gw_uppool_count(const al_gw_uppool *p);

#endif
