/* spares: the controller's thread that keeps spare template snapshots
 * (core/spare.h) ready, off its main loop: a snapshot waits for a btrfs
 * transaction commit (tens to hundreds of ms under load), which would
 * hold back the spool and the warm pool. The main loop tells it which
 * template versions exist and how many creates each had lately. */
#ifndef AL_CONTROLLER_SPARES_H
#define AL_CONTROLLER_SPARES_H

#include <stdint.h>

#include "config.h"

/* Spares kept per template version: recent creates of the window
 * (every driver), at least MIN, at most MAX. */
#define SPARES_MIN 32
#define SPARES_MAX 256

int spares_start(const al_config *cfg);
/* The templates' current versions and their creates of the window; a
 * version not listed loses its spares. */
void spares_set(const char (*name)[64], const int *version,
		const uint32_t *recent, int n);
void spares_stop(void);

#endif
