/* vfork: see vfork.h. */
#include "base/vfork.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define GUARD 4096

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define stack_unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define stack_unpoison(p, n) ((void)(p), (void)(n))
#endif

pid_t al_vfork_call(int (*fn)(void *), void *arg, int flags, int *pidfd,
		    const char *what, al_err *err)
{
	void *stack = mmap(NULL, AL_VFORK_STACK, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return al_err_sys(err, AL_ENOMEM, errno, "%s: stack", what);
	/* An overflow faults instead of writing into the caller's memory
	 * below the stack. */
	if (mprotect(stack, GUARD, PROT_NONE) < 0) {
		int e = errno;
		munmap(stack, AL_VFORK_STACK);
		return al_err_sys(err, AL_ENOMEM, e, "%s: stack guard", what);
	}
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t pid = clone(fn, (char *)stack + AL_VFORK_STACK,
			  flags | CLONE_VM | CLONE_VFORK, arg, pidfd);
	int clone_errno = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* The child's frames never returned: what ASan marked in them
	 * would outlive the mapping and trip over whatever lands there. */
	stack_unpoison(stack, AL_VFORK_STACK);
	munmap(stack, AL_VFORK_STACK);
	if (pid < 0)
		return al_err_sys(err, AL_ESYS, clone_errno, "clone %s", what);
	return pid;
}

/* The kernel's struct for rt_sigaction (no restorer: SIG_DFL needs
 * none). */
struct kernel_sigaction_dfl {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};

void al_vfork_exec_signals(void)
{
	/* Without CLONE_SIGHAND the child's table is its own copy: this
	 * leaves the caller's alone. The system call itself, not libc's
	 * sigaction: libc refuses the two real-time signals it keeps for
	 * its threads, and a parent that ignored them would pass that on
	 * (SIGKILL and SIGSTOP fail, and are always default). */
	struct kernel_sigaction_dfl k = {.handler = SIG_DFL};
	for (int sig = 1; sig < NSIG; sig++)
		syscall(SYS_rt_sigaction, sig, &k, NULL, sizeof k.mask);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}
