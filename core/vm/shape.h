/* vm shape: the machine a vm sandbox gets for its limits, and the
 * template snapshot it is restored from.
 *
 * A restore loads device state, and QEMU's device state holds every
 * vCPU: a clone has its snapshot's vCPU count. So a template has one
 * snapshot per vCPU count (vm/snapshot.h's files):
 *   VMDIR/{disk.ext4,mem,state}   AL_VM_VCPUS, made when the template
 *                                 is built
 *   VMDIR/vcpus-N/{disk.ext4,mem,state}   N vCPUs, made on first use by
 *                                 the start that needs it
 * Making one boots a copy of the never-booted VMDIR/disk.base.ext4 with
 * N vCPUs, its QEMU in the cgroup leaf of the sandbox that asked for the
 * shape (the boot is charged to it, at its cpus), and renames the
 * finished directory into place. One maker per shape at a time
 * (VMDIR/vcpus-N.lock, flock): a start that finds the lock held waits
 * for the maker up to AL_VM_SHAPE_WAIT_MS, then fails with AL_EUNAVAIL,
 * which a create answers 503 with Retry-After. The shapes live and die
 * with VMDIR: a rebuild swaps in a directory without them, a template's
 * deletion removes its versions. Guest RAM is one size for every shape
 * (AL_VM_MEM_MB). */
#ifndef AL_VM_SHAPE_H
#define AL_VM_SHAPE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "driver.h"
#include "vm/guest.h"

/* How long a start waits for another start making the shape it needs:
 * below fcgi's wait for a start (30 s), so that the caller is told to
 * retry rather than that the start timed out. */
#define AL_VM_SHAPE_WAIT_MS 20000

/* vCPUs of a vm sandbox capped at cpu_millis thousandths of a CPU: the
 * cap rounded up (1.5 CPUs run on 2 vCPUs, the CFS quota holding them
 * to 1.5 together); 0 (no cap) is AL_VM_VCPUS. */
unsigned al_vm_shape_vcpus(uint32_t cpu_millis);

/* A vm create's limits checked and completed: guest RAM is every
 * snapshot's, so memory_mb (the request's; 0 = not asked) must be
 * AL_VM_MEM_MB (else AL_EINVAL naming it) and l->memory_bytes is set to
 * it. Any cpus AIRLOCK_MAX_CPUS allows (at most the host's CPUs) has a
 * shape: nothing to refuse there. */
int al_vm_shape_limits(uint64_t memory_mb, al_limits *l, al_err *err);

/* The snapshot directory for vcpus of vmdir (a template's VMDIR whose
 * base snapshot is current) into out: vmdir itself for AL_VM_VCPUS, else
 * VMDIR/vcpus-N, made first when missing (see above) under accel with
 * the guest kernel of state_dir, its QEMU in cgroup leaf cgroup. More
 * vCPUs than the host has CPUs is AL_EINVAL. */
int al_vm_shape_dir(const char *vmdir, unsigned vcpus, al_vm_accel accel,
		    const char *state_dir, const char *cgroup, char *out,
		    size_t outlen, al_err *err);

#endif
