/* lifecycle: the controller's part of pause, suspend and snapshots.
 * Operations whose worker died are settled from what the shim or the
 * snapshot's directory says (model/sandbox_op.h); snapshots no sandbox
 * needs any more (a deleted sandbox's, not named) are removed, files
 * first; unfinished or unknown snapshot directories older than a few
 * minutes are removed (never one a row names).
 *
 * The operator's lifecycle policy (policies/lifecycle.lua, asked
 * through controller/policywatch.h) drives the rest, every 2 s: running
 * or paused sandboxes idle past its idle.after (no API call on them,
 * no event stream open: model/sandbox_activity.h) are suspended (an ns
 * one with its files only) or deleted; a running sandbox whose newest
 * snapshot is older than its snapshots.every gets a rolling one; rolling
 * and fork snapshots older than its snapshots.keep are removed (never a
 * named one, one a suspended or creating sandbox resumes from, a
 * pending one, or one whose sandbox has an operation under way). A pass
 * takes at most one capture (suspend or snapshot). Without a loaded
 * policy none of this runs. */
#ifndef AL_CTL_LIFECYCLE_H
#define AL_CTL_LIFECYCLE_H

#include "ctl.h"

/* Every tick: remove the snapshots nobody needs. */
void ctl_lifecycle_tick(ctl *c);
/* Every tick (it keeps its own 2 s clock): the policy's sweeps. */
void ctl_lifecycle_policy_sweep(ctl *c);
/* On the reconcile's clock: settle stale operations, sweep the
 * snapshot directories. */
void ctl_lifecycle_reconcile(ctl *c);

#endif
