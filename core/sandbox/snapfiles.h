/* snapfiles: a sandbox snapshot's directory on the pool, as the shim
 * writes it (shim/lifecycle.c) and the controller sweeps it:
 *
 *   pool/snapshots/.<id>.tmp    being written; never resumed from
 *   pool/snapshots/<id>/        committed (the rename is the commit):
 *     rootfs/                   read-only btrfs snapshot of the root
 *     vm/                       the machine's memory and device state
 *                               (the vm driver's capture), if kept
 *     meta.json                 what it is: format, snapshot, sandbox,
 *                               driver, template and version, memory,
 *                               created_at_ms */
#ifndef AL_SNAPFILES_H
#define AL_SNAPFILES_H

#include "base/config.h"
#include "base/err.h"

/* Remove a snapshot directory (committed or not): its subvolume, then
 * the rest. A missing one is not an error. */
int al_snapfiles_remove(const char *dir, al_err *err);

/* 1 when snapshot id's committed directory is there, 0 if not. */
int al_snapfiles_committed(const al_config *cfg, const char *id);

#endif
