/* vm guest: what every vm guest is, for each part of the driver that
 * starts, probes, snapshots or caches one: its fixed RAM, vCPUs and disk,
 * its kernel, the accelerator it runs under, and the names and format of
 * a template's snapshot files (laid out in vm/snapshot.h).
 *
 * Files (STATE is the config's state_dir):
 *   STATE/vm/kernel/vmlinuz, STATE/vm/initrd.img   scripts/vm-kernel.sh */
#ifndef AL_VM_GUEST_H
#define AL_VM_GUEST_H

#include "base/config.h"
#include "base/err.h"

/* Every guest's RAM: sandboxes take no other size. A build may set
 * another (-DAL_VM_MEM_MB=1024: the benches of a bigger guest); every
 * guest of that build has it, and its template snapshots are its own
 * (the template cache's key holds the size). */
#ifndef AL_VM_MEM_MB
#define AL_VM_MEM_MB 256
#endif
/* Every guest's vCPUs (-smp): part of the snapshot a sandbox is
 * restored from, like its RAM, so a sandbox's "cpus" is at most this. */
#define AL_VM_VCPUS 1
/* Written by the guest init when probing (guest/init/init.c). */
#define AL_VM_PROBE_MARKER "AIRLOCK-PROBE-OK"
#define AL_VM_QEMU "/usr/bin/qemu-system-x86_64"

typedef enum al_vm_accel { AL_VM_TCG = 0, AL_VM_KVM = 1 } al_vm_accel;

typedef struct al_vm_kernel {
	char vmlinuz[AL_PATH_MAX];
	char initrd[AL_PATH_MAX];
} al_vm_kernel;

const char *al_vm_accel_name(al_vm_accel a);

/* A template's snapshot files (vm/snapshot.h). */
#define AL_VM_LINK ".airlock-vm"
#define AL_VM_DISK ".airlock-disk.ext4"
#define AL_VM_BASE_DISK "disk.base.ext4"
/* VMDIR/<prefix>N: the snapshot of N vCPUs (vm/shape.h); also the prefix
 * of its lock (.lock) and of a half-made one (.new). */
#define AL_VM_SHAPE_PREFIX "vcpus-"
/* The template's disk image: the product's default disk_mb, so a default
 * create (and every smaller one, capped by its qgroup) starts with no
 * grow; a larger disk_mb grows it after the restore. */
#define AL_VM_DISK_BYTES (4096ull << 20)
/* Raised whenever QEMU's devices, the guest kernel's command line, the
 * GO line or the agent's frames change: a snapshot of another format is
 * not restored but rebuilt. 2: virtio-net, MAC in GO. 3: tickless idle
 * guest (TSC kept). 4: the agent grows the disk (DISK_GROW), 4 GiB image.
 * 6: disk.base.ext4, which snapshots of other vCPU counts boot from. */
#define AL_VM_SNAPSHOT_FORMAT "6"

/* Kernel and initrd under state_dir; AL_ENOENT naming the missing file
 * and the command that makes it. */
int al_vm_kernel_find(const char *state_dir, al_vm_kernel *k, al_err *err);

#endif
