/* driver: how a sandbox's machine is run. One interface, two drivers:
 * "ns" (namespace jail, driver_ns.c) and "vm" (QEMU microvm, vm/driver.c).
 * The shim is the only caller of the operations: it owns the handle for
 * the sandbox's life. Which drivers this host offers now
 * (al_driver_status_read) is for the API: creates and GET /v1/info.
 * What differs between machines is a field or an operation here, never a
 * comparison of driver pointers; an operation a driver does not have is
 * NULL, and its comment says what the caller does then. */
#ifndef AL_DRIVER_H
#define AL_DRIVER_H

#include <stdint.h>
#include <sys/types.h>

#include "base/config.h"
#include "base/err.h"

struct al_netslot;

typedef struct al_limits {
	uint64_t memory_bytes; /* hard limit incl. page cache; 0 = default */
	uint32_t pids_max;     /* processes + threads */
	uint32_t cpu_shares;   /* relative weight, 1024 = one normal share */
	uint32_t cpu_millis;   /* CPU cap in thousandths of a CPU; 0 = none */
	uint64_t disk_bytes;   /* new data on the pool (qgroup); 0 = none */
	/* The project's group on the pool and its cap (core/pool/poolcap.h);
	 * set by a create, 0 in a standby's. */
	int64_t pool_group;
	uint64_t pool_group_bytes;
} al_limits;

typedef struct al_sandbox_spec {
	const char *id;	      /* al_id_valid() */
	const char *rootfs;   /* absolute path of the sandbox's root */
	const char *hostname; /* set in the uts namespace */
	const char *agent;    /* path of the agent inside rootfs */
	al_limits limits;
	/* The sandbox's network slot (core/net/slot.h), of the driver's
	 * net_kind, held by the caller for the machine's life; NULL:
	 * loopback only (network mode "none"). ns: the jail joins the
	 * slot's guest namespace; vm: QEMU's NIC gets the slot's tap and
	 * the guest its address. */
	const struct al_netslot *net;
	/* NULL: start from the template. Else a directory capture() filled
	 * (vm): start resumes the machine saved there, with rootfs the
	 * snapshot of its disk taken after the capture. Its agent is the
	 * one that ran, paused (AL_F_PAUSE) and long past its HELLO: the
	 * caller sends it AL_F_RESUME instead of waiting for a HELLO, then
	 * calls adopt() with the same spec (IDENTITY: clock, fresh entropy,
	 * hostname, MAC). */
	const char *restore_dir;
	/* 1: the rootfs's machine disk (vm: ROOTFS/.airlock-disk.ext4) is
	 * the sandbox's own, as its snapshot kept it, never to be replaced
	 * by the template's. Without restore_dir a vm boots it cold (no
	 * template memory fits that disk) and its agent says HELLO as after
	 * any start: what a caller does when a restore_dir start failed with
	 * AL_ESTATE (the sandbox resumes cold, its files kept). ns: no
	 * machine disk, nothing changes. */
	int own_disk;
} al_sandbox_spec;

/* What a capture wrote, for the shim's timing line and the snapshot's
 * record. */
typedef struct al_capture_stats {
	uint64_t dirty_pages; /* guest pages written since the template's */
	uint64_t bytes;	      /* new bytes on the pool (memory and state) */
	double state_ms, scan_ms, write_ms;
} al_capture_stats;

/* One named step of a start and what it took, for the shim's timing
 * line (a driver fills what it measures; the rest stay zero). */
#define AL_DRIVER_STEPS 12
typedef struct al_driver_step {
	const char *name; /* static string; NULL ends the list */
	double ms;
} al_driver_step;

typedef struct al_driver_handle {
	pid_t init_pid;	  /* the sandbox's first process (agent), in the host's
			 * pid namespace; the shim gets SIGCHLD when it dies */
	int agent_fd;	  /* stream socket to the agent, owned by the handle */
	char cgroup[256]; /* leaf name used under each controller */
	/* The owner's reader of agent_fd. A driver that speaks to the agent
	 * itself (vm adopt) must read through it, or bytes the owner has
	 * already buffered would be lost. NULL: nothing buffered. */
	struct al_frame_reader *agent_in;
	al_driver_step steps[AL_DRIVER_STEPS]; /* of the last start */
	void *priv;
} al_driver_handle;

typedef struct al_driver {
	const char *name;
	/* What h->init_pid is, for the messages about its end ("the
	 * sandbox's <init_name> exited with 1"). */
	const char *init_name;
	/* 1: a standby's first command is slow (a restored vm's guest pages
	 * and QEMU's translated code are cold), so the shim runs one before
	 * it offers the standby, off the claim's path. */
	int warm_up;
	/* The al_netslot_kind (core/net/slot.h) of the slot its sandboxes
	 * get: AL_NETSLOT_NS (a namespace to join) or AL_NETSLOT_VM (a
	 * tap). */
	int net_kind;
	/* Start the machine and its agent; on success h->agent_fd is
	 * connected to the agent (which will send HELLO). Everything created
	 * is released again on failure. */
	int (*start)(const al_sandbox_spec *spec, al_driver_handle *h,
		     al_err *err);
	/* Kill everything in the sandbox, reap the init, release cgroups and
	 * fds. Idempotent. */
	int (*stop)(al_driver_handle *h, al_err *err);
	/* Give a running standby machine (a warm pool entry) the identity
	 * of the sandbox that claims it: id (resource names), hostname and
	 * limits from spec; rootfs, agent and network slot are unchanged
	 * (a vm's slot takes the sandbox's MAC). */
	int (*adopt)(al_driver_handle *h, const al_sandbox_spec *spec,
		     al_err *err);
	/* 1 if the running machine can be adopted by a sandbox of limits
	 * l: a vm's vCPU count is its snapshot's and cannot change, so a
	 * standby serves only claims of its own (vm/shape.h). NULL: any
	 * limits fit (ns: its cgroup takes them). */
	int (*fits)(const al_driver_handle *h, const al_limits *l);
	/* Make the machine's own disk as big as bytes, the sandbox's disk
	 * limit, once its agent said HELLO (and after adopt): the vm's
	 * guest filesystem. Never trusts a size the guest reports; the
	 * qgroup caps the host's side either way. NULL where the machine's
	 * files are the host's (ns). */
	/* 1 when it grew the disk, 0 when it was big enough already. */
	int (*grow_disk)(al_driver_handle *h, uint64_t bytes, al_err *err);
	/* Stop / go on (resident: memory stays, nothing is released): vm
	 * QMP stop / cont, ns the freezer. */
	int (*pause)(al_driver_handle *h, al_err *err);
	int (*resume)(al_driver_handle *h, al_err *err);
	/* Save the paused machine's memory and device state into dir (an
	 * empty directory on the pool), for a later start with
	 * spec->restore_dir = dir. Only the guest pages written since the
	 * template's snapshot are written (the rest are the template's), so
	 * its cost follows what the guest wrote, not its size. The machine
	 * stays paused; its disk lives in the rootfs, which the caller
	 * snapshots next. NULL: the driver keeps no memory (ns), and a
	 * suspend keeps the filesystem only. */
	int (*capture)(al_driver_handle *h, const char *dir,
		       al_capture_stats *st, al_err *err);
	/* The accelerator the started machine runs under ("kvm", "tcg"):
	 * known only after start, since a restore runs under the one its
	 * snapshot was taken with. NULL where the machine is no virtual
	 * machine (ns): the sandbox has no accelerator. */
	const char *(*accel)(const al_driver_handle *h);
} al_driver;

/* Look a driver up by name; NULL with AL_EINVAL if unknown. */
const al_driver *al_driver_find(const char *name, al_err *err);

extern const al_driver al_driver_ns;
extern const al_driver al_driver_vm;

/* The drivers this host can run now, of those the operator enabled
 * (AIRLOCK_DRIVERS): vm only when QEMU, the guest kernel and the
 * accelerator probe are there and nothing was recorded against it
 * (core/vm/probe.h); the default is AIRLOCK_DEFAULT_DRIVER, else vm
 * where the probe found working KVM and vm is usable or where ns is
 * disabled, else ns. Creates and GET /v1/info read the same, so they
 * always agree. */
typedef struct al_driver_status {
	int ns_enabled;
	int vm_usable;
	char vm_why[400];	    /* why vm is not usable */
	const char *vm_accel;	    /* "kvm" or "tcg": what vm sandboxes get */
	const char *default_driver; /* "ns" or "vm" */
} al_driver_status;
/* Read what the probe recorded under cfg's state directory. */
void al_driver_status_read(const al_config *cfg, al_driver_status *st);

#endif
