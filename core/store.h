/* store: the btrfs pool (libbtrfsutil). Templates are subvolumes under
 * pool/templates/<name>; a sandbox's root is a snapshot of its template
 * under pool/sandboxes/<id>, its disk use capped by the subvolume's
 * qgroup (the ioctls of linux/btrfs.h: libbtrfsutil has no limits). */
#ifndef AL_STORE_H
#define AL_STORE_H

#include <stdint.h>

#include "err.h"

/* -1 with AL_EUNAVAIL if dir is not on btrfs. */
int al_store_check(const char *pool_dir, al_err *err);
/* Create an empty subvolume at path (parents must exist). */
int al_store_subvol_create(const char *path, al_err *err);
/* Writable snapshot src -> dst (dst must not exist). */
int al_store_snapshot(const char *src, const char *dst, al_err *err);
/* Delete a subvolume and any nested subvolumes; a missing path is not an
 * error (idempotent, so crash recovery can call it again). */
int al_store_subvol_delete(const char *path, al_err *err);
/* 1 if path is a subvolume, 0 if not (or missing), -1 on error. */
int al_store_is_subvol(const char *path, al_err *err);

/* Turn on qgroup accounting on the pool's filesystem; a no-op when it is
 * on already. Needs CAP_SYS_ADMIN. */
int al_store_quota_enable(const char *pool_dir, al_err *err);
/* Cap the data subvol holds exclusively at bytes: a snapshot's extents
 * shared with its template do not count, whatever it writes anew (or
 * copies on write) does. Writes past it fail with EDQUOT. 0 lifts the
 * cap. AL_EUNAVAIL when quotas are off on the pool. */
int al_store_limit(const char *subvol, uint64_t bytes, al_err *err);
/* Share of the pool's size a writer can no longer get, in percent
 * (statvfs: blocks less those available to unprivileged writers). */
int al_store_used_pct(const char *pool_dir, unsigned *pct, al_err *err);
/* -1 with AL_ENOSPACE (naming the figures) when the pool is used to
 * full_pct percent or more; 0 when there is room. */
int al_store_room(const char *pool_dir, unsigned full_pct, al_err *err);
/* 1 when path lives on the pool's filesystem (any subvolume of it), 0
 * when not, -1 on error. */
int al_store_on_pool(const char *pool_dir, const char *path, al_err *err);

#endif
