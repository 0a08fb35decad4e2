/* sandbox internals shared with the modules that write a sandbox's state
 * inside their own transactions (model/sandbox_op.c). */
#ifndef AL_SANDBOX_INTERNAL_H
#define AL_SANDBOX_INTERNAL_H

#include <stdint.h>

#include "base/err.h"
#include "model/db.h"
#include "model/sandbox_state.h"

/* Inside an open transaction: lock id's row, check ev against the state
 * table, write the new state and the event row (at_ms 0: now). -1 with
 * AL_ESTATE (rejected) or AL_ENOENT leaves the transaction usable. */
int al_sandbox_transition_locked(al_db *db, const char *id, al_event ev,
				 const char *detail, int64_t at_ms,
				 al_err *err);

#endif
