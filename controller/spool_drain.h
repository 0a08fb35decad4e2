/* spool_drain: the shims' spooled transitions (core/sandbox/spool.h: a sandbox
 * ended) recorded in PostgreSQL, a batch per transaction; a file goes
 * only once its batch committed. */
#ifndef AL_CTL_SPOOL_DRAIN_H
#define AL_CTL_SPOOL_DRAIN_H

#include "ctl.h"

/* Record what waits in the spool. PostgreSQL down: it waits for the next
 * pass. An event PostgreSQL refuses on its own is put aside
 * (run/events/bad/) so that it holds no later one back. */
void ctl_spool_drain(ctl *c);

#endif
