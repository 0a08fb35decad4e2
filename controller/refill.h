/* refill: what the controller keeps ready ahead of the creates, sized
 * from their rate (core/sandbox/warmpool.h):
 *   - warm pool standbys (core/sandbox/standby.h): AIRLOCK_WARM_POOL ns standbys
 *     and (while the vm driver is usable and the template has its VM
 *     snapshot) AIRLOCK_WARM_POOL_VM vm standbys per template at the
 *     least, up to the _MAX variables while creates come, or the
 *     template's own bounds; those of a template rebuilt, deleted or
 *     whose pool shrank are retired and ended;
 *   - spare template snapshots (controller/spares.h), told the templates
 *     and their create rate;
 *   - network slots (core/net/pool.h): enough ready of each kind for the
 *     creates and standby starts to come. */
#ifndef AL_CTL_REFILL_H
#define AL_CTL_REFILL_H

#include "ctl.h"

/* One pass over the templates' warm pools (and the spares' targets). */
void ctl_refill(ctl *c);
/* One pass over the ready network slots (at most a few prepares). */
void ctl_refill_net(ctl *c);
/* run/controller.ready, once the first fill of the spare snapshots and
 * network slots after the start is done. */
void ctl_mark_ready(ctl *c);

#endif
