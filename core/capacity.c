/* capacity: see capacity.h. */
#include "capacity.h"

#include <errno.h>

#include "log.h"
#include "sandbox.h"

int al_capacity_exhausted(const al_err *e)
{
	switch (e->code) {
	case AL_EUNAVAIL:
	case AL_ENOSPACE:
	case AL_ENOMEM:
		return 1;
	default:
		break;
	}
	switch (e->sys_errno) {
	case EAGAIN:
	case ENOMEM:
	case ENOSPC:
	case EDQUOT:
	case EMFILE:
	case ENFILE:
		return 1;
	default:
		return 0;
	}
}

void al_capacity_start_failed(al_db *db, const char *id, al_err *e,
			      int *retry_after_s)
{
	int refused = al_capacity_exhausted(e);
	al_err tmp;
	al_warn("sandbox %s: start %s: %s", id,
		refused ? "refused for capacity" : "failed", e->msg);
	/* The shim's spooled end may have been recorded first (state error
	 * or deleted): then the state table rejects this one. */
	if (al_sandbox_transition(db, id, refused ? AL_EV_DELETE : AL_EV_FAIL,
				  e->msg, &tmp) < 0 &&
	    tmp.code != AL_ESTATE)
		al_warn("sandbox %s: recording the failed start: %s", id,
			tmp.msg);
	if (refused) {
		e->code = AL_EUNAVAIL;
		*retry_after_s = AL_CAPACITY_RETRY_S;
	} else if (al_code_http_status(e->code) < 500) {
		/* Whatever the shim said, this is the server failing. */
		e->code = AL_EINTERNAL;
	}
}
