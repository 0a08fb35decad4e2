/* vm template cache: built template snapshots kept outside any one state
 * dir, under a key over everything they depend on, so that a stack
 * building the same template again (tests, an operator's rebuilt stack)
 * copies the snapshot instead of booting the guest for it. Set with
 * AIRLOCK_VM_TEMPLATE_CACHE (al_config.vm_template_cache).
 *
 * Files:
 *   CACHE/<key>/{disk.ext4,disk.base.ext4,mem,state,accel,format}
 *                            one base snapshot (vm/snapshot.h), written
 *                            as CACHE/<key>.tmp.<pid> and renamed
 * CACHE must be a directory of ours that nobody else can write (0700 is
 * made if missing): a snapshot in it is restored into every sandbox.
 *
 * The key is a sha256 over the snapshot format, the accelerator, the
 * guest RAM and disk sizes, the guest kernel and initrd contents, QEMU's
 * and mkfs.ext4's size and mtime, and the root filesystem tree: every
 * entry's path, type and mode, owner, size, link count, device number,
 * contents or link target and extended attributes, in sorted order.
 * Modification times are not in it: mkfs.ext4 copies them, but nothing
 * a sandbox does depends on them. Paths of the state dir are not in the
 * snapshot either: QEMU is given the disk and RAM as /dev/fdset/N and
 * /proc/self/fd/N (vm/machine.c). */
#ifndef AL_VM_TMPLCACHE_H
#define AL_VM_TMPLCACHE_H

#include <stddef.h>

#include "base/err.h"
#include "vm/guest.h"

#define AL_VM_TMPLCACHE_KEY_LEN 64 /* hex digits */

/* The key of the snapshot of rootfs built with kernel k under accel, in
 * key (AL_VM_TMPLCACHE_KEY_LEN + 1 bytes). The top-level AL_VM_LINK and
 * AL_VM_DISK of rootfs are left out (the host's, not the guest's). */
int al_vm_tmplcache_key(const char *rootfs, const al_vm_kernel *k,
			al_vm_accel accel, char *key, al_err *err);

/* Copy entry key of cache into the (existing, empty) directory dst:
 * 1 when it was there and complete, 0 when not (dst unchanged), -1 on an
 * error (or a cache dir that others could write). */
int al_vm_tmplcache_get(const char *cache, const char *key, const char *dst,
			al_err *err);

/* Store the snapshot files of directory src as entry key of cache
 * (created 0700 if missing); an entry already there is kept. */
int al_vm_tmplcache_put(const char *cache, const char *key, const char *src,
			al_err *err);

#endif
