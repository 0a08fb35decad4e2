/* sysfilter: the jails' syscall filters, compiled to BPF by libseccomp
 * when Airlock is built (core/host/sysfilter_gen.c holds the lists), so that a
 * jail's start only hands a ready program to the kernel.
 *
 * Both are allowlists. A call the filter knows by name and does not allow
 * fails with EPERM; a number it has no name for (a syscall newer than
 * libseccomp) fails with ENOSYS, so libc falls back as on an older kernel.
 * clone3 fails with ENOSYS for the same reason: libc then uses clone, whose
 * flags the filter can see, and clone with any CLONE_NEW* flag is EPERM.
 * The i386 (int 0x80) and x32 entry points get the same rules.
 *
 * The ns jail's list is Docker's default profile (moby
 * profiles/seccomp/default.json) for a process with Docker's default
 * capabilities, narrowed: no io_uring, modify_ldt, NUMA policy calls or
 * name_to_handle_at, no AF_VSOCK sockets (and no socket() at all through
 * the i386 entry, where the family cannot be checked), personality only
 * with Docker's personas.
 *
 * Both refuse the btrfs ioctls that create a subvolume or snapshot: each
 * would be a quota group of its own, outside the sandbox's disk limit.
 *
 * QEMU's list is what QEMU needs under TCG and KVM, taken from tracing
 * it: no new processes (clone must carry CLONE_THREAD), no socket(), no
 * mount API, namespaces, bpf, perf, keyrings, module loading, kexec,
 * ptrace, process_vm_*, io_uring, userfaultfd or personality. */
#ifndef AL_SYSFILTER_H
#define AL_SYSFILTER_H

#include <linux/filter.h>

#include "base/err.h"

/* The compiled filters, static and shared. Never NULL: err stays for
 * callers written when the program was built at run time. */
const struct sock_fprog *al_sysfilter_jail_prog(al_err *err);
const struct sock_fprog *al_sysfilter_qemu_prog(al_err *err);
/* The egress gateway's, installed by itself once its listeners, policy
 * and upstream resolver are open: threads but no processes or exec,
 * socket() of AF_UNIX, AF_INET and AF_INET6 only, no bind or listen,
 * files (the policy, the egress log) but no chmod, chown, mount, ... */
const struct sock_fprog *al_sysfilter_gateway_prog(void);
/* Install prog on the calling thread; the caller must already have set
 * PR_SET_NO_NEW_PRIVS (or hold CAP_SYS_ADMIN). Async-signal-safe, for
 * the child between clone and exec: -1 with errno, no al_err. */
int al_sysfilter_install(const struct sock_fprog *prog);

#endif
