/* clock: the monotonic clock every deadline and duration is taken from. */
#ifndef AL_CLOCK_H
#define AL_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds. */
int64_t al_now_ms(void);

#endif
