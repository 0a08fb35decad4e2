/* shimctl: the client side of a shim's control socket, shared by fcgi
 * workers, the controller and the CLI tests. One connection per request;
 * frames are agentproto frames. */
#ifndef AL_SHIMCTL_H
#define AL_SHIMCTL_H

#include <stdint.h>

#include "agentproto.h"
#include "config.h"
#include "err.h"

/* Connect to the shim of sandbox id; AL_EUNAVAIL if it is not there. */
int al_shimctl_connect(const al_config *cfg, const char *id, al_err *err);

/* Send one JSON control/request frame and wait for a RESULT or ERROR
 * with the same id (an ERROR frame becomes -1 with its code/message).
 * On success *result is the parsed RESULT object (caller puts it). */
struct json_object;
int al_shimctl_call(int fd, uint16_t type, uint32_t id,
		    struct json_object *req, int64_t deadline_ms,
		    struct json_object **result, al_err *err);

/* Start the detached shim of sandbox id (its row must exist in state
 * creating): double fork, setsid, exec AIRLOCK_LIBEXEC/airlock-shim.
 * Waits until the shim reports the sandbox running (agent said HELLO) or
 * failed; on failure err holds the shim's reason. deadline_ms absolute. */
int al_shimctl_spawn(const al_config *cfg, const char *id,
		     int64_t deadline_ms, al_err *err);

/* Start n warm pool standbys (at most 16) of template tmpl under driver
 * at once (no sandbox row yet: airlock-shim --standby TMPL --driver
 * DRIVER) and wait for their reports: how many came up; -1 (err: the
 * first failure) when none did. */
int al_shimctl_spawn_standbys(const al_config *cfg, const char *tmpl,
			      const char *driver, int n, int64_t deadline_ms,
			      al_err *err);
/* Standbys of (tmpl, driver) waiting in run/pool that hold template
 * version `version` (0: any version). */
int al_shimctl_standby_count(const al_config *cfg, const char *tmpl,
			     const char *driver, int version);
/* Destroy the standbys of (tmpl, driver) that hold another template
 * version than version (the template was rebuilt; -1: all of them);
 * returns how many. */
int al_shimctl_retire_standbys(const al_config *cfg, const char *tmpl,
			       const char *driver, int version);
/* Destroy n of the standbys of (tmpl, driver), whichever (the pool
 * shrinks); returns how many. */
int al_shimctl_retire_some(const al_config *cfg, const char *tmpl,
			   const char *driver, int n);
/* Bring sandbox id (row in state creating, template tmpl, driver) to
 * running: claim a warm standby of the same template and driver if one
 * is waiting (milliseconds), else start a shim cold (al_shimctl_spawn). */
int al_shimctl_start(const al_config *cfg, const char *id, const char *tmpl,
		     const char *driver, int64_t deadline_ms, al_err *err);

/* Ask the shim to tear the sandbox down and wait until it has. */
int al_shimctl_destroy(const al_config *cfg, const char *id, al_err *err);

#endif
