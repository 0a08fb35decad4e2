/* The sandbox lifecycle: state and event names and the table of
 * transitions (sandbox_state.h). */
#include "model/sandbox_state.h"

#include <string.h>

/* clang-format off */
static const char *const state_names[AL_ST_MAX] = {
	[AL_ST_CREATING] = "creating", [AL_ST_RUNNING] = "running",
	[AL_ST_PAUSED] = "paused",     [AL_ST_SUSPENDED] = "suspended",
	[AL_ST_ERROR] = "error",       [AL_ST_DELETED] = "deleted",
};

static const char *const event_names[AL_EV_MAX] = {
	[AL_EV_READY] = "ready",     [AL_EV_PAUSE] = "pause",
	[AL_EV_RESUME] = "resume",   [AL_EV_SUSPEND] = "suspend",
	[AL_EV_FAIL] = "fail",	     [AL_EV_DELETE] = "delete",
};

/* The lifecycle: handlers[state][event] is the next state or REJECT.
 * Every cell is written out so that adding a state or an event forces a
 * decision for each combination. */
#define REJECT (-1)
static const int handlers[AL_ST_MAX][AL_EV_MAX] = {
	[AL_ST_CREATING] = {
		[AL_EV_READY] = AL_ST_RUNNING,
		[AL_EV_PAUSE] = REJECT,
		[AL_EV_RESUME] = REJECT,
		[AL_EV_SUSPEND] = REJECT,
		[AL_EV_FAIL] = AL_ST_ERROR,
		[AL_EV_DELETE] = AL_ST_DELETED,
	},
	[AL_ST_RUNNING] = {
		[AL_EV_READY] = REJECT,
		[AL_EV_PAUSE] = AL_ST_PAUSED,
		[AL_EV_RESUME] = REJECT,
		[AL_EV_SUSPEND] = AL_ST_SUSPENDED,
		[AL_EV_FAIL] = AL_ST_ERROR,
		[AL_EV_DELETE] = AL_ST_DELETED,
	},
	[AL_ST_PAUSED] = {
		[AL_EV_READY] = REJECT,
		[AL_EV_PAUSE] = REJECT,
		[AL_EV_RESUME] = AL_ST_RUNNING,
		[AL_EV_SUSPEND] = AL_ST_SUSPENDED,
		[AL_EV_FAIL] = AL_ST_ERROR,
		[AL_EV_DELETE] = AL_ST_DELETED,
	},
	[AL_ST_SUSPENDED] = {
		[AL_EV_READY] = REJECT,
		[AL_EV_PAUSE] = REJECT,
		[AL_EV_RESUME] = AL_ST_RUNNING,
		[AL_EV_SUSPEND] = REJECT,
		/* Nothing runs while suspended, so nothing can fail. */
		[AL_EV_FAIL] = REJECT,
		[AL_EV_DELETE] = AL_ST_DELETED,
	},
	[AL_ST_ERROR] = {
		[AL_EV_READY] = REJECT,
		[AL_EV_PAUSE] = REJECT,
		[AL_EV_RESUME] = REJECT,
		[AL_EV_SUSPEND] = REJECT,
		[AL_EV_FAIL] = REJECT,
		[AL_EV_DELETE] = AL_ST_DELETED,
	},
	[AL_ST_DELETED] = {
		[AL_EV_READY] = REJECT,
		[AL_EV_PAUSE] = REJECT,
		[AL_EV_RESUME] = REJECT,
		[AL_EV_SUSPEND] = REJECT,
		[AL_EV_FAIL] = REJECT,
		[AL_EV_DELETE] = REJECT,
	},
};
/* clang-format on */

const char *al_state_name(al_state s)
{
	if ((unsigned)s >= AL_ST_MAX)
		return "unknown";
	return state_names[s];
}

int al_state_from_name(const char *name)
{
	if (name == NULL)
		return -1;
	for (int s = 0; s < AL_ST_MAX; s++)
		if (strcmp(state_names[s], name) == 0)
			return s;
	return -1;
}

const char *al_event_name(al_event e)
{
	if ((unsigned)e >= AL_EV_MAX)
		return "unknown";
	return event_names[e];
}

int al_state_next(al_state s, al_event e, al_err *err)
{
	if ((unsigned)s >= AL_ST_MAX || (unsigned)e >= AL_EV_MAX)
		return al_err_set(err, AL_EINTERNAL, 0,
				  "state %d / event %d out of range", (int)s,
				  (int)e);
	int next = handlers[s][e];
	if (next == REJECT)
		return al_err_set(err, AL_ESTATE, 0,
				  "cannot %s a sandbox that is %s",
				  event_names[e], state_names[s]);
	return next;
}
