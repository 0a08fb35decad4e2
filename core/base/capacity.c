/* capacity: see capacity.h. */
#include "base/capacity.h"

#include <errno.h>

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
