/* vm probe: whether the vm driver can run on this host and how: where
 * the guest kernel is, which accelerator works (a real boot under KVM,
 * not the presence of /dev/kvm), and the reason an operator sees when
 * the driver is unavailable.
 *
 * Files (STATE is the config's state_dir):
 *   STATE/vm/accel           "kvm" or "tcg", written by al_vm_accel_save
 *   STATE/vm/unavailable     why the vm driver cannot be used here, written
 *                            by airlock-controller --init (absent = usable)
 * The guest's shape and kernel files are vm/guest.h's, a template's VM
 * artefacts vm/snapshot.h's. */
#ifndef AL_VM_PROBE_H
#define AL_VM_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "vm/guest.h"

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

/* Record why the vm driver cannot be used on this host (why != NULL), or
 * that it can (why NULL: the record is removed). */
int al_vm_status_save(const char *state_dir, const char *why, al_err *err);

/* 1 if the vm driver can create sandboxes here: QEMU installed, guest
 * kernel and initrd present, the accelerator probe ran, and no reason was
 * recorded against it. Otherwise 0 with a reason an operator can act on
 * in why (without the "vm driver unavailable" prefix). */
int al_vm_usable(const char *state_dir, char *why, size_t whylen);

#endif
