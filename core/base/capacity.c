/* capacity: see capacity.h. */
#include "base/capacity.h"

#include <errno.h>

int al_capacity_exhausted(const al_err *e)
{
	if (e->code == AL_EUNAVAIL || e->code == AL_ENOSPACE ||
	    e->code == AL_ENOMEM)
		return 1;
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
