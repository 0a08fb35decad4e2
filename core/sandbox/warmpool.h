/* warmpool: how many standbys a template's warm pool holds and what one
 * controller tick does about it. Pure functions: the controller feeds
 * them the counts (standbys ready, creates of the last window, host
 * memory from al_warmpool_host_mem). */
#ifndef AL_WARMPOOL_H
#define AL_WARMPOOL_H

#include <stdint.h>

/* Standbys to keep: as many as the template got creates in the last
 * window (recent), so that the same burst again finds them booted; never
 * fewer than min, never more than max (a standby costs memory: max is
 * the bound an operator sets on it). max below min counts as min. */
uint32_t al_warmpool_target(uint32_t min, uint32_t max, uint32_t recent);

/* The most the pool may grow to with avail_mb of total_mb host memory
 * available: max while at least AL_WARMPOOL_MEM_FREE_PCT percent is, else
 * min (the running sandboxes need what is left more than standbys do).
 * Unknown memory (total 0) does not hold the pool back. */
#define AL_WARMPOOL_MEM_FREE_PCT 20
uint32_t al_warmpool_cap(uint32_t min, uint32_t max, uint64_t avail_mb,
			 uint64_t total_mb);

/* MemAvailable and MemTotal of /proc/meminfo in MiB, 0 and 0 when it
 * cannot be read. */
void al_warmpool_host_mem(uint64_t *avail_mb, uint64_t *total_mb);

/* One tick toward target with have standbys ready: *start of them to
 * boot now (at most per_tick; 0 per_tick means no bound), or *retire to
 * destroy. Never both. */
void al_warmpool_plan(uint32_t have, uint32_t target, uint32_t per_tick,
		      uint32_t *start, uint32_t *retire);

#endif
