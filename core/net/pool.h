/* pool: network slots prepared ahead, leased one per sandbox.
 *
 * A create must not pay for namespaces and rules: slots are prepared
 * off the critical path (al_netpool_prepare, by whoever keeps the warm
 * pool) and taken in microseconds (al_netpool_take: a directory read,
 * a lock, two opens).
 *
 * Where: <state>/run/net/ (root-owned, 0700). Slot i has
 *   <i>.lock   its lock and state (one line, space-padded): "" free,
 *              "prep", "ready <kind> <if>",
 *              "taken <kind> <if>" (if: the link's ifindex in the slot);
 *   <i>.gw, <i>.guest   the bind-mounted namespaces (slot.h);
 *   ready/<kind>.<i>    present while the slot is ready to be taken.
 * A slot index (and so its addresses) is held while an exclusive flock
 * on <i>.lock is: by its preparer while it is made, by its lease for the
 * sandbox's life (the shim; a child that inherits the fd holds it too).
 * A ready slot is held by no one: the state says it is stock. Locks die
 * with their holder, so a crashed preparer or sandbox leaves an unlocked
 * slot that is not "ready": al_netpool_reconcile removes it.
 * Release never recycles a namespace (conntrack, neighbours or a kept
 * socket could carry one sandbox's state to the next): it removes the
 * slot; its index and addresses are prepared afresh later. */
#ifndef AL_NET_POOL_H
#define AL_NET_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "base/addr.h"
#include "base/config.h"
#include "base/err.h"
#include "net/slot.h"

#define AL_NETPOOL_ENV "AIRLOCK_NET_POOL"
/* Never-list, the pool itself and up to this many host addresses. */
#define AL_NETPOOL_DENY_MAX 80

/* Room left in a path for "/ready/vm.<index>". */
#define AL_NETPOOL_DIR_MAX (AL_PATH_MAX - 32)

typedef struct al_netpool {
	char dir[AL_NETPOOL_DIR_MAX];
	al_net_prefix pool;
	uint32_t slots;
	uint32_t cursor; /* where the next prepare starts looking */
	al_net_prefix deny[AL_NETPOOL_DENY_MAX];
	size_t ndeny;
} al_netpool;

typedef struct al_netlease {
	al_netslot slot;
	int lock_fd; /* holds the slot; -1 when none is held */
} al_netlease;

/* Open the pool of state_dir (its run/net is made if missing). pool:
 * a prefix (al_config's net_pool), or NULL for $AIRLOCK_NET_POOL, else
 * AL_NET_POOL_DEFAULT. A pool al_net_pool_parse refuses (net/addr.h),
 * or one that overlaps a route or an address of the calling thread's
 * namespace (the host's), is refused (AL_EINVAL, naming both). The
 * host's addresses join the rules' never-list. */
int al_netpool_open(al_netpool *p, const char *state_dir, const char *pool,
		    al_err *err);
/* Prepare one more ready slot of kind; returns its index, or -1
 * (AL_EUNAVAIL when every index is in use). */
long al_netpool_prepare(al_netpool *p, al_netslot_kind kind, al_err *err);
/* Lease a ready slot of kind: 0; AL_DECLINED when none is ready (the
 * caller prepares one, or waits); -1 on an error. */
int al_netpool_take(al_netpool *p, al_netslot_kind kind, al_netlease *l,
		    al_err *err);
/* al_netpool_take; when none is ready, al_netpool_prepare one first and
 * take that (*prepared = 1): the controller keeps slots ready, and a
 * burst past them (or no controller) costs the caller one prepare.
 * A slot prepared and taken by another meanwhile is prepared again, up
 * to AL_NETPOOL_PREPARES times; then AL_EUNAVAIL. */
#define AL_NETPOOL_PREPARES 4
int al_netpool_lease(al_netpool *p, al_netslot_kind kind, al_netlease *l,
		     int *prepared, al_err *err);
/* A leased slot's namespaces leave the mount table: the lease's fds keep
 * them (its lock keeps the index). Every jail's mount namespace starts
 * as a copy of the host's, so each live sandbox's two bind mounts made
 * every later create slower (hundreds of mounts in a burst). Whoever
 * needs the namespaces by path (a tool, a test) keeps them mounted by
 * not calling this. */
void al_netpool_unpin(al_netpool *p, al_netlease *l);
/* Give the slot back: its namespaces are removed, its index is free. */
void al_netpool_release(al_netpool *p, al_netlease *l);
/* How many slots of kind are ready. */
unsigned al_netpool_ready(const al_netpool *p, al_netslot_kind kind);
/* Remove every slot no live holder has and that is not ready (left by a
 * crash), and ready markers that lie; *cleaned counts the slots. */
int al_netpool_reconcile(al_netpool *p, unsigned *cleaned, al_err *err);
/* Remove every ready slot of kind (a controller that stops). */
void al_netpool_drain(al_netpool *p, al_netslot_kind kind);

#endif
