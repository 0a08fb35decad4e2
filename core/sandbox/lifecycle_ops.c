/* Lifecycle operations (lifecycle_ops.h). */
#include "sandbox/lifecycle_ops.h"

#include "base/clock.h"
#include "base/log.h"
#include "model/sandbox_op.h"
#include "proto/agentproto.h"
#include "sandbox/shimctl.h"

/* The shim answers a pause once its agent did (SHIM_PAUSE_MS at most)
 * and the machine stopped. */
#define PAUSE_DEADLINE_MS 8000

/* Ask the shim of id for type, with op begun on the row; end op with ev
 * when the shim did it, else with no change. */
static int shim_op(const al_config *cfg, al_db *db, const char *id,
		   const char *project, al_op op, uint16_t type, al_event ev,
		   al_err *err)
{
	al_state from;
	if (al_sandbox_op_begin(db, id, project, op, &from, err) < 0)
		return -1;
	al_frame res = {0};
	int rc = al_shimctl_request(cfg, id, type, "{}",
				    al_now_ms() + PAUSE_DEADLINE_MS, &res, err);
	al_frame_free(&res);
	al_err e2 = {0};
	if (al_sandbox_op_end(db, id, op, rc == 0 ? ev : AL_EV_MAX, NULL, &e2) <
	    0) {
		/* The controller settles the row from the shim's STATUS. */
		al_warn("sandbox %s: ending %s: %s", id, al_op_name(op),
			e2.msg);
		if (rc == 0) {
			*err = e2;
			return -1;
		}
	}
	if (rc == 0)
		al_info("sandbox %s: %s", id, al_event_name(ev));
	return rc;
}

int al_lifecycle_pause(const al_config *cfg, al_db *db, const char *id,
		       const char *project, al_err *err)
{
	return shim_op(cfg, db, id, project, AL_OP_PAUSING, AL_F_PAUSE,
		       AL_EV_PAUSE, err);
}

int al_lifecycle_resume(const al_config *cfg, al_db *db, const char *id,
			const char *project, al_err *err)
{
	return shim_op(cfg, db, id, project, AL_OP_RESUMING, AL_F_RESUME,
		       AL_EV_RESUME, err);
}
