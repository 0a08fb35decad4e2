/* vm snapshot: a template's VM artefacts, the disk image every sandbox
 * of it reflinks and the base snapshot every sandbox restores from
 * (vm/driver.c), built once per template version by the controller or
 * the builder.
 *
 * Files:
 *   POOL/vm/<template>       VMDIR of a template (al_vm_template_dir): on
 *                            the pool's filesystem, so disks reflink
 *   VMDIR/disk.base.ext4     the template's root disk as mkfs.ext4 -d
 *                            made it, never booted
 *   VMDIR/disk.ext4          that disk as the base snapshot's boot left
 *                            it (a reflink of disk.base.ext4, booted)
 *   VMDIR/mem, VMDIR/state   the base snapshot: guest RAM, device state,
 *                            of AL_VM_VCPUS vCPUs
 *   VMDIR/vcpus-N/           the snapshot of another vCPU count
 *                            (vm/shape.h): disk.ext4, mem, state
 *   VMDIR/accel              accelerator the snapshot was taken under
 *   VMDIR/format             AL_VM_SNAPSHOT_FORMAT of the Airlock that
 *                            took it (devices, init protocol)
 *   ROOTFS/.airlock-vm       symlink to VMDIR (absolute), so a sandbox
 *                            made from the template's subvolume finds it
 *   ROOTFS/.airlock-disk.ext4  the sandbox's reflinked copy of the disk,
 *                            grown to its disk limit (al_vm_disk_size) */
#ifndef AL_VM_SNAPSHOT_H
#define AL_VM_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "base/err.h"
#include "vm/guest.h"

/* Build a template's VM artefacts in vmdir (created if missing) from the
 * template root filesystem rootfs: disk.base.ext4 via mkfs.ext4 -d, then
 * boot a copy of it (disk.ext4) once with AL_VM_VCPUS vCPUs, wait for the
 * guest init, and save the base snapshot (mem, state, accel). Snapshots
 * of other vCPU counts are made on first use (vm/shape.h). Finally points rootfs/.airlock-vm at vmdir. Everything
 * is written under temporary names and renamed, so a half-built snapshot
 * is never used. With a cache dir (vm/tmplcache.h; NULL or "" for none)
 * the artefacts are copied from its entry for their key when it has one,
 * else stored there after the build; the key goes to key (NULL or
 * AL_VM_TMPLCACHE_KEY_LEN + 1 bytes, "" without a cache). 1 when the
 * snapshot came from the cache, 0 when it was built, -1 on an error. */
int al_vm_template_build(const char *rootfs, const char *vmdir,
			 const al_vm_kernel *k, al_vm_accel accel,
			 const char *cache, char *key, al_err *err);

/* Boot dir/disk.ext4 with vcpus vCPUs (QEMU in the cgroup leaf cgroup,
 * or in none for NULL), wait for the guest init and save the snapshot
 * every clone of it restores: dir/state (device state) and dir/mem
 * (guest RAM, holes kept). The disk is left as the boot left it: the
 * clones' disks are copies of it. */
int al_vm_snapshot_boot(const char *dir, unsigned vcpus, const al_vm_kernel *k,
			al_vm_accel accel, const char *cgroup, al_err *err);

/* Remove a snapshot directory of this module's or vm/shape.h's: the
 * files it names, then the directory (left if anything else is in it). */
void al_vm_snapdir_remove(const char *dir);

/* Where a template's VM artefacts are built: beside its current
 * version's rootfs (template-versions/<t>/<v>/vm), or POOL/vm/<template>
 * for a template without versions. */
int al_vm_template_dir(const al_config *cfg, const char *tmpl, char *out,
		       size_t outlen, al_err *err);

/* 1 if the template root tmpl_root points (.airlock-vm) at a complete
 * base snapshot (disk.ext4, disk.base.ext4, mem, state, accel); else 0
 * with why. */
int al_vm_template_ready(const char *tmpl_root, char *why, size_t whylen);

/* 1 if the template's VM artefacts must be (re)built: missing, taken
 * under another accelerator than accel, or older than what went into
 * them (the agent in the template, the guest kernel and initrd). */
int al_vm_template_stale(const char *tmpl_root, const char *state_dir,
			 al_vm_accel accel);

/* 1 if the snapshot in vmdir was taken in AL_VM_SNAPSHOT_FORMAT. */
int al_vm_snapshot_current(const char *vmdir);

/* Bytes a vm sandbox's disk image is grown to for its disk limit
 * disk_bytes: the limit in whole MiB, so that the guest's filesystem is
 * as big as the limit, but never less than the template's image
 * (image_bytes), which ext4 cannot shrink to online; below it the host's
 * qgroup stops the guest's writes instead (EIO). */
uint64_t al_vm_disk_size(uint64_t image_bytes, uint64_t disk_bytes);

#endif
