/* dial: an upstream connection to a name (see dial.c). */
#ifndef AL_GATEWAY_DIAL_H
#define AL_GATEWAY_DIAL_H

#include <stdbool.h>
#include <sys/socket.h>

#include "gw.h"
#include "gw/http.h"

struct bufferevent;

typedef struct gw_dial gw_dial;

/* bev: connected (TLS: handshake done, server verified for the name),
 * owned by the callee from now on, no callbacks or timeouts set, to the
 * address addr (valid during the call); or NULL and error (printable,
 * for the guest's 502 and the log). */
typedef void (*gw_dial_cb)(void *arg, struct bufferevent *bev,
			   const struct sockaddr *addr, socklen_t addrlen,
			   const char *error);

/* Resolve name and dial port; cb is called once, always later from the
 * loop, unless cancelled. NULL when the lookup cannot start (too many at
 * once): cb is then never called. proto: what a refused address is
 * logged as. */
gw_dial *gw_dial_start(gw *g, const char *name, unsigned port,
		       enum al_egress_proto proto, bool tls, gw_dial_cb cb,
		       void *arg);
/* Drop a dial whose callback has not run yet. */
void gw_dial_cancel(gw_dial *d);

#endif
