/* shim gateway: the sandbox's egress gateway process, launched and
 * supervised.
 *
 * Once the sandbox is live (a start, or a claim: a standby has no
 * sandbox to configure its gateway for), the shim takes a gateway uid
 * (al_uidrange_gw, held for the sandbox's life) and makes the gateway's
 * sockets on the sandbox's slot (al_gateway_sockets), which it holds
 * for the sandbox's life. The gateway itself starts when the guest
 * first uses them (a DNS query or a connection waits in one) or when a
 * network change needs it, not on the create's path: a burst of
 * creates pays no gateway exec, library load and policy load each
 * (about a third of a create's CPU here), and a sandbox that never
 * reaches out never runs one. What the guest sent first waits in the
 * sockets' queues and is the new gateway's first read; until then
 * nothing is forwarded anywhere: fail closed.
 * airlock-gateway runs on those sockets (core/net/gwlaunch.h). The
 * calls that may start one return its control fd, which the caller hands
 * to netctl.c (shim_netctl_started): it sends the first GW_CONFIG and
 * every later one; a death is reported the same way, for netctl to
 * detach. This module knows nothing else of the shim. The gateway is watched through
 * its pidfd. When it dies it is detached and started again after
 * 200 ms, then twice as long each time up to 30 s; the delay goes back
 * to 200 ms once one has run for a minute: bounded restarts. While none
 * runs, the guest's packets wait in the held sockets (or are dropped
 * once their queues are full) and nothing is forwarded: no egress, fail
 * closed. At the end it is killed and reaped before the slot is
 * released. */
#ifndef AL_SHIM_GATEWAY_H
#define AL_SHIM_GATEWAY_H

#include <poll.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/config.h"
#include "base/err.h"
#include "host/uidrange.h"
#include "net/gwlaunch.h"

#define SHIM_GW_BACKOFF_MIN_MS 200
#define SHIM_GW_BACKOFF_MAX_MS 30000
#define SHIM_GW_STABLE_MS 60000
/* The poll loop's part (relay.c): the gateway's pidfd. */
#define SHIM_WHO_GWPROC (-7)
/* The pidfd of a running gateway, or the three sockets before the first
 * starts. */
#define SHIM_GWPROC_POLL_MAX 3

typedef struct shim_gwproc {
	int on; /* the sandbox has a gateway (begun, not ended) */
	const al_config *cfg;
	const char *sandbox; /* its id (the shim's, outlives this) */
	const al_netslot *slot;
	char addr[AL_NET_ADDR_STRLEN]; /* the gateway's, in the slot */
	char prog[AL_PATH_MAX];
	al_uidrange uid;
	pid_t pid; /* 0: none runs */
	int pidfd;
	int64_t started_ms, next_start_ms;
	int backoff_ms;
	unsigned starts;
	/* The slot's gateway sockets (held for the sandbox's life), -1 when
	 * they could not be made (each launch then makes its own). */
	int socks[3];
} shim_gwproc;

void shim_gwproc_init(shim_gwproc *g);
/* The gateway of sandbox on slot: the uid taken and its sockets made; the
 * first start waits for the guest's first use of them (a failed start
 * is logged and retried, as a death is). -1 when no uid can be had
 * (the start fails). cfg and sandbox must outlive g. */
int shim_gwproc_begin(shim_gwproc *g, const al_config *cfg, const char *sandbox,
		      const al_netslot *slot, al_err *err);
/* Start it now if it has not started yet (a network change must reach
 * it): the control fd of the gateway started by this call, else -1. */
int shim_gwproc_wake(shim_gwproc *g);
/* The poll loop's part. event and tick return the control fd of a
 * gateway they started, else -1; event sets *died when the running one
 * ended (its control channel is to be detached). */
int shim_gwproc_poll(const shim_gwproc *g, struct pollfd *pfd, int *who, int n);
int shim_gwproc_event(shim_gwproc *g, short revents, int *died);
/* ms until the next start is due, or -1. */
int shim_gwproc_timeout(const shim_gwproc *g, int64_t now);
int shim_gwproc_tick(shim_gwproc *g, int64_t now);
/* Kill and reap it, drop the uid, remove its state. Idempotent; its
 * control channel is detached first by the caller. */
void shim_gwproc_end(shim_gwproc *g);

#endif
