/* fork_ops: a sandbox forked into count new ones (POST
 * /v1/sandboxes/{id}/fork), decided here for every API. The parent is
 * snapshotted (kind fork: a vm's memory with its files, an ns sandbox's
 * files), pausing it only for the capture, and each child is created
 * from that snapshot as POST /v1/sandboxes {"snapshot"} would: its own
 * id, hostname, network slot, gateway and entropy, the parent's env,
 * metadata, network setting and limits. A suspended parent's children
 * start from the snapshot it resumes from. */
#ifndef AL_FORK_OPS_H
#define AL_FORK_OPS_H

#include <stdint.h>

#include <json-c/json.h>

#include "base/config.h"
#include "base/err.h"
#include "model/auth.h"
#include "model/db.h"

#define AL_FORK_MAX 10

/* Fork sandbox id (of caller's scope project) into count (1 to
 * AL_FORK_MAX) children living timeout_s each (0: the operator's
 * default). *out: {"parent":id,"snapshot":"...","sandboxes":[child or
 * {"error":{code,message}}, ...]}, one entry per child asked for. -1
 * (err) only when no child was made: the first child's error, or why
 * the parent could not be snapshotted. */
int al_fork_ops_fork(const al_config *cfg, al_db *db, const al_identity *caller,
		     const char *id, const char *project, int count,
		     uint32_t timeout_s, json_object **out, al_err *err);

#endif
