/* warmpool: sizing of the warm pool (see warmpool.h). */
#include "warmpool.h"

uint32_t al_warmpool_target(uint32_t min, uint32_t max, uint32_t recent)
{
	if (max < min)
		max = min;
	if (recent < min)
		return min;
	return recent > max ? max : recent;
}

void al_warmpool_plan(uint32_t have, uint32_t target, uint32_t per_tick,
		      uint32_t *start, uint32_t *retire)
{
	*start = 0;
	*retire = 0;
	if (have > target) {
		*retire = have - target;
		return;
	}
	*start = target - have;
	if (per_tick > 0 && *start > per_tick)
		*start = per_tick;
}
