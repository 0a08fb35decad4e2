/* vm machine: one QEMU of the vm driver, in its jail (vm/jail.h).
 *
 * The command line is one for every use, so that a template boot and its
 * clones present the same devices in the same order and the device state
 * loads: -nodefaults, microvm without PIT, RTC or option ROMs, a NIC
 * attached to nothing (vm/net.h), a virtio-serial port "airlock" for the
 * agent, the disk and guest RAM handed over as descriptors, -sandbox on
 * with every optional seccomp group denied. QEMU dies with its shim
 * (PR_SET_PDEATHSIG); its stdout and stderr go to RUNDIR/qemu.log, a
 * sandbox's capped at 1 MiB.
 *
 * Used by the driver (vm/driver.c: sandboxes and standbys), the KVM
 * probe (vm/probe.c) and the template snapshot (vm/snapshot.c).
 *
 * Files:
 *   RUNDIR = /tmp/airlock-vm-XXXXXX (al_vm_rundir_make): qemu.log,
 *            serial.log (template and probe boots), root/ (the jail's
 *            mount point)
 *   ROOTFS/.airlock-vm-run   symlink to a sandbox's RUNDIR, for
 *                            al_reap_sandbox when the shim could not */
#ifndef AL_VM_MACHINE_H
#define AL_VM_MACHINE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"
#include "vm/guest.h"
#include "vm/jail.h"
#include "vm/qmp.h"

#define AL_VM_RUNLINK ".airlock-vm-run"
#define AL_VM_BOOT_TIMEOUT_MS 120000
#define AL_VM_RESTORE_TIMEOUT_MS 20000
#define AL_VM_QUIT_TIMEOUT_MS 2000

typedef enum al_vm_mode {
	AL_VM_COLD,	/* boot the kernel, private anonymous RAM */
	AL_VM_TEMPLATE, /* boot the kernel, RAM in a shared file to snapshot */
	AL_VM_CLONE,	/* restore: RAM file mapped privately, -incoming
			 * defer */
	AL_VM_PROBE,	/* boot to the init's probe marker, no disk or port */
} al_vm_mode;

typedef struct al_vm_launch {
	al_vm_mode mode;
	al_vm_accel accel;
	const al_vm_kernel *kernel; /* not for AL_VM_CLONE */
	int mem_fd;	    /* AL_VM_TEMPLATE (to fill), AL_VM_CLONE (sealed) */
	const char *disk;   /* not for AL_VM_PROBE */
	const char *agent;  /* path inside the guest */
	const char *rundir; /* QEMU's log, the jail's mount point */
	const char *cgroup; /* leaf QEMU runs in (sandboxes), or NULL */
	uid_t uid;	    /* QEMU's, from al_vmjail_uid_take */
	int tap_fd; /* > 0: the NIC's tap (network slot); 0 or -1: none */
	/* -smp: part of the device state, so a clone has its snapshot's
	 * (vm/shape.h); 0 is AL_VM_VCPUS. */
	unsigned vcpus;
	/* AL_VM_CLONE of a capture (vm/capture.h): the state to load is
	 * device state alone (al_vm_machine_save_devices), without the
	 * configuration section a migration stream begins with. */
	int devices_only;
} al_vm_launch;

/* A QEMU and what it holds: its process, monitor, uid and run directory. */
typedef struct al_vm_machine {
	pid_t pid;
	int pidfd;
	al_qmp *qmp;
	al_vmjail_uid uid;
	char rundir[64];
} al_vm_machine;

/* Format a path into out; AL_EINVAL "path too long" if it does not fit. */
int al_vm_path(char *out, size_t len, al_err *err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* A fresh private run directory in out; short, because unix socket paths
 * are. */
int al_vm_rundir_make(char *out, size_t len, al_err *err);
/* Remove a QEMU run directory the driver made (its log, the jail's
 * mount point); anything else is left alone. */
void al_vm_rundir_remove(const char *dir);

/* An empty machine: no process, no uid, no run directory. The caller
 * takes its uid (al_vmjail_uid_take into m->uid) and makes m->rundir. */
void al_vm_machine_init(al_vm_machine *m);
/* Kill its QEMU (reaped), remove its run directory, drop its uid. */
void al_vm_machine_release(al_vm_machine *m);

/* Start QEMU in its jail for l; *qmp_fd and *agent_fd are the caller's
 * ends of the monitor and the agent port. No QMP session is opened. */
int al_vm_machine_spawn(al_vm_machine *m, const al_vm_launch *l, int *qmp_fd,
			int *agent_fd, al_err *err);
/* Boot: start QEMU, open QMP and wait for the guest init's marker;
 * *agent_fd gets the agent port, with the init waiting for its GO. */
int al_vm_machine_boot(al_vm_machine *m, const al_vm_launch *l, int *agent_fd,
		       al_err *err);
/* Restore (l->mode AL_VM_CLONE): start QEMU waiting for its state, run
 * before_load(m, arg) when not NULL (QEMU is up, its guest RAM mapped,
 * nothing loaded or run yet), load the device state from state_fd and
 * run it. */
typedef int (*al_vm_before_load)(al_vm_machine *m, void *arg, al_err *err);
int al_vm_machine_restore(al_vm_machine *m, const al_vm_launch *l, int state_fd,
			  al_vm_before_load before_load, void *arg,
			  int *agent_fd, al_err *err);
/* Stop the guest and write its device state to state_fd (the RAM stays
 * in the launch's mem_fd). */
int al_vm_machine_save(al_vm_machine *m, int state_fd, al_err *err);
/* Write the device state of a stopped guest to fd (QMP
 * xen-save-devices-state: every device but RAM, no configuration
 * section; loaded by a restore with l->devices_only), *bytes of it.
 * QEMU writes into a memfd (its pages charged to QEMU's own cgroup), of
 * which at most AL_VM_DEVSTATE_MAX bytes are copied: more is refused
 * (AL_EPROTO), so a QEMU its guest took over cannot fill the pool. The
 * guest stays stopped and its disk active, so it can go on (cont). */
#define AL_VM_DEVSTATE_MAX (1 << 20) /* some 10 KB are written */
int al_vm_machine_save_devices(al_vm_machine *m, int fd, uint64_t *bytes,
			       al_err *err);
/* 1 if QEMU's guest is running (QMP query-status), 0 if stopped. */
int al_vm_machine_running(al_vm_machine *m, al_err *err);
/* QEMU's version, "major.minor.micro package" (QMP query-version): what
 * device state is loadable by (a capture's meta). */
int al_vm_machine_version(al_vm_machine *m, char *out, size_t len, al_err *err);
/* 32 fresh bytes of host entropy in hex, for the guest's RNG (the GO
 * line, an adopt's IDENTITY); the caller wipes hex once it is sent. */
#define AL_VM_ENTROPY_HEX (2 * 32 + 1)
int al_vm_entropy_hex(char hex[AL_VM_ENTROPY_HEX], al_err *err);
/* The init's GO line (guest/init/init.c) on agent_fd: clock, hostname,
 * fresh entropy, the MAC its NIC takes ("xx:xx:xx:xx:xx:xx") and its
 * network (al_guest_net_format: "addr/prefix,gateway", or "none"). */
int al_vm_machine_go(int agent_fd, const char *hostname, const char *mac,
		     const char *net, al_err *err);

/* The machine behind a started vm driver handle (vm/driver.c), for the
 * tests and benches that measure QEMU's own ways beside the driver's;
 * NULL when none runs. */
struct al_driver_handle;
al_vm_machine *al_vm_driver_machine(const struct al_driver_handle *h);

/* 1 if QEMU ended within ms. */
int al_vm_machine_exited(const al_vm_machine *m, int ms);
/* Ask QEMU to quit and wait for it a moment (AL_VM_QUIT_TIMEOUT_MS). */
void al_vm_machine_quit(al_vm_machine *m);
/* End QEMU and close *agent_fd, keeping the run directory and uid for
 * another start. */
void al_vm_machine_kill(al_vm_machine *m, int *agent_fd);

/* The last bytes of QEMU's log, printable, for error messages. */
void al_vm_machine_log_tail(const al_vm_machine *m, char *out, size_t len);
/* Append what QEMU said last to the failure in err; log the guest's
 * console, and add it to err too when with_console (a template boot: the
 * guest is ours; a sandbox's console is its owner's data). Nothing
 * without a run directory. */
void al_vm_machine_explain(const al_vm_machine *m, int with_console,
			   al_err *err);

#endif
