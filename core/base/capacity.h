/* capacity: telling a host out of room for one more sandbox apart from
 * a sandbox that failed (what a refusal leaves: al_sandbox_start_failed). */
#ifndef AL_CAPACITY_H
#define AL_CAPACITY_H

#include "base/err.h"

/* Seconds a create refused for capacity is asked to wait (Retry-After):
 * room comes back as sandboxes end, which the client can only poll. */
#define AL_CAPACITY_RETRY_S 2

/* Whether e says the host, or a service it relies on, ran out of room
 * (codes unavailable, out of memory or space, or the errno of an
 * exhausted resource): a refusal the client may retry, not a failure of
 * what it asked for. */
int al_capacity_exhausted(const al_err *e);

#endif
