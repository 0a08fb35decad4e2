/* mint: the controller's mint service on <state>/run/mint.sock (one
 * thread): signs leaves for gateways with the host CA (gw/ca.h), wire
 * format in gw/mint.h.
 *
 * Who may ask: the peer's SO_PEERCRED uid must be root or in the gateway
 * uid range [AL_UIDRANGE_GW_BASE, +AL_UIDRANGE_GW_COUNT) (the socket is
 * 0666 so gateways reach it; the uid check is the gate). Each uid is one
 * sandbox's gateway and is charged for what it asks: a token bucket per
 * uid (AL_MINTD_BURST requests, refilled at AL_MINTD_RATE per second), at
 * most AL_MINTD_PER_UID connections open at once, AL_MINTD_CONNS in all,
 * each closed after AL_MINTD_DEADLINE_MS. Leaves are cached per (name,
 * key hash) in an LRU of AL_MINTD_CACHE entries, so the same gateway key
 * asking again costs no signature. */
#ifndef AL_CONTROLLER_MINT_H
#define AL_CONTROLLER_MINT_H

#include "base/err.h"
#include "ca/ca.h"

#define AL_MINTD_BURST 256
#define AL_MINTD_RATE 32
#define AL_MINTD_PER_UID 4
#define AL_MINTD_CONNS 64
#define AL_MINTD_DEADLINE_MS 2000
#define AL_MINTD_CACHE 4096

typedef struct al_mintd al_mintd;

/* Bind <state_dir>/run/mint.sock (replacing a stale one) and start the
 * thread. ca stays owned by the caller and must outlive the service. */
al_mintd *ctl_mintd_start(const char *state_dir, al_ca *ca, al_err *err);
/* Stop the thread, close and unlink the socket. */
void ctl_mintd_stop(al_mintd *m);

#endif
