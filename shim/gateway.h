/* shim gateway: the sandbox's egress gateway process, launched and
 * supervised.
 *
 * Once the sandbox is live (a start, or a claim: a standby has no
 * sandbox to configure its gateway for), the shim takes a gateway uid
 * (al_uidrange_gw, held for the sandbox's life) and starts
 * airlock-gateway on the sandbox's slot (core/net/gwlaunch.h). Its
 * control fd goes to netctl.c (shim_netctl_attach), which sends the
 * first GW_CONFIG and every later one. The gateway is watched through
 * its pidfd. When it dies it is detached and started again after
 * 200 ms, then twice as long each time up to 30 s; the delay goes back
 * to 200 ms once one has run for a minute: bounded restarts. While none
 * runs, nothing listens on the gateway's sockets, so the slot's rules
 * drop every packet of the guest: no egress, fail closed. At the end it
 * is killed and reaped before the slot is released. */
#ifndef AL_SHIM_GATEWAY_H
#define AL_SHIM_GATEWAY_H

#include <poll.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "err.h"
#include "net/gwlaunch.h"
#include "uidrange.h"

#define SHIM_GW_BACKOFF_MIN_MS 200
#define SHIM_GW_BACKOFF_MAX_MS 30000
#define SHIM_GW_STABLE_MS 60000
/* The poll loop's part (relay.c): the gateway's pidfd. */
#define SHIM_WHO_GWPROC (-7)
#define SHIM_GWPROC_POLL_MAX 1

typedef struct shim_gwproc {
	int on; /* the sandbox has a gateway (begun, not ended) */
	const al_netslot *slot;
	char addr[AL_NET_ADDR_STRLEN]; /* the gateway's, in the slot */
	char prog[AL_PATH_MAX];
	al_uidrange uid;
	pid_t pid; /* 0: none runs */
	int pidfd;
	int64_t started_ms, next_start_ms;
	int backoff_ms;
	unsigned starts;
} shim_gwproc;

struct shim;

void shim_gwproc_init(shim_gwproc *g);
/* The sandbox's gateway on slot: the uid taken, the first start due at
 * the relay's next turn (after the create is answered; a failed start
 * is logged and retried, as a death is). -1 when no uid can be had
 * (the start fails). */
int shim_gwproc_begin(struct shim *s, const al_netslot *slot, al_err *err);
int shim_gwproc_poll(struct shim *s, struct pollfd *pfd, int *who, int n);
void shim_gwproc_event(struct shim *s, short revents);
/* ms until the next start is due, or -1. */
int shim_gwproc_timeout(const struct shim *s, int64_t now);
void shim_gwproc_tick(struct shim *s, int64_t now);
/* Kill and reap it, drop the uid, remove its state. Idempotent. */
void shim_gwproc_end(struct shim *s);

#endif
