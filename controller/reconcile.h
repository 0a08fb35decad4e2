/* reconcile: the database against what the host holds, every few
 * seconds and at start, so that nothing leaks across a crash of any
 * program:
 *   - a live sandbox whose shim is gone (and whose end is not waiting in
 *     the spool) is marked error and what it held is released; one
 *     still creating long after its start, with a shim, is one whose
 *     starter died before recording it: it is destroyed (its client
 *     never got it);
 *   - a build whose builder died is marked failed;
 *   - a standby whose shim died is released (core/sandbox/standby.h);
 *   - a rootfs snapshot with no live sandbox or standby is deleted;
 *   - the network slots of shims that died are removed. */
#ifndef AL_CTL_RECONCILE_H
#define AL_CTL_RECONCILE_H

#include "ctl.h"

void ctl_reconcile(ctl *c);

#endif
