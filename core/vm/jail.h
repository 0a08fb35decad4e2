/* vmjail: the jail every QEMU of the vm driver runs in.
 *
 * QEMU parses what the guest sends through its emulated devices; a guest
 * that breaks it must land in a process that has nothing of the host.
 * So each QEMU gets:
 *   - a uid and gid of its own (al_vmjail_uid_take), no supplementary
 *     groups, no capabilities (an empty bounding set too), no_new_privs,
 *     no core dumps, and QEMU's syscall allowlist (sysfilter.h: threads
 *     but no new process, no socket(), mount, namespaces, bpf, perf,
 *     module loading, ptrace, io_uring...);
 *   - new mount, pid, network, ipc and uts namespaces: it is PID 1 of its
 *     own pid namespace, its network has only a downed loopback;
 *   - a root that is a read-only tmpfs holding /usr (read-only, nosuid),
 *     the /lib, /bin symlinks of a merged-/usr host, /dev/{null,zero,
 *     random,urandom} (+ a kvm node owned by the uid), its own /proc,
 *     and the read-only files the caller names (kernel, initrd). Nothing
 *     in it is writable: disks, guest RAM, sockets and logs come in as
 *     file descriptors.
 * No file on the host belongs to the uid, so a QEMU that escapes into its
 * root can only read what every user can. */
#ifndef AL_VMJAIL_H
#define AL_VMJAIL_H

#include <stddef.h>
#include <sys/types.h>

#include "base/err.h"
#include "host/uidrange.h"

/* Jailed QEMUs take uids [AL_VMJAIL_UID_BASE, +AL_VMJAIL_UID_COUNT), one
 * each, from the host-wide pool of uidrange.h (where the ranges are laid
 * out), so every Airlock state dir on the host shares it without handing
 * one uid to two QEMUs. */
#define AL_VMJAIL_UID_BASE AL_UIDRANGE_VM_BASE
#define AL_VMJAIL_UID_COUNT AL_UIDRANGE_VM_COUNT

typedef struct al_vmjail_uid {
	uid_t uid;   /* 0 when none is held */
	int lock_fd; /* the flock that holds it: closing it frees the uid */
} al_vmjail_uid;

/* Take a uid no other live holder on this host has; the search starts at
 * a place derived from hint (a sandbox id) so holders rarely contend.
 * The uid is held while u->lock_fd is open, by the holder (a shim) and,
 * through PR_SET_PDEATHSIG, by its QEMU. */
int al_vmjail_uid_take(const char *hint, al_vmjail_uid *u, al_err *err);
void al_vmjail_uid_drop(al_vmjail_uid *u);

typedef struct al_vmjail_file {
	const char *host; /* absolute path of a regular file on the host */
	const char
		*jail; /* "/dir/name", one directory level, made in the jail */
} al_vmjail_file;

typedef struct al_vmjail {
	uid_t uid;	  /* from al_vmjail_uid_take; never 0 */
	const char *root; /* empty host directory the jail root mounts on
			    * (only inside the jail's mount namespace) */
	int kvm;	  /* give it a /dev/kvm */
	const al_vmjail_file *files;
	size_t nfiles;
	const int *fds; /* fds[i] becomes descriptor i in the jail */
	int nfds;	/* at least 3 (stdin, stdout, stderr) */
} al_vmjail;

/* Start argv[0] (an absolute path under /usr) in a new jail. The child
 * is killed when the calling thread exits (PR_SET_PDEATHSIG), and the
 * child side assumes a single-threaded caller (it formats its error with
 * snprintf between clone and exec): shims and the builder are. Returns its pid (in
 * the caller's pid namespace) and a pidfd. A jail that cannot be set up
 * is an error naming the step, never an unjailed QEMU. */
pid_t al_vmjail_spawn(const al_vmjail *j, char *const argv[], int *pidfd,
		      al_err *err);

#endif
