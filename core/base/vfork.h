/* vfork: run a function in a child that shares the caller's memory, as
 * posix_spawn does, until it execs or exits.
 *
 * A fork copies the caller's page tables and marks every writable page
 * copy-on-write; the exec that follows tears the copy down again, and
 * the caller's threads then fault on their own pages. For a caller with
 * many threads and mappings (an fcgi worker, a shim) that is milliseconds
 * per start. Here the child gets a stack of its own and the calling
 * thread sleeps until the child has exec'd or died (CLONE_VM |
 * CLONE_VFORK); the caller's other threads run on.
 *
 * The child starts with every signal blocked (a handler of the caller's
 * must never run on the shared memory) and may set the calling thread's
 * errno through libc wrappers; it must not return into, or allocate
 * from, the caller's heap. It unblocks signals with
 * al_vfork_exec_signals. */
#ifndef AL_VFORK_H
#define AL_VFORK_H

#include <sys/types.h>

#include "base/err.h"

/* Stack for the child, its lowest page a guard. ASan frames are large. */
#define AL_VFORK_STACK (256 << 10)

/* clone(fn, arg) with flags | CLONE_VM | CLONE_VFORK (add SIGCHLD, the
 * namespace flags, CLONE_PIDFD with pidfd, ...): returns the child's pid
 * once it has exec'd or exited, or -1 (err set; err may be NULL). what
 * names the child in the error. */
pid_t al_vfork_call(int (*fn)(void *), void *arg, int flags, int *pidfd,
		    const char *what, al_err *err);

/* In the child, before it unblocks anything: every disposition back to
 * the default (no handler of the caller's can run on its memory, and no
 * ignored signal of the caller's survives into the program), then an
 * empty signal mask. */
void al_vfork_exec_signals(void);

#endif
