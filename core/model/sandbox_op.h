/* sandbox_op: the operation under way on a sandbox (pausing, resuming,
 * suspending, snapshotting, forking). It is written before its work
 * starts and cleared with the state it leads to, so that the public
 * state stays the one it was while the work runs, one operation at a
 * time runs on a sandbox, and one left behind by a worker that died is
 * found (al_sandbox_op_stale) and settled by the controller. */
#ifndef AL_SANDBOX_OP_H
#define AL_SANDBOX_OP_H

#include "base/err.h"
#include "model/db.h"
#include "model/sandbox_state.h"

typedef enum al_op {
	AL_OP_PAUSING,
	AL_OP_RESUMING,
	AL_OP_SUSPENDING,
	AL_OP_SNAPSHOTTING,
	AL_OP_FORKING,
	AL_OP_MAX
} al_op;

const char *al_op_name(al_op op);
/* -1 if unknown. */
int al_op_from_name(const char *name);

/* Begin op on sandbox id of project (NULL: any), in one statement: only
 * when no other operation is under way and its state allows op (the
 * event op leads to, in the state table; snapshotting from running or
 * paused, forking from those and suspended). *from gets that state.
 * AL_ENOENT as an unknown id; AL_ESTATE naming the state it is in or
 * the operation under way. */
int al_sandbox_op_begin(al_db *db, const char *id, const char *project,
			al_op op, al_state *from, al_err *err);

/* End op on sandbox id: apply ev (AL_EV_MAX: none, the state stays) with
 * detail and clear the op, in one transaction. AL_ESTATE when op is not
 * the one under way (it was settled meanwhile). */
int al_sandbox_op_end(al_db *db, const char *id, al_op op, al_event ev,
		      const char *detail, al_err *err);

/* al_sandbox_op_end inside the caller's open transaction (a step that
 * writes more with it), the shim now shim_pid when > 0; -1 leaves the
 * transaction for the caller to roll back. */
int al_sandbox_op_end_locked(al_db *db, const char *id, al_op op, al_event ev,
			     const char *detail, int shim_pid, al_err *err);

/* The same as al_sandbox_op_end with ev applied, for a caller that
 * knows the state op began in (from): one statement, one commit. */
int al_sandbox_op_finish(al_db *db, const char *id, al_op op, al_state from,
			 al_event ev, al_err *err);

/* A resume from suspended ended with the sandbox's new shim (shim_pid)
 * running it: the op ends with resume, in one transaction. */
int al_sandbox_op_end_resumed(al_db *db, const char *id, int shim_pid,
			      al_err *err);

/* Operations under way for longer than older_s seconds, at most max:
 * ids into ids, their op into ops; *n of them. */
int al_sandbox_op_stale(al_db *db, int older_s, char (*ids)[64], al_op *ops,
			int max, int *n, al_err *err);

#endif
