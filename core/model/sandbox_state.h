/* sandbox_state: a sandbox's lifecycle states and events, and the table
 * of which event moves which state where. Pure: no database, no JSON
 * (the rows that hold a state are core/model/sandbox.h's). */
#ifndef AL_SANDBOX_STATE_H
#define AL_SANDBOX_STATE_H

#include "base/err.h"

typedef enum al_state {
	AL_ST_CREATING,
	AL_ST_RUNNING,
	AL_ST_PAUSED,
	AL_ST_SUSPENDED,
	AL_ST_ERROR,
	AL_ST_DELETED,
	AL_ST_MAX
} al_state;

typedef enum al_event {
	AL_EV_READY,   /* creating -> running */
	AL_EV_PAUSE,   /* running -> paused */
	AL_EV_RESUME,  /* paused|suspended -> running */
	AL_EV_SUSPEND, /* running|paused -> suspended */
	AL_EV_FAIL,    /* creating|running|paused -> error */
	AL_EV_DELETE,  /* any but deleted -> deleted */
	AL_EV_MAX
} al_event;

const char *al_state_name(al_state s);
/* -1 if unknown. */
int al_state_from_name(const char *name);
const char *al_event_name(al_event e);
/* The next state, or -1 (AL_ESTATE) when the event is not allowed in s. */
int al_state_next(al_state s, al_event e, al_err *err);

#endif
