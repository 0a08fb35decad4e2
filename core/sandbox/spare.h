/* spare: template snapshots made ahead of need, in pool/spares/, so that
 * starting a sandbox renames one into pool/sandboxes/<name> instead of
 * waiting for the btrfs transaction commit a snapshot costs. Under a
 * burst those commits serialise (a cold start's snapshot step took 305
 * ms of its 347 ms with 32 at once); the controller makes the spares
 * off the critical path (controller/spares.c), as many as the recent
 * create rate asks for.
 *
 * A spare is pool/spares/<template>.<version>.<16 hex>: a snapshot of
 * that template version's rootfs, never used by anything until taken.
 * Taking is a rename, so of two takers one wins. */
#ifndef AL_SPARE_H
#define AL_SPARE_H

#include "base/config.h"
#include "base/err.h"

/* Move a spare of (name, version) whose rootfs is src to dst (which
 * must not exist): 1 when one was taken, 0 when there is none (snapshot
 * instead), never fails otherwise. A spare is taken only while src's
 * root directory is as it was when the spare was made (its mtime): a
 * version's root changes after it is published (.airlock-vm). */
int al_spare_take(const al_config *cfg, const char *name, int version,
		  const char *src, const char *dst);
/* Spares of (name, version) ready that still match src. */
int al_spare_count(const al_config *cfg, const char *name, int version,
		   const char *src);
/* One more spare of (name, version): a snapshot of src. */
int al_spare_make(const al_config *cfg, const char *name, int version,
		  const char *src, al_err *err);
/* Delete the spares keep() refuses (a template rebuilt or deleted) and
 * those that no longer match the rootfs keep() names in src; the number
 * deleted. */
int al_spare_prune(const al_config *cfg,
		   int (*keep)(const char *name, int version, char *src,
			       size_t srclen, void *arg),
		   void *arg);

#endif
