/* streamlease: which of a sandbox's stream leases (core/model/project.h)
 * still have their stream open, asked of its shim, the one program that
 * sees a stream end; the leases of the ended ones are dropped. Used by
 * fcgi when a project's stream slots are all taken (fcgi/streams.c) and
 * by the controller's idle sweep, for which an open stream is activity
 * (controller/lifecycle_policy.c). */
#ifndef AL_STREAMLEASE_H
#define AL_STREAMLEASE_H

#include <stddef.h>

#include "base/config.h"
#include "base/err.h"
#include "model/db.h"
#include "proto/agentproto.h"

/* Ask sandbox's shim about its n leases (ending those streams with end
 * and message unless end is AL_OK) and drop the leases it no longer
 * has; no shim means none is open. Returns how many are open; -1 (err)
 * when the shim could not tell: nothing dropped. */
int al_streamlease_check(const al_config *cfg, al_db *db, const char *sandbox,
			 char (*lease)[AL_STREAM_LEASE_LEN + 1], size_t n,
			 al_code end, const char *message, al_err *err);

#endif
