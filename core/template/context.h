/* context: the build context of a template, a tar the user uploads
 * (hostile), unpacked into a directory that COPY steps read from.
 *
 * Unpacking (libarchive reads the tar; the files are written here with
 * openat2(), never through a path string):
 * - entry names must be relative and free of ".." components and control
 *   characters; a leading "./" is dropped. Refused otherwise (AL_EPATH),
 *   as is any entry whose path goes through a symlink (an earlier entry
 *   can't redirect a later one outside the directory) and any hardlink
 *   whose target is not an earlier entry of the same archive;
 * - only regular files, directories, symlinks and hardlinks: device
 *   nodes, FIFOs and sockets are refused (AL_EPATH);
 * - modes keep their rwx bits only (no setuid/setgid/sticky), with owner
 *   read (files) or rwx (directories) added; owners in the tar are
 *   ignored (the files belong to the unpacking process);
 * - symlink targets are stored as written: they are data, resolved later
 *   only inside the sandbox's root (see al_context_copy);
 * - limits: AL_ETOOBIG beyond max_bytes of file data (uncompressed) or
 *   max_entries entries; AL_EINVAL for a damaged or non-tar input (plain
 *   or gzip-compressed tar, ustar/pax/GNU);
 * - on failure the directory holds a partial tree: remove it with
 *   al_rmtree() (base/rmtree.h).
 *
 * Hashing (COPY cache keys) and copying read the unpacked tree without
 * following symlinks inside it. Copying writes into a rootfs directory
 * with every path resolved as if that directory were "/" (openat2
 * RESOLVE_IN_ROOT), so a symlink in the rootfs such as /etc -> / or
 * /x -> ../../host keeps pointing inside it. */
#ifndef AL_CONTEXT_H
#define AL_CONTEXT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"

#define AL_CONTEXT_MAX_BYTES (1ull << 30) /* file data in a context */
#define AL_CONTEXT_MAX_ENTRIES 100000
#define AL_CONTEXT_MAX_DEPTH 128 /* path components of one entry */
#define AL_CONTEXT_HASH_HEX 65	 /* 64 hex digits + NUL */

typedef struct al_context_limits {
	uint64_t max_bytes;
	uint64_t max_entries;
} al_context_limits;

/* Unpack the tar read from tar_fd (from its current offset) into dir, an
 * existing empty directory. lim NULL means the AL_CONTEXT_MAX_* limits. */
int al_context_unpack(int tar_fd, const char *dir, const al_context_limits *lim,
		      al_err *err);

/* Deterministic sha256 (hex) of relpath inside dir, a file or a tree:
 * types, paths relative to relpath, permission bits, file contents and
 * symlink targets, in byte-sorted name order; not owners or times.
 * relpath as normalized by the Airlockfile parser ("." for all of dir);
 * AL_ENOENT when it does not exist, AL_EPATH when it goes through a
 * symlink. */
int al_context_hash(const char *dir, const char *relpath,
		    char out[AL_CONTEXT_HASH_HEX], al_err *err);
/* Hash of a COPY's sources srcs[0..n) (each hashed as above, with its
 * name): what al_airlockfile_step_key() takes as extra_hash. */
int al_context_hash_srcs(const char *dir, const char *const *srcs, size_t n,
			 char out[AL_CONTEXT_HASH_HEX], al_err *err);

/* COPY src_rel (inside context_dir) to dest_abs inside the rootfs
 * dest_root, with Docker's rules:
 * - a file goes to dest_abs, or into it when dest_abs ends in '/' or is
 *   an existing directory (dest_abs/<basename>);
 * - a directory's contents (not the directory itself) go into dest_abs,
 *   created if missing;
 * - symlinks in the context are copied as symlinks;
 * - missing parent directories are created (mode 0755, owned by the
 *   caller); existing files are replaced, existing directories merged;
 * - copied files and directories get uid:gid, and the chmod bits when
 *   chmod >= 0 (else the context's bits).
 * Every path in the rootfs resolves inside dest_root (RESOLVE_IN_ROOT,
 * no magic links, no crossing of mount points). */
int al_context_copy(const char *context_dir, const char *src_rel,
		    const char *dest_root, const char *dest_abs, int chmod,
		    uid_t uid, gid_t gid, al_err *err);

/* Write a tar (pax) of dir's contents to out_fd for upload: entries in
 * sorted order with relative names, owners 0:0, regular files,
 * directories and symlinks (symlinks are not followed; sockets, FIFOs and
 * devices are skipped with a warning). Same limits as unpacking
 * (AL_ETOOBIG). */
int al_context_pack(const char *dir, int out_fd, al_err *err);

#endif
