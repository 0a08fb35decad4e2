/* ratebucket: see ratebucket.h. */
#include "base/ratebucket.h"

#include <stddef.h>

int al_ratebucket_take(al_ratebucket *b, double burst, double rate,
		       int64_t now_ms, int64_t *wait_ms)
{
	if (b->at_ms == 0)
		b->tokens = burst;
	else if (now_ms < b->at_ms) /* no credit for a clock going back */
		now_ms = b->at_ms;
	else
		b->tokens += (double)(now_ms - b->at_ms) * rate / 1000.0;
	if (b->tokens > burst)
		b->tokens = burst;
	b->at_ms = now_ms;
	if (b->tokens >= 1) {
		b->tokens -= 1;
		return 1;
	}
	if (wait_ms != NULL)
		*wait_ms = rate > 0 ? (int64_t)((1 - b->tokens) * 1000.0 /
						rate) +
					      1
				    : INT64_MAX;
	return 0;
}
