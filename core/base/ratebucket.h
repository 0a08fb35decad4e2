/* ratebucket: a token bucket over the monotonic clock.
 *
 * burst tokens at most, refilled at rate tokens per second; a new bucket
 * (at_ms 0) starts full. One caller at a time (callers lock or own it). */
#ifndef AL_RATEBUCKET_H
#define AL_RATEBUCKET_H

#include <stdint.h>

typedef struct al_ratebucket {
	double tokens;
	int64_t at_ms; /* last refill; 0 = never used (full) */
} al_ratebucket;

/* Take one token at now_ms: 1 when there was one, else 0 with *wait_ms
 * (when not NULL) the time until one is back. */
int al_ratebucket_take(al_ratebucket *b, double burst, double rate,
		       int64_t now_ms, int64_t *wait_ms);

#endif
