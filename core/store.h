/* store: the btrfs pool (libbtrfsutil). Templates are subvolumes under
 * pool/templates/<name>; a sandbox's root is a snapshot of its template
 * under pool/sandboxes/<id>. */
#ifndef AL_STORE_H
#define AL_STORE_H

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

#endif
