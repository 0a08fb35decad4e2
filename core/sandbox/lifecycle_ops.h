/* lifecycle_ops: pause, resume, suspend (and, as they come, snapshots and
 * fork) of a sandbox, decided here for every API. Each writes its
 * operation on the row before the work (model/sandbox_op.h: one at a
 * time, the public state unchanged meanwhile) and the state it led to
 * after; the machine work is the shim's (shim/lifecycle.h). project is
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

/* paused -> running (the same machine goes on), or suspended -> running
 * (a new shim starts it from its snapshot: the machine's memory where
 * the snapshot holds it, else its files with a fresh boot, *cold = 1).
 * A resume that fails leaves it as it was. AL_ESTATE when it is neither
 * paused nor suspended (or busy); AL_EQUOTA when the project has no
 * room for one more running sandbox. */
int al_lifecycle_resume(const al_config *cfg, al_db *db, const char *id,
			const char *project, int *cold, al_err *err);

/* running|paused -> suspended, durable: the shim saves the sandbox into
 * a snapshot (its files; a vm's memory too) and releases everything
 * else. memory: 1 keep the memory, 0 files only, -1 the driver's way
 * (vm: memory; ns: refused, it must be asked for with 0). AL_EMEMORY
 * when memory cannot be kept (ns), AL_ENOTSUP for a vm without memory;
 * a failure before the snapshot is committed leaves the sandbox running
 * (or paused) as it was, with the reason. *snapshot: its id. */
int al_lifecycle_suspend(const al_config *cfg, al_db *db, const char *id,
			 const char *project, int memory, char snapshot[64],
			 al_err *err);

/* A snapshot of running or paused sandbox id, which goes on as it was:
 * kind "named" (name, or NULL) or "fork"; a vm's memory is in it, an ns
 * sandbox's files only. *snapshot: its id. */
int al_lifecycle_snapshot(const al_config *cfg, al_db *db, const char *id,
			  const char *project, const char *kind,
			  const char *name, char snapshot[64], al_err *err);

/* Delete snapshot snap of project (NULL: any) with its files. AL_ESTATE
 * while a suspended sandbox would resume from it or it is being taken. */
int al_lifecycle_snapshot_delete(const al_config *cfg, al_db *db,
				 const char *snap, const char *project,
				 al_err *err);

#endif
