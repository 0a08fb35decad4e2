/* store: the btrfs pool (libbtrfsutil). Templates are subvolumes under
 * pool/templates/<name>; a sandbox's root is a snapshot of its template
 * under pool/sandboxes/<id>, its disk use capped by the subvolume's
 * qgroup (the ioctls of linux/btrfs.h: libbtrfsutil has no limits). */
#ifndef AL_STORE_H
#define AL_STORE_H

#include <stdint.h>

#include "base/err.h"

/* -1 with AL_EUNAVAIL if dir is not on btrfs. */
int al_store_check(const char *pool_dir, al_err *err);
/* Create an empty subvolume at path (parents must exist). */
int al_store_subvol_create(const char *path, al_err *err);
/* Writable snapshot src -> dst (dst must not exist). */
int al_store_snapshot(const char *src, const char *dst, al_err *err);
/* The same, read-only: what a sandbox snapshot keeps of its files. */
int al_store_snapshot_ro(const char *src, const char *dst, al_err *err);
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
/* Qgroups above the subvolumes' own (level 0): a qgroup id is its level
 * in the top 16 bits and a number below. A group's exclusive use is the
 * data its members wrote that no one outside it shares, so a cap on a
 * group bounds what all of them together may write. */
#define AL_STORE_QGROUP(level, n) (((uint64_t)(level) << 48) | (uint64_t)(n))

/* Make qgroup group (level 1 or more) where it is missing, a member of
 * parent (0: of none) and capped at bytes of exclusive data (0 lifts the
 * cap). Idempotent; AL_EUNAVAIL when quotas are off. */
int al_store_group_set(const char *pool_dir, uint64_t group, uint64_t parent,
		       uint64_t bytes, al_err *err);
/* Move subvol's own qgroup into group, out of from first (0: from none);
 * its data counts against group's cap (and its parents') from now on.
 * Idempotent. */
int al_store_group_join(const char *subvol, uint64_t group, uint64_t from,
			al_err *err);
/* What group holds exclusively now, and its cap (0 = none). -1 with
 * AL_ENOENT when there is no such group. */
int al_store_group_usage(const char *pool_dir, uint64_t group, uint64_t *used,
			 uint64_t *cap, al_err *err);
/* The pool's size and what unprivileged writers may still take of it, in
 * bytes (statvfs). */
int al_store_space(const char *pool_dir, uint64_t *size, uint64_t *avail,
		   al_err *err);
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
