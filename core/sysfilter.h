/* sysfilter: the jail's syscall filter (libseccomp), compiled to BPF once
 * per process so that the child between clone and exec only has to hand
 * a ready program to the kernel.
 *
 * Default allow, like container runtimes' default profiles; refused with
 * EPERM: kernel and module loading, bpf, perf, keyrings, every mount API,
 * swap, reboot, clock setting, file handles, accounting, syslog, quota,
 * port I/O, userfaultfd, unshare, setns, and clone with any CLONE_NEW*
 * flag. clone3 fails with ENOSYS so libc falls back to clone, whose flags
 * the filter can see. The same rules apply to the i386 and x32 ABIs. */
#ifndef AL_SYSFILTER_H
#define AL_SYSFILTER_H

#include <linux/filter.h>

#include "err.h"

/* The compiled filter; built on first use, shared, never freed. NULL with
 * AL_ESYS if libseccomp cannot build it. */
const struct sock_fprog *al_sysfilter_jail_prog(al_err *err);
/* Install prog on the calling thread; the caller must already have set
 * PR_SET_NO_NEW_PRIVS (or hold CAP_SYS_ADMIN). Async-signal-safe, for
 * the child between clone and exec: -1 with errno, no al_err. */
int al_sysfilter_install(const struct sock_fprog *prog);

#endif
