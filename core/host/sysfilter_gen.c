/* sysfilter-gen: compiles the jails' syscall allowlists (sysfilter.h says
 * what they admit) to BPF with libseccomp at build time and prints them as
 * C (the build's gen/sysfilter_bpf.c), so a jail's start only hands a
 * ready program to the kernel: libseccomp takes tens of milliseconds to
 * generate a three-ABI filter of this size.
 *
 *   sysfilter-gen > sysfilter_bpf.c        (sysfilter-gen --pfc: readable)
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/btrfs.h>
#include <linux/filter.h>
#include <seccomp.h>

/* The ns jail: Docker's default allowlist for its default capability set
 * (the jail keeps that set), grouped by topic. Calls Docker admits only
 * with a capability the jail does not hold are absent, and so are those
 * sysfilter.h names. Names this libseccomp does not know are skipped. */
/* clang-format off */
static const char *const ns_allow[] = {
	/* files and descriptors */
	"access", "faccessat", "faccessat2", "chdir", "fchdir", "getcwd",
	"chmod", "fchmod", "fchmodat", "chown", "chown32", "fchown",
	"fchown32", "fchownat", "lchown", "lchown32", "umask", "chroot",
	"open", "openat", "openat2", "creat", "close", "close_range", "dup",
	"dup2", "dup3", "fcntl", "fcntl64", "flock", "read", "readv",
	"pread64", "preadv", "preadv2", "write", "writev", "pwrite64",
	"pwritev", "pwritev2", "lseek", "_llseek", "sendfile", "sendfile64",
	"copy_file_range", "splice", "tee", "vmsplice", "readahead",
	"fadvise64", "fadvise64_64", "fallocate", "truncate", "truncate64",
	"ftruncate", "ftruncate64", "fsync", "fdatasync", "sync", "syncfs",
	"sync_file_range", "stat", "stat64", "lstat", "lstat64", "fstat",
	"fstat64", "fstatat64", "newfstatat", "statx", "statfs", "statfs64",
	"fstatfs", "fstatfs64", "getdents", "getdents64", "link", "linkat",
	"symlink", "symlinkat", "unlink", "unlinkat", "rename", "renameat",
	"renameat2", "mkdir", "mkdirat", "rmdir", "mknod", "mknodat",
	"readlink", "readlinkat", "utime", "utimes", "utimensat",
	"utimensat_time64", "futimesat", "getxattr", "lgetxattr",
	"fgetxattr", "setxattr", "lsetxattr", "fsetxattr", "listxattr",
	"llistxattr", "flistxattr", "removexattr", "lremovexattr",
	"fremovexattr", "inotify_init", "inotify_init1", "inotify_add_watch",
	"inotify_rm_watch", "fanotify_mark", "pipe", "pipe2", "eventfd",
	"eventfd2", "memfd_create", "memfd_secret",
	/* asynchronous I/O (not io_uring) and waiting on descriptors */
	"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents",
	"io_pgetevents", "io_pgetevents_time64", "ioprio_get", "ioprio_set",
	"select", "_newselect", "pselect6", "pselect6_time64", "poll",
	"ppoll", "ppoll_time64", "epoll_create", "epoll_create1",
	"epoll_ctl", "epoll_ctl_old", "epoll_wait", "epoll_wait_old",
	"epoll_pwait", "epoll_pwait2",
	/* memory */
	"brk", "mmap", "mmap2", "munmap", "mremap", "mprotect", "madvise",
	"mincore", "msync", "mlock", "mlock2", "mlockall", "munlock",
	"munlockall", "remap_file_pages", "membarrier", "pkey_alloc",
	"pkey_free", "pkey_mprotect",
	/* processes, threads and scheduling */
	"execve", "execveat", "fork", "vfork", "exit", "exit_group", "wait4",
	"waitid", "waitpid", "getpid", "getppid", "gettid", "getpgid",
	"setpgid", "getpgrp", "getsid", "setsid", "set_tid_address",
	"set_robust_list", "get_robust_list", "rseq", "futex",
	"futex_time64", "futex_waitv", "arch_prctl", "prctl", "seccomp",
	"set_thread_area", "get_thread_area", "capget", "capset", "getrlimit",
	"ugetrlimit", "setrlimit", "prlimit64", "getrusage", "getpriority",
	"setpriority", "sched_yield", "sched_getaffinity",
	"sched_setaffinity", "sched_getattr", "sched_setattr",
	"sched_getparam", "sched_setparam", "sched_getscheduler",
	"sched_setscheduler", "sched_get_priority_max",
	"sched_get_priority_min", "sched_rr_get_interval",
	"sched_rr_get_interval_time64", "getcpu", "pidfd_open",
	"pidfd_send_signal", "process_mrelease", "landlock_create_ruleset",
	"landlock_add_rule", "landlock_restrict_self",
	/* Docker admits these on kernels >= 4.8, where seccomp sees the
	 * syscall a tracer rewrites */
	"ptrace", "process_vm_readv", "process_vm_writev",
	/* credentials */
	"getuid", "getuid32", "geteuid", "geteuid32", "getgid", "getgid32",
	"getegid", "getegid32", "getresuid", "getresuid32", "getresgid",
	"getresgid32", "getgroups", "getgroups32", "setuid", "setuid32",
	"setgid", "setgid32", "setreuid", "setreuid32", "setregid",
	"setregid32", "setresuid", "setresuid32", "setresgid",
	"setresgid32", "setfsuid", "setfsuid32", "setfsgid", "setfsgid32",
	"setgroups", "setgroups32",
	/* signals */
	"kill", "tkill", "tgkill", "rt_sigaction", "rt_sigprocmask",
	"rt_sigreturn", "rt_sigpending", "rt_sigsuspend", "rt_sigtimedwait",
	"rt_sigtimedwait_time64", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
	"sigaltstack", "sigreturn", "sigprocmask", "signalfd", "signalfd4",
	"pause", "restart_syscall",
	/* time (reading it; setting it needs CAP_SYS_TIME) */
	"time", "gettimeofday", "clock_gettime", "clock_gettime64",
	"clock_getres", "clock_getres_time64", "clock_nanosleep",
	"clock_nanosleep_time64", "nanosleep", "adjtimex", "clock_adjtime",
	"clock_adjtime64", "alarm", "getitimer", "setitimer", "times",
	"timer_create", "timer_delete", "timer_getoverrun", "timer_gettime",
	"timer_gettime64", "timer_settime", "timer_settime64",
	"timerfd_create", "timerfd_gettime", "timerfd_gettime64",
	"timerfd_settime", "timerfd_settime64",
	/* sockets (socket itself: socket_rules) */
	"socketpair", "bind", "connect", "listen", "accept", "accept4",
	"getsockname", "getpeername", "getsockopt", "setsockopt", "shutdown",
	"send", "sendto", "sendmsg", "sendmmsg", "recv", "recvfrom",
	"recvmsg", "recvmmsg", "recvmmsg_time64",
	/* System V and POSIX IPC */
	"msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop",
	"semtimedop", "semtimedop_time64", "semctl", "shmget", "shmat",
	"shmdt", "shmctl", "mq_open", "mq_unlink", "mq_timedsend",
	"mq_timedsend_time64", "mq_timedreceive", "mq_timedreceive_time64",
	"mq_notify", "mq_getsetattr",
	/* the system */
	"uname", "sysinfo", "getrandom",
};
/* clang-format on */

/* QEMU: the calls a traced QEMU made (restore, snapshot, cold boot,
 * pause, probe under TCG), the rest of their families, and what KVM adds
 * (ioctl on /dev/kvm, eventfds, signals to vCPU threads). io_uring is
 * absent: QEMU's event loop then uses epoll or ppoll. */
/* clang-format off */
static const char *const qemu_allow[] = {
	/* files and descriptors */
	"access", "faccessat", "faccessat2", "open", "openat", "close",
	"dup", "dup2", "dup3", "fcntl", "read", "readv", "pread64",
	"preadv", "preadv2", "write", "writev", "pwrite64", "pwritev",
	"pwritev2", "lseek", "fallocate", "ftruncate", "fsync", "fdatasync",
	"fadvise64", "stat", "lstat", "fstat", "newfstatat", "statx",
	"statfs", "fstatfs", "readlink", "readlinkat", "getcwd",
	"getdents64", "pipe2", "eventfd2", "signalfd4", "memfd_create",
	"ppoll", "poll", "epoll_create1", "epoll_ctl", "epoll_wait",
	"epoll_pwait", "epoll_pwait2",
	/* memory */
	"brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore",
	"msync",
	/* threads (clone: clone_rules) */
	"execve", "exit", "exit_group", "getpid", "gettid", "getppid",
	"set_tid_address", "set_robust_list", "rseq", "futex", "arch_prctl",
	"prctl", "seccomp", "getrlimit", "prlimit64", "sched_yield",
	"sched_getaffinity", "getuid", "geteuid", "getgid", "getegid",
	/* signals */
	"tgkill", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn",
	"rt_sigpending", "rt_sigtimedwait", "sigaltstack",
	"restart_syscall",
	/* time */
	"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep",
	"gettimeofday", "timerfd_create", "timerfd_settime",
	"timerfd_gettime",
	/* the sockets it is given: QMP, the agent channel */
	"getsockname", "getpeername", "getsockopt", "setsockopt", "shutdown",
	"sendto", "sendmsg", "recvfrom", "recvmsg",
	/* the system */
	"uname", "sysinfo", "getrandom",
};
/* clang-format on */

/* The egress gateway (gateway/), after it has opened its listeners:
 * one event loop on sockets it accepts and dials (IPv4, IPv6 for a
 * resolver, AF_UNIX for the mint service; recvmsg takes the credential
 * channel the shim passes on fd 6 with SCM_RIGHTS), the policy file it rereads,
 * and the egress files it writes (tmp + rename) and counts. No new
 * processes, no exec, no bind: its listeners came from its launcher. */
/* clang-format off */
static const char *const gateway_allow[] = {
	/* files and descriptors */
	"access", "faccessat", "faccessat2", "open", "openat", "close",
	"dup", "dup2", "dup3", "fcntl", "read", "readv", "pread64",
	"write", "writev", "pwrite64", "lseek", "fsync", "fdatasync",
	"stat", "lstat", "fstat", "newfstatat", "statx", "readlink",
	"readlinkat", "getcwd", "getdents64", "rename", "renameat",
	"renameat2", "unlink", "unlinkat", "pipe2", "eventfd2", "ppoll",
	"poll", "select", "pselect6", "epoll_create1", "epoll_ctl",
	"epoll_wait", "epoll_pwait", "epoll_pwait2",
	/* memory */
	"brk", "mmap", "munmap", "mremap", "mprotect", "madvise",
	/* threads only (clone: clone_rules) */
	"exit", "exit_group", "getpid", "gettid", "getppid",
	"set_tid_address", "set_robust_list", "rseq", "futex", "arch_prctl",
	"getrlimit", "prlimit64", "sched_yield", "sched_getaffinity",
	"getuid", "geteuid", "getgid", "getegid",
	/* signals */
	"tgkill", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn",
	"sigaltstack", "restart_syscall",
	/* time */
	"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep",
	"gettimeofday", "time",
	/* sockets (socket: family_rules) */
	"accept", "accept4", "connect", "getsockname", "getpeername",
	"getsockopt", "setsockopt", "shutdown", "sendto", "sendmsg",
	"sendmmsg", "recvfrom", "recvmsg", "recvmmsg", "socketpair",
	/* the system */
	"uname", "sysinfo", "getrandom",
};
/* clang-format on */
static const int gateway_families[] = {AF_UNIX, AF_INET, AF_INET6};

typedef struct profile {
	const char *const *allow;
	size_t nallow;
	/* flags every clone must carry: CLONE_THREAD for QEMU, which
	 * starts threads and never processes */
	unsigned long clone_need;
	/* socket() and personality() as Docker filters them; without,
	 * both are refused */
	int docker_args;
	/* without docker_args: the only families socket() may make (none:
	 * socket() is refused); personality() is refused */
	const int *families;
	size_t nfamilies;
} profile;

static const profile ns_profile = {
	ns_allow, sizeof ns_allow / sizeof ns_allow[0], 0, 1, NULL, 0};
static const profile qemu_profile = {qemu_allow,
				     sizeof qemu_allow / sizeof qemu_allow[0],
				     CLONE_THREAD,
				     0,
				     NULL,
				     0};
static const profile gateway_profile = {
	gateway_allow,	  sizeof gateway_allow / sizeof gateway_allow[0],
	CLONE_THREAD,	  0,
	gateway_families, sizeof gateway_families / sizeof gateway_families[0]};

/* Decided by the argument rules below, never refused outright: on i386
 * libseccomp derives the socketcall and ipc multiplexers' rules from the
 * rules of the calls they stand for. */
static const char *const arg_ruled[] = {
	"clone",      "clone3", "socket", "personality",
	"socketcall", "ipc",	"ioctl",
};

/* CLONE_NEWTIME is absent: clone has no room for it (0x80 is in the exit
 * signal byte); only clone3 and unshare take it, both refused. */
static const unsigned long ns_flags[] = {
	CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,    CLONE_NEWUSER,
	CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
};

/* Docker's personas: PER_LINUX, PER_LINUX32, UNAME26, PER_LINUX32 with
 * UNAME26, and 0xffffffff, the query. */
#define PERSONA_BITS 0x00020008u
#define PERSONA_QUERY 0xffffffffu

static void die(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("sysfilter-gen: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static int listed(const char *const *names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return 1;
	return 0;
}

static void rule(scmp_filter_ctx ctx, uint32_t action, const char *name,
		 unsigned n, const struct scmp_arg_cmp *cmp)
{
	int rc = seccomp_rule_add_array(ctx, action,
					seccomp_syscall_resolve_name(name), n,
					cmp);
	if (rc < 0 && rc != -EEXIST)
		die("rule for %s: %s", name, strerror(-rc));
}

static void clone_rules(scmp_filter_ctx ctx, const profile *p)
{
	unsigned long all = p->clone_need;
	for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++)
		all |= ns_flags[i];
	struct scmp_arg_cmp ok = SCMP_A0(SCMP_CMP_MASKED_EQ, all,
					 p->clone_need);
	rule(ctx, SCMP_ACT_ALLOW, "clone", 1, &ok);
	/* The complement, one rule per flag: libseccomp has no "masked
	 * not-equal". */
	for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++) {
		struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i],
						ns_flags[i]);
		rule(ctx, SCMP_ACT_ERRNO(EPERM), "clone", 1, &c);
	}
	if (p->clone_need != 0) {
		struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ,
						p->clone_need, 0);
		rule(ctx, SCMP_ACT_ERRNO(EPERM), "clone", 1, &c);
	}
	/* clone3 gets no rule: it takes the default, ENOSYS (libseccomp
	 * refuses a rule that repeats the default action). */
}

/* ioctl requests refused to both jails. A btrfs subvolume or snapshot is
 * a quota group of its own: made inside a sandbox's rootfs, it would hold
 * data outside the sandbox's disk limit (the kernel lets the owner of a
 * directory create one without any capability). */
static const unsigned long refused_ioctls[] = {
	BTRFS_IOC_SUBVOL_CREATE,
	BTRFS_IOC_SUBVOL_CREATE_V2,
	BTRFS_IOC_SNAP_CREATE,
	BTRFS_IOC_SNAP_CREATE_V2,
};

/* The kernel reads the request as an unsigned int: only the low half of
 * the register is compared. Everything else is allowed by a rule with an
 * always-true comparison, which libseccomp tests after the EPERM ones (a
 * rule without a comparison would override them; test_sysfilter checks). */
static void ioctl_rules(scmp_filter_ctx ctx)
{
	for (size_t i = 0; i < sizeof refused_ioctls / sizeof refused_ioctls[0];
	     i++) {
		struct scmp_arg_cmp c = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu,
						refused_ioctls[i]);
		rule(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &c);
	}
	struct scmp_arg_cmp any = SCMP_A1(SCMP_CMP_GE, 0);
	rule(ctx, SCMP_ACT_ALLOW, "ioctl", 1, &any);
}

/* Families 0..63 but AF_VSOCK as aligned blocks, (low bits ignored,
 * value): the kernel reads the family as an int, so the upper half of
 * the register must match no rule (a plain "!= 40" would admit
 * 0x100000028). Families past 63 do not exist. */
static const struct {
	uint64_t low, value;
} families[] = {{31, 0}, {7, 32}, {0, 41}, {1, 42}, {3, 44}, {15, 48}};

/* Docker's argument filters. What no ALLOW rule admits meets an EPERM
 * rule with an always-true comparison, not one without a comparison
 * (that would override the ALLOW rules); libseccomp tests it after them
 * (test_sysfilter checks). */
static void docker_arg_rules(scmp_filter_ctx ctx, uint32_t arch)
{
	struct scmp_arg_cmp any = SCMP_A0(SCMP_CMP_GE, 0);

	/* Through i386's socketcall the family is in memory the filter
	 * cannot read, and libseccomp derives socketcall's rule from
	 * socket's: so no socket() for i386 code at all. */
	if (arch == SCMP_ARCH_X86) {
		rule(ctx, SCMP_ACT_ERRNO(EPERM), "socket", 0, NULL);
	} else {
		/* libseccomp compares x32's arguments as 32 bits wide. */
		uint64_t word = arch == SCMP_ARCH_X32 ? 0xffffffffu : ~0ull;
		for (size_t i = 0; i < sizeof families / sizeof families[0];
		     i++) {
			struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ,
							word & ~families[i].low,
							families[i].value);
			rule(ctx, SCMP_ACT_ALLOW, "socket", 1, &c);
		}
		rule(ctx, SCMP_ACT_ERRNO(EPERM), "socket", 1, &any);
	}
	/* The four personas are exactly the values without a bit outside
	 * PERSONA_BITS. */
	struct scmp_arg_cmp bits = SCMP_A0(SCMP_CMP_MASKED_EQ,
					   (uint32_t)~PERSONA_BITS, 0);
	struct scmp_arg_cmp query = SCMP_A0(SCMP_CMP_EQ, PERSONA_QUERY);
	rule(ctx, SCMP_ACT_ALLOW, "personality", 1, &bits);
	rule(ctx, SCMP_ACT_ALLOW, "personality", 1, &query);
	rule(ctx, SCMP_ACT_ERRNO(EPERM), "personality", 1, &any);
}

/* socket() of p's families only, compared as the int the kernel reads
 * (the register's upper half must be clear); none through i386's
 * socketcall, whose arguments the filter cannot read. */
static void family_rules(scmp_filter_ctx ctx, const profile *p, uint32_t arch)
{
	if (arch == SCMP_ARCH_X86) {
		rule(ctx, SCMP_ACT_ERRNO(EPERM), "socket", 0, NULL);
		return;
	}
	uint64_t word = arch == SCMP_ARCH_X32 ? 0xffffffffu : ~0ull;
	for (size_t i = 0; i < p->nfamilies; i++) {
		struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, word,
						(uint64_t)p->families[i]);
		rule(ctx, SCMP_ACT_ALLOW, "socket", 1, &c);
	}
	struct scmp_arg_cmp any = SCMP_A0(SCMP_CMP_GE, 0);
	rule(ctx, SCMP_ACT_ERRNO(EPERM), "socket", 1, &any);
}

/* Every name this libseccomp knows on arch that p neither allows nor
 * decides by argument: EPERM, so only unknown numbers reach the default
 * (ENOSYS). */
static void refuse_the_rest(scmp_filter_ctx ctx, const profile *p,
			    uint32_t arch)
{
	int base = arch == SCMP_ARCH_X32 ? 0x40000000 : 0;
	for (int nr = 0; nr < 1024; nr++) {
		char *name = seccomp_syscall_resolve_num_arch(arch, base + nr);
		if (name != NULL && !listed(p->allow, p->nallow, name) &&
		    !listed(arg_ruled, sizeof arg_ruled / sizeof arg_ruled[0],
			    name))
			rule(ctx, SCMP_ACT_ERRNO(EPERM), name, 0, NULL);
		free(name);
	}
}

/* One ABI's filter. Each gets a context of its own because the socket
 * rules differ on i386 (docker_arg_rules). */
static scmp_filter_ctx build_arch(const profile *p, uint32_t arch)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
	if (ctx == NULL)
		die("seccomp_init failed");
	int rc = 0;
	if (arch != seccomp_arch_native()) {
		rc = seccomp_arch_add(ctx, arch);
		if (rc == 0)
			rc = seccomp_arch_remove(ctx, SCMP_ARCH_NATIVE);
	}
	/* A binary tree rather than a linear scan of some 400 numbers. */
	if (rc == 0)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (rc < 0)
		die("arch %#x: %s", arch, strerror(-rc));
	for (size_t i = 0; i < p->nallow; i++) {
		/* Not on this ABI, or unknown to this libseccomp. */
		if (seccomp_syscall_resolve_name_arch(arch, p->allow[i]) !=
		    __NR_SCMP_ERROR)
			rule(ctx, SCMP_ACT_ALLOW, p->allow[i], 0, NULL);
	}
	clone_rules(ctx, p);
	ioctl_rules(ctx);
	if (p->docker_args) {
		docker_arg_rules(ctx, arch);
	} else if (p->nfamilies > 0) {
		family_rules(ctx, p, arch);
		rule(ctx, SCMP_ACT_ERRNO(EPERM), "personality", 0, NULL);
	} else {
		rule(ctx, SCMP_ACT_ERRNO(EPERM), "socket", 0, NULL);
		rule(ctx, SCMP_ACT_ERRNO(EPERM), "personality", 0, NULL);
	}
	refuse_the_rest(ctx, p, arch);
	return ctx;
}

/* The filter for every ABI the native one can enter: on x86-64, i386
 * through int 0x80 and x32 through numbers with bit 30 set. */
static scmp_filter_ctx build(const profile *p)
{
	uint32_t native = seccomp_arch_native();
	scmp_filter_ctx ctx = build_arch(p, native);
	if (native == SCMP_ARCH_X86_64) {
		static const uint32_t more[] = {SCMP_ARCH_X86, SCMP_ARCH_X32};
		for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
			int rc = seccomp_merge(ctx, build_arch(p, more[i]));
			if (rc < 0)
				die("seccomp_merge: %s", strerror(-rc));
		}
	}
	return ctx;
}

/* Export ctx as a C array named name and its struct sock_fprog. */
static void print_prog(scmp_filter_ctx ctx, const char *name)
{
	FILE *f = tmpfile();
	if (f == NULL)
		die("tmpfile: %s", strerror(errno));
	int rc = seccomp_export_bpf(ctx, fileno(f));
	if (rc < 0)
		die("seccomp_export_bpf: %s", strerror(-rc));
	long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
	if (len <= 0 || len % (long)sizeof(struct sock_filter) != 0 ||
	    len / (long)sizeof(struct sock_filter) > BPF_MAXINSNS)
		die("%s: seccomp program of %ld bytes", name, len);
	rewind(f);
	printf("static const struct sock_filter %s_insns[] = {\n", name);
	struct sock_filter in;
	while (fread(&in, sizeof in, 1, f) == 1)
		printf("\t{0x%04x, %u, %u, 0x%08x},\n", in.code, in.jt, in.jf,
		       in.k);
	printf("};\nconst struct sock_fprog al_sysfilter_%s = {\n"
	       "\tsizeof %s_insns / sizeof %s_insns[0],\n"
	       "\t(struct sock_filter *)%s_insns,\n};\n",
	       name, name, name, name);
	fclose(f);
}

int main(int argc, char **argv)
{
	int pfc = argc > 1 && strcmp(argv[1], "--pfc") == 0;
	static const struct {
		const profile *p;
		const char *name;
	} progs[] = {{&ns_profile, "jail"},
		     {&qemu_profile, "qemu"},
		     {&gateway_profile, "gateway"}};
	if (!pfc)
		printf("/* Generated by sysfilter-gen (core/host/sysfilter_gen.c) "
		       "with libseccomp %u.%u.%u. */\n"
		       "#include \"host/sysfilter_internal.h\"\n\n",
		       seccomp_version()->major, seccomp_version()->minor,
		       seccomp_version()->micro);
	for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
		scmp_filter_ctx ctx = build(progs[i].p);
		if (pfc) {
			printf("# %s\n", progs[i].name);
			seccomp_export_pfc(ctx, fileno(stdout));
		} else {
			print_prog(ctx, progs[i].name);
		}
		seccomp_release(ctx);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}
