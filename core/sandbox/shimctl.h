/* shimctl: starting shims, and the client side of a shim's control
 * socket, shared by fcgi workers, the controller and the CLI tests. One
 * connection per request; frames are agentproto frames. What is done with
 * the warm pool's standbys once started is core/sandbox/standby.h's. */
#ifndef AL_SHIMCTL_H
#define AL_SHIMCTL_H

#include <stdint.h>

#include "base/config.h"
#include "base/err.h"
#include "model/db.h"
#include "model/sandbox.h"
#include "model/template.h"
#include "proto/agentproto.h"
#include "sandbox/shimspec.h"

/* Connect to the shim of sandbox id; AL_EUNAVAIL if it is not there. */
int al_shimctl_connect(const al_config *cfg, const char *id, al_err *err);

/* Send one JSON control/request frame and wait for a RESULT or ERROR
 * with the same id (an ERROR frame becomes -1 with its code/message).
 * On success *result is the parsed RESULT object (caller puts it). */
struct json_object;
int al_shimctl_call(int fd, uint16_t type, uint32_t id, struct json_object *req,
		    int64_t deadline_ms, struct json_object **result,
		    al_err *err);
/* The same with the request already packed (NUL-terminated). */
int al_shimctl_call_raw(int fd, uint16_t type, uint32_t id, const char *body,
			int64_t deadline_ms, struct json_object **result,
			al_err *err);

/* Start the detached shim of sandbox sb (its row exists in state
 * creating): double fork, setsid, exec AIRLOCK_LIBEXEC/airlock-shim with
 * sb's spec on its stdin (al_shim_spec_pack, with the boot of sb's
 * template version read from db). Waits until the shim reports the
 * sandbox running (its pid and accelerator into ready) or failed; on
 * failure err holds the shim's reason. The caller records it running
 * (al_sandbox_mark_running). deadline_ms absolute. */
int al_shimctl_spawn(const al_config *cfg, al_db *db, const al_sandbox *sb,
		     int64_t deadline_ms, al_shim_ready *ready, al_err *err);

/* Start n warm pool standbys (at most 16) of version `version` of
 * template tmpl under driver at once (no sandbox row: airlock-shim
 * --standby TMPL, its spec on stdin) and wait for their reports: how
 * many came up; -1 (err: the first failure) when none did. */
int al_shimctl_spawn_standbys(const al_config *cfg, al_db *db, const char *tmpl,
			      int version, const char *driver, int n,
			      int64_t deadline_ms, al_err *err);

/* One request of type to sandbox's shim, sent as AL_REQ_ID_CLIENT and
 * answered by one RESULT: 0 with *result filled (caller frees), or -1
 * with err (an ERROR relayed, al_shimctl_relay_error; AL_EUNAVAIL when
 * the shim is not running). For the API's calls: what the shim or the
 * agent inside says is passed on as the API client may see it. */
int al_shimctl_request(const al_config *cfg, const char *sandbox, uint16_t type,
		       const char *payload, int64_t deadline_ms,
		       al_frame *result, al_err *err);
/* An ERROR frame from a shim into err, relayed. */
void al_shimctl_error_frame(const al_frame *f, al_err *err);
/* An error from a shim or the agent behind it, as an API client may see
 * it: its message printable ASCII (it may come from inside the sandbox),
 * codes the sandbox has no business sending turned into AL_EPROTO. */
void al_shimctl_relay_error(al_err *e);

/* Ask the shim to tear the sandbox down and wait until it has. */
int al_shimctl_destroy(const al_config *cfg, const char *id, al_err *err);

#endif
