/* shim net: the sandbox's network slot, as its shim holds it.
 *
 * A sandbox with a network (every mode but "none") leases one slot of
 * its driver's kind (core/net/pool.h) before its machine starts: a warm
 * standby when it is made, so a claim pays nothing. A ready slot is
 * taken in microseconds; when the controller has none ready the shim
 * prepares one itself and says so in its start line. The lease (an
 * flock on the slot's lock file) is held for the sandbox's life and
 * released after the machine stopped: the slot's namespaces, tap and
 * rules go with it. A shim that dies drops the lock; the controller's
 * al_netpool_reconcile removes what it left. */
#ifndef AL_SHIM_NET_H
#define AL_SHIM_NET_H

#include <stddef.h>

#include "base/config.h"
#include "base/err.h"
#include "model/sandbox.h"
#include "net/pool.h"

typedef struct shim_net {
	al_netpool pool;
	int pool_open;
	al_netlease lease; /* lock_fd -1: no slot */
	double lease_ms;   /* what getting it cost the start */
	int prepared;	   /* none was ready: this shim prepared it */
} shim_net;

void shim_net_init(shim_net *n);
/* 1 when sandbox sb gets a network slot, 0 for mode "none" (its
 * "network"; allowlist when it names none). */
int shim_net_wanted(const al_sandbox *sb);
/* Lease a slot of kind (al_netslot_kind) for the sandbox, preparing one
 * when none is ready. */
int shim_net_lease(shim_net *n, const al_config *cfg, int kind, al_err *err);
/* The leased slot, NULL without one. */
const al_netslot *shim_net_slot(const shim_net *n);
/* A standby's slot fits a claim for sb: both have one, or neither. */
int shim_net_fits(const shim_net *n, const al_sandbox *sb);
/* ", net 0 (lease 0.05 ms, ready slot #7)" (a slot prepared inline
 * says "prepared"; none: ", net 0 (no network)"), for the start
 * line. */
void shim_net_step(const shim_net *n, char *out, size_t len);
/* Once the machine is up: the slot's namespaces out of the host's mount
 * table, held by the lease's fds (al_netpool_unpin). */
void shim_net_unpin(shim_net *n);
/* Give the slot back (after the machine stopped). Idempotent. */
void shim_net_release(shim_net *n);

#endif
