/* spares: the controller's thread that keeps spare template snapshots
 * (core/sandbox/spare.h) ready, off its main loop: a snapshot waits for a btrfs
 * transaction commit (tens to hundreds of ms under load), which would
 * hold back the spool and the warm pool. The main loop tells it which
 * template versions exist and how many creates each had lately. */
#ifndef AL_CONTROLLER_SPARES_H
#define AL_CONTROLLER_SPARES_H

#include <stdint.h>

#include "base/config.h"

/* Spares kept per template version: recent creates of the window
 * (every driver), at least MIN, at most MAX. MIN is one burst of the
 * size issue 9 measures (200 creates from 32 clients), so that a burst
 * on a stack just started, which has no window of creates to size
 * from, takes spares instead of waiting for ~100 btrfs commits a
 * second. A spare costs about 17 KiB of pool metadata (34 KiB on disk,
 * metadata is DUP) and one qgroup: 3.4 MiB for 200, measured on this
 * host; it shares every data extent with its template. */
#define SPARES_MIN 200
#define SPARES_MAX 256

int ctl_spares_start(const al_config *cfg);
/* The templates' current versions and their creates of the window; a
 * version not listed loses its spares. */
void ctl_spares_set(const char (*name)[64], const int *version,
		    const uint32_t *recent, int n);
/* 1 once every template version ctl_spares_set named had its spares at a
 * look (the first fill after the start is done). */
int ctl_spares_filled(void);
void ctl_spares_stop(void);

#endif
