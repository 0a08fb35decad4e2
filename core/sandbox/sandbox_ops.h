/* sandbox_ops: the operations on a sandbox that every API calls, decided
 * here once: an API handler parses its request, calls one of these and
 * answers what it returns (al_err codes map to HTTP statuses).
 *
 * A create checks the request against the operator's maxima and the
 * host (driver, VM shape, pool room), the project's quotas and its part
 * of the pool, writes the row, starts the shim (a warm standby's claim
 * or a cold start, core/sandbox/shimctl.h) and records it running; whatever
 * fails after the row is written is recorded on the row and the shim is
 * stopped (al_sandbox_start_failed): nothing is left half-made.
 *
 * "project" below is the caller's scope: NULL for an admin key (every
 * project's sandboxes), else the key's project; another project's
 * sandbox is the same AL_ENOENT as an unknown id. */
#ifndef AL_SANDBOX_OPS_H
#define AL_SANDBOX_OPS_H

#include <stdbool.h>

#include "base/config.h"
#include "base/err.h"
#include "base/json.h"
#include "model/auth.h"
#include "model/db.h"
#include "model/sandbox.h"
#include "net/netspec.h"
#include "sandbox/sandbox_req.h"

/* Create the sandbox req asks for, on behalf of caller (its key's
 * project, or for an admin key the request's "project"). req is
 * borrowed; the credentials' placeholders are added to its env. On
 * success *out is the new row, running (free with
 * al_sandbox_free_fields). On failure *retry_after_s is the seconds
 * the client may retry after (a quota, or the host or a service out of
 * room), else 0. */
int al_sandbox_ops_create(const al_config *cfg, al_db *db,
			  const al_identity *caller, al_create_req *req,
			  al_sandbox *out, int *retry_after_s, al_err *err);

/* Delete sandbox id of project: its shim tears it down, and the row is
 * marked deleted at once (also when no shim answers: the controller
 * cleans up what it left). */
int al_sandbox_ops_delete(const al_config *cfg, al_db *db, const char *id,
			  const char *project, al_err *err);

/* Set the network of running sandbox id of project to ns: its shim
 * (and its gateway, which acknowledges it) first, then the row, so that
 * what is recorded is what runs. *gateway: whether a gateway took it
 * (false: the sandbox has none, and only mode none was recorded).
 * AL_ESTATE when it is not running; the shim's refusal relayed. */
int al_sandbox_ops_set_network(const al_config *cfg, al_db *db, const char *id,
			       const char *project, const al_netspec *ns,
			       bool *gateway, al_err *err);

/* 0 when sandbox id of project is running: what an exec or a file
 * transfer needs; a suspended one created with "auto_resume" is resumed
 * first. AL_ENOENT, or AL_ESTATE naming the state it is in (and resume
 * for a paused or suspended one). */
int al_sandbox_ops_running(const al_config *cfg, al_db *db, const char *id,
			   const char *project, al_err *err);

/* A create's statements, run once on a new connection, finding and
 * keeping nothing: PostgreSQL plans them before the first create
 * needs them. */
void al_sandbox_ops_warm(al_db *db, const al_config *cfg);

#endif
