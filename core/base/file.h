/* file: a file's whole content replaced at once; files cloned, or
 * copied with their holes. */
#ifndef AL_FILE_H
#define AL_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"

/* Make path hold data[0..len) with mode: written to a temp file beside it
 * (<path>.tmp.<pid>), fsynced and renamed over it, so a reader sees the
 * old content or the new, never part of either. */
int al_file_replace(const char *path, const void *data, size_t len, mode_t mode,
		    al_err *err);

/* Copy in's data extents to the same offsets of out, sized like in;
 * holes stay holes. In the kernel where it can, else through a buffer.
 * A full filesystem (ENOSPC, EDQUOT) is AL_EUNAVAIL. */
int al_file_copy_sparse(int in, int out, al_err *err);

/* dst (created 0600 or truncated, never through a symlink, as src is
 * never opened through one) becomes a copy of src: a reflink where the
 * filesystem can (btrfs, xfs), else al_file_copy_sparse. A full
 * filesystem is AL_EUNAVAIL. On failure dst is removed. *size (when not
 * NULL) is src's size. AL_FILE_CLONE_SYNC: dst is fsynced too. */
#define AL_FILE_CLONE_SYNC 1u
int al_file_clone(const char *src, const char *dst, unsigned flags,
		  uint64_t *size, al_err *err);
/* The same between open files: out (empty, writable) gets in's data;
 * nothing is removed on failure. */
int al_file_clone_fd(int in, int out, al_err *err);

#endif
