/* lifecycle: the controller's part of pause, suspend and snapshots.
 * Operations whose worker died are settled from what the shim or the
 * snapshot's directory says (model/sandbox_op.h); snapshots no sandbox
 * needs any more (a deleted sandbox's, not named) are removed, files
 * first; unfinished or unknown snapshot directories older than a few
 * minutes are removed (never one a row names). */
#ifndef AL_CTL_LIFECYCLE_H
#define AL_CTL_LIFECYCLE_H

#include "ctl.h"

/* Every tick: remove the snapshots nobody needs. */
void ctl_lifecycle_tick(ctl *c);
/* On the reconcile's clock: settle stale operations, sweep the
 * snapshot directories. */
void ctl_lifecycle_reconcile(ctl *c);

#endif
