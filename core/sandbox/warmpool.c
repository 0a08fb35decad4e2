/* warmpool: sizing of the warm pool (see warmpool.h). */
#include "sandbox/warmpool.h"

#include <inttypes.h>
#include <stdio.h>

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

uint32_t al_warmpool_cap(uint32_t min, uint32_t max, uint64_t avail_mb,
			 uint64_t total_mb)
{
	if (total_mb == 0 ||
	    avail_mb * 100 >= total_mb * AL_WARMPOOL_MEM_FREE_PCT)
		return max;
	return min;
}

void al_warmpool_host_mem(uint64_t *avail_mb, uint64_t *total_mb)
{
	*avail_mb = 0;
	*total_mb = 0;
	FILE *f = fopen("/proc/meminfo", "re");
	if (f == NULL)
		return;
	char line[128];
	uint64_t kb, avail = 0, total = 0;
	while (fgets(line, sizeof line, f) != NULL) {
		if (sscanf(line, "MemTotal: %" SCNu64, &kb) == 1)
			total = kb;
		else if (sscanf(line, "MemAvailable: %" SCNu64, &kb) == 1)
			avail = kb;
	}
	fclose(f);
	if (total == 0)
		return;
	*avail_mb = avail >> 10;
	*total_mb = total >> 10;
}
