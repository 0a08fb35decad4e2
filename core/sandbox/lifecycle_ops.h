/* lifecycle_ops: pause, resume (and, as they come, suspend, snapshots,
 * fork) of a sandbox, decided here for every API. Each writes its
 * operation on the row before the work (model/sandbox_op.h: one at a
 * time, the public state unchanged meanwhile) and the state it led to
 * after; the work itself is the shim's (shim/lifecycle.h). project is
 * the caller's scope as in sandbox_ops.h. */
#ifndef AL_LIFECYCLE_OPS_H
#define AL_LIFECYCLE_OPS_H

#include "base/config.h"
#include "base/err.h"
#include "model/db.h"

/* running -> paused, resident: memory stays, the machine stops (vm
 * vCPUs, ns freezer), streams stall, command deadlines stand still.
 * AL_ENOENT; AL_ESTATE when it is not running (or busy). */
int al_lifecycle_pause(const al_config *cfg, al_db *db, const char *id,
		       const char *project, al_err *err);

/* paused -> running. AL_ESTATE when it is not paused (or busy). */
int al_lifecycle_resume(const al_config *cfg, al_db *db, const char *id,
			const char *project, al_err *err);

#endif
