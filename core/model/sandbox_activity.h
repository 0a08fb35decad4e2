/* sandbox_activity: a sandbox's last activity (sandboxes.last_activity_at:
 * the API calls on it, fcgi/router.c) and what the controller's
 * lifecycle sweep reads of the live sandboxes to decide their idle
 * action and rolling snapshots (controller/lifecycle.c). */
#ifndef AL_SANDBOX_ACTIVITY_H
#define AL_SANDBOX_ACTIVITY_H

#include <json-c/json.h>

#include "base/err.h"
#include "model/db.h"
#include "model/sandbox_state.h"

/* Sandbox id (of project; NULL: any) was active now. Written at most
 * once a second per sandbox (a burst of calls is one write); an unknown
 * or deleted id is no error (its handler answers that). */
int al_sandbox_touch(al_db *db, const char *id, const char *project,
		     al_err *err);

/* A running, paused or suspended sandbox with no operation under way,
 * as the lifecycle sweep sees it. */
typedef struct al_sandbox_idle {
	char id[64];
	char project[64];
	char template_name[64];
	char driver[16];
	al_state state;
	json_object *metadata; /* owned */
	long idle_s;	       /* since last_activity_at */
	/* Since its newest snapshot of any kind (or its creation when it
	 * has none). */
	long snapshot_age_s;
	int streams; /* its stream leases (some may have ended) */
} al_sandbox_idle;

/* The live sandboxes after `after` (an id; "" from the first), in id
 * order, at most max into out: *n of them; free each with
 * al_sandbox_idle_free. */
int al_sandbox_idle_list(al_db *db, const char *after, al_sandbox_idle *out,
			 int max, int *n, al_err *err);
void al_sandbox_idle_free(al_sandbox_idle *s);

#endif
