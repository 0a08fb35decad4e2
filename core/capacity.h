/* capacity: telling a host out of room for one more sandbox apart from
 * a sandbox that failed, and what a refusal leaves (nothing). */
#ifndef AL_CAPACITY_H
#define AL_CAPACITY_H

#include "db.h"
#include "err.h"

/* Seconds a create refused for capacity is asked to wait (Retry-After):
 * room comes back as sandboxes end, which the client can only poll. */
#define AL_CAPACITY_RETRY_S 2

/* Whether e says the host, or a service it relies on, ran out of room
 * (codes unavailable, out of memory or space, or the errno of an
 * exhausted resource): a refusal the client may retry, not a failure of
 * what it asked for. */
int al_capacity_exhausted(const al_err *e);

/* A start of sandbox id failed with *e: a capacity refusal marks its row
 * deleted (it never existed for the client: no error row stays) and
 * becomes unavailable with *retry_after_s; any other failure marks the
 * row error and stays a server failure (5xx). Either way *e is what the
 * client is answered. */
void al_capacity_start_failed(al_db *db, const char *id, al_err *e,
			      int *retry_after_s);

#endif
