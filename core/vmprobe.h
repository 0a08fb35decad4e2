/* vmprobe: what the vm driver needs beyond core/driver.h: where the guest
 * kernel is, which accelerator works on this host, and a template's VM
 * artefacts (disk image + base snapshot).
 *
 * Files (STATE is the config's state_dir):
 *   STATE/vm/kernel/vmlinuz, STATE/vm/initrd.img   scripts/vm-kernel.sh
 *   STATE/vm/accel           "kvm" or "tcg", written by al_vm_accel_save
 *   VMDIR/disk.ext4          the template's root disk (mkfs.ext4 -d)
 *   VMDIR/mem, VMDIR/state   the base snapshot: guest RAM, device state
 *   VMDIR/accel              accelerator the snapshot was taken under
 *   ROOTFS/.airlock-vm       symlink to VMDIR (absolute), so a sandbox
 *                            made from the template's subvolume finds it
 *   ROOTFS/.airlock-disk.ext4  the sandbox's reflinked copy of the disk */
#ifndef AL_VMPROBE_H
#define AL_VMPROBE_H

#include <stddef.h>

#include "config.h"
#include "err.h"

#define AL_VM_MEM_MB 256
#define AL_VM_DISK_BYTES (1024ull << 20)
/* Written by the guest init when probing (guest/init/init.c). */
#define AL_VM_PROBE_MARKER "AIRLOCK-PROBE-OK"
#define AL_VM_QEMU "/usr/bin/qemu-system-x86_64"

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

struct al_driver_handle;
/* Accelerator a running vm sandbox (handle of al_driver_vm) runs under. */
al_vm_accel al_vm_handle_accel(const struct al_driver_handle *h);

/* Build a template's VM artefacts in vmdir (created if missing) from the
 * template root filesystem rootfs: disk.ext4 via mkfs.ext4 -d, then boot
 * it once, wait for the guest init, and save the base snapshot (mem,
 * state, accel). Finally points rootfs/.airlock-vm at vmdir. Everything
 * is written under temporary names and renamed, so a half-built snapshot
 * is never used. */
int al_vm_template_build(const char *rootfs, const char *vmdir,
			 const al_vm_kernel *k, al_vm_accel accel,
			 al_err *err);

#endif
