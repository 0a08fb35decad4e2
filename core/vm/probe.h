/* vmprobe: what the vm driver needs beyond core/driver.h: where the guest
 * kernel is, which accelerator works on this host, and a template's VM
 * artefacts (disk image + base snapshot).
 *
 * Files (STATE is the config's state_dir):
 *   STATE/vm/kernel/vmlinuz, STATE/vm/initrd.img   scripts/vm-kernel.sh
 *   STATE/vm/accel           "kvm" or "tcg", written by al_vm_accel_save
 *   STATE/vm/unavailable     why the vm driver cannot be used here, written
 *                            by airlock-controller --init (absent = usable)
 *   POOL/vm/<template>       VMDIR of a template (al_vm_template_dir): on
 *                            the pool's filesystem, so disks reflink
 *   VMDIR/disk.ext4          the template's root disk (mkfs.ext4 -d)
 *   VMDIR/mem, VMDIR/state   the base snapshot: guest RAM, device state
 *   VMDIR/accel              accelerator the snapshot was taken under
 *   VMDIR/format             AL_VM_SNAPSHOT_FORMAT of the Airlock that
 *                            took it (devices, init protocol)
 *   ROOTFS/.airlock-vm       symlink to VMDIR (absolute), so a sandbox
 *                            made from the template's subvolume finds it
 *   ROOTFS/.airlock-disk.ext4  the sandbox's reflinked copy of the disk,
 *                            grown to its disk limit (al_vm_disk_size)
 *   ROOTFS/.airlock-vm-run   symlink to the sandbox's QEMU run directory
 *                            (/tmp/airlock-vm-XXXXXX: QEMU's log, the
 *                            mount point of its jail), removed by
 *                            al_reap_sandbox when the shim could not */
#ifndef AL_VMPROBE_H
#define AL_VMPROBE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "err.h"

#define AL_VM_MEM_MB 256
/* The template's disk image: the product's default disk_mb, so a default
 * create (and every smaller one, capped by its qgroup) starts with no
 * grow; a larger disk_mb grows it after the restore. */
#define AL_VM_DISK_BYTES (4096ull << 20)
/* Written by the guest init when probing (guest/init/init.c). */
#define AL_VM_PROBE_MARKER "AIRLOCK-PROBE-OK"
#define AL_VM_QEMU "/usr/bin/qemu-system-x86_64"
/* Raised whenever QEMU's devices, the guest kernel's command line, the
 * GO line or the agent's frames change: a snapshot of another format is
 * not restored but rebuilt. 2: virtio-net, MAC in GO. 3: tickless idle
 * guest (TSC kept). 4: the agent grows the disk (DISK_GROW), 4 GiB image. */
#define AL_VM_SNAPSHOT_FORMAT "4"

typedef enum al_vm_accel { AL_VM_TCG = 0, AL_VM_KVM = 1 } al_vm_accel;

typedef struct al_vm_kernel {
	char vmlinuz[AL_PATH_MAX];
	char initrd[AL_PATH_MAX];
} al_vm_kernel;

const char *al_vm_accel_name(al_vm_accel a);

/* Kernel and initrd under state_dir; AL_ENOENT naming the missing file
 * and the command that makes it. */
int al_vm_kernel_find(const char *state_dir, al_vm_kernel *k, al_err *err);

/* Boot a tiny guest (kernel + initrd, no disk) under KVM and wait at most
 * timeout_ms for the guest init's probe marker. AL_VM_KVM only if it came;
 * otherwise AL_VM_TCG with the reason in why. /dev/kvm existing proves
 * nothing: nested KVM without EPT creates VMs that cannot boot Linux. */
al_vm_accel al_vm_probe(const al_vm_kernel *k, int timeout_ms, char *why,
			size_t whylen);

/* Remember / recall the probe's answer in STATE/vm/accel; load gives
 * AL_VM_TCG when no probe ran yet. */
int al_vm_accel_save(const char *state_dir, al_vm_accel a, al_err *err);
al_vm_accel al_vm_accel_load(const char *state_dir);

/* Remove a QEMU run directory the driver made (its log, the jail's
 * mount point); anything else is left alone. */
void al_vm_rundir_remove(const char *dir);

/* Bytes a vm sandbox's disk image is grown to for its disk limit
 * disk_bytes: the limit in whole MiB, so that the guest's filesystem is
 * as big as the limit, but never less than the template's image
 * (image_bytes), which ext4 cannot shrink to online; below it the host's
 * qgroup stops the guest's writes instead (EIO). */
uint64_t al_vm_disk_size(uint64_t image_bytes, uint64_t disk_bytes);

/* 1 if the snapshot in vmdir was taken in AL_VM_SNAPSHOT_FORMAT. */
int al_vm_snapshot_current(const char *vmdir);

/* Build a template's VM artefacts in vmdir (created if missing) from the
 * template root filesystem rootfs: disk.ext4 via mkfs.ext4 -d, then boot
 * it once, wait for the guest init, and save the base snapshot (mem,
 * state, accel). Finally points rootfs/.airlock-vm at vmdir. Everything
 * is written under temporary names and renamed, so a half-built snapshot
 * is never used. */
int al_vm_template_build(const char *rootfs, const char *vmdir,
			 const al_vm_kernel *k, al_vm_accel accel,
			 al_err *err);

/* Record why the vm driver cannot be used on this host (why != NULL), or
 * that it can (why NULL: the record is removed). */
int al_vm_status_save(const char *state_dir, const char *why, al_err *err);

/* 1 if the vm driver can create sandboxes here: QEMU installed, guest
 * kernel and initrd present, the accelerator probe ran, and no reason was
 * recorded against it. Otherwise 0 with a reason an operator can act on
 * in why (without the "vm driver unavailable" prefix). */
int al_vm_usable(const char *state_dir, char *why, size_t whylen);

/* Where a template's VM artefacts are built: beside its current
 * version's rootfs (template-versions/<t>/<v>/vm), or POOL/vm/<template>
 * for a template without versions. */
int al_vm_template_dir(const al_config *cfg, const char *tmpl, char *out,
		       size_t outlen, al_err *err);

/* 1 if the template root tmpl_root points (.airlock-vm) at a complete
 * base snapshot (disk.ext4, mem, state, accel); else 0 with why. */
int al_vm_template_ready(const char *tmpl_root, char *why, size_t whylen);

/* 1 if the template's VM artefacts must be (re)built: missing, taken
 * under another accelerator than accel, or older than what went into
 * them (the agent in the template, the guest kernel and initrd). */
int al_vm_template_stale(const char *tmpl_root, const char *state_dir,
			 al_vm_accel accel);

#endif
