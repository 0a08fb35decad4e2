/* core/sysfilter: each program is installed in a forked child that then
 * tries calls through the x86-64, i386 (int 0x80, where the kernel has
 * it) and x32 entry points: the refused ones fail with EPERM, numbers
 * the filter has no name for with ENOSYS, and what a shell, libc and
 * QEMU need still works. */
#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/keyctl.h>
#include <linux/net.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fdpass.h"
#include "host/sysfilter.h"

#define X32 0x40000000L

/* i386 numbers (arch/x86/entry/syscalls/syscall_32.tbl). */
enum {
	I386_GETPID = 20,
	I386_IOCTL = 54,
	I386_PERSONALITY = 136,
	I386_SOCKETCALL = 102,
	I386_CLONE = 120,
	I386_MODIFY_LDT = 123,
	I386_MBIND = 274,
	I386_KEYCTL = 288,
	I386_UNSHARE = 310,
	I386_KCMP = 349,
	I386_BPF = 357,
	I386_SOCKET = 359,
	I386_IO_URING_SETUP = 425,
};

/* x32 numbers without the x32 bit (syscall_64.tbl, "common" rows). */
enum {
	X32_PERSONALITY = 135,
	X32_MODIFY_LDT = 154,
	X32_MBIND = 237,
	X32_KEYCTL = 250,
	X32_UNSHARE = 272,
	X32_KCMP = 312,
	X32_BPF = 321,
	X32_IO_URING_SETUP = 425,
};

/* ---- the child's side: checks written to a pipe ---- */

static int report_fd = -1;

static void report(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof line - 2)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	if (write(report_fd, line, (size_t)n) < 0)
		_exit(3);
}

/* A libc-style result: -1 with errno e wanted. */
static void want_errno(const char *what, long rc, int e)
{
	int got = errno;
	if (rc != -1 || got != e)
		report("%s: rc %ld errno %d (%s), want errno %d (%s)", what, rc,
		       rc == -1 ? got : 0, rc == -1 ? strerror(got) : "-", e,
		       strerror(e));
}

static void want_ok(const char *what, long rc)
{
	if (rc < 0)
		report("%s: failed: %s", what, strerror(errno));
}

/* A raw i386 system call from 64-bit code; -errno on failure. */
static long int80(long nr, long a, long b, long c)
{
	long ret;
	__asm__ volatile("int $0x80"
			 : "=a"(ret)
			 : "a"(nr), "b"(a), "c"(b), "d"(c)
			 : "memory", "r8", "r9", "r10", "r11");
	return ret;
}

/* Whether this kernel has the i386 entry at all: some run int 0x80 from
 * 64-bit code as a fault (SIGSEGV), and then there is no i386 surface
 * for a filter to close. Probed once, in a child, before the tests. */
static int have_i386 = 1;

static int probe_i386(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);
		_exit(int80(I386_GETPID, 0, 0, 0) == getpid() ? 0 : 1);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return 1; /* unknown: the checks say what they see */
	return !(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
}

static void want_int80(const char *what, long nr, long a, int e)
{
	long rc = int80(nr, a, 0, 0);
	if (rc == 0 && nr == I386_CLONE)
		_exit(0); /* a child the filter let through */
	if (rc != -e)
		report("i386 %s: %ld, want -%d (%s)", what, rc, e, strerror(e));
}

/* A raw clone with fork semantics; the child exits 7 at once. */
static long raw_clone(unsigned long flags)
{
	long pid = syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, 0);
	if (pid == 0)
		_exit(7);
	if (pid > 0) {
		int st;
		if (waitpid((pid_t)pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 7)
			report("clone %#lx: child did not exit 7", flags);
	}
	return pid;
}

static void *thread_main(void *arg)
{
	return arg;
}

static void want_thread(void)
{
	pthread_t t;
	void *back = NULL;
	int rc = pthread_create(&t, NULL, thread_main, &report_fd);
	if (rc != 0) {
		report("pthread_create: %s", strerror(rc));
		return;
	}
	pthread_join(t, &back);
	if (back != &report_fd)
		report("thread returned %p", back);
}

/* What both jails refuse, on every entry point. Arguments are invalid
 * where the call, let through, would change the host. */
/* The refused calls through the i386 entry (int 0x80). */
static void i386_checks(void)
{
	want_int80("io_uring_setup", I386_IO_URING_SETUP, 1, EPERM);
	want_int80("modify_ldt", I386_MODIFY_LDT, 0, EPERM);
	want_int80("kcmp", I386_KCMP, 1, EPERM);
	want_int80("mbind", I386_MBIND, 0, EPERM);
	want_int80("keyctl", I386_KEYCTL, KEYCTL_GET_KEYRING_ID, EPERM);
	want_int80("bpf", I386_BPF, 0, EPERM);
	want_int80("unshare(CLONE_NEWUSER)", I386_UNSHARE, CLONE_NEWUSER,
		   EPERM);
	want_int80("clone(CLONE_NEWUSER)", I386_CLONE, CLONE_NEWUSER | SIGCHLD,
		   EPERM);
	want_int80("socket", I386_SOCKET, AF_UNIX, EPERM);
	want_int80("socketcall(SYS_SOCKET)", I386_SOCKETCALL, SYS_SOCKET,
		   EPERM);
	want_int80("syscall 1000", 1000, 0, ENOSYS);
	long bad = int80(I386_IOCTL, -1, (long)BTRFS_IOC_SUBVOL_CREATE, 0);
	if (bad != -EPERM)
		report("i386 ioctl(BTRFS_IOC_SUBVOL_CREATE): %ld, want %d", bad,
		       -EPERM);
	long pid = int80(I386_GETPID, 0, 0, 0);
	if (pid != getpid())
		report("i386 getpid: %ld, want %d", pid, (int)getpid());
}

static void refused_everywhere(void)
{
	struct {
		char b[120];
	} io_params = {{0}};
	want_errno("io_uring_setup", syscall(SYS_io_uring_setup, 1, &io_params),
		   EPERM);
	want_errno("io_uring_enter",
		   syscall(SYS_io_uring_enter, 0, 0, 0, 0, NULL, 0), EPERM);
	want_errno("keyctl",
		   syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID,
			   KEY_SPEC_SESSION_KEYRING, 0),
		   EPERM);
	want_errno("add_key",
		   syscall(SYS_add_key, "al-no-such-type", "x", "y", 1,
			   KEY_SPEC_SESSION_KEYRING),
		   EPERM);
	want_errno("bpf", syscall(SYS_bpf, 0, NULL, 0), EPERM);
	want_errno("perf_event_open",
		   syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM);
	want_errno("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER), EPERM);
	want_errno("unshare(CLONE_NEWNS)", unshare(CLONE_NEWNS), EPERM);
	want_errno("setns", setns(0, 0), EPERM);
	want_errno("clone(CLONE_NEWUSER)", raw_clone(CLONE_NEWUSER), EPERM);
	want_errno("clone(CLONE_NEWNET)", raw_clone(CLONE_NEWNET), EPERM);
	want_errno("mount",
		   syscall(SYS_mount, "none", "/al-no-such-dir",
			   "al-no-such-fs", 0, 0),
		   EPERM);
	want_errno("fsopen", syscall(SYS_fsopen, "tmpfs", 0), EPERM);
	want_errno("open_tree", syscall(SYS_open_tree, -1, "/", 0), EPERM);
	want_errno("init_module", syscall(SYS_init_module, NULL, 0, ""), EPERM);
	want_errno("finit_module", syscall(SYS_finit_module, -1, "", 0), EPERM);
	want_errno("kexec_load",
		   syscall(SYS_kexec_load, 0, 0, NULL, 0xdead0000ul), EPERM);
	want_errno("userfaultfd", syscall(SYS_userfaultfd, 0), EPERM);
	want_errno("open_by_handle_at",
		   syscall(SYS_open_by_handle_at, -1, NULL, 0), EPERM);
	want_errno("modify_ldt", syscall(SYS_modify_ldt, 0, NULL, 0), EPERM);
	want_errno("kcmp", syscall(SYS_kcmp, getpid(), getpid(), 0, 0, 0),
		   EPERM);
	want_errno("mbind", syscall(SYS_mbind, NULL, 0, 0, NULL, 0, 0), EPERM);
	want_errno("set_mempolicy", syscall(SYS_set_mempolicy, 0, NULL, 0),
		   EPERM);
	want_errno("get_mempolicy",
		   syscall(SYS_get_mempolicy, NULL, NULL, 0, NULL, 0), EPERM);
	want_errno("migrate_pages",
		   syscall(SYS_migrate_pages, 0, 0, NULL, NULL), EPERM);
	want_errno("move_pages",
		   syscall(SYS_move_pages, 0, 0, NULL, NULL, NULL, 0), EPERM);
	want_errno("socket(AF_VSOCK)", socket(AF_VSOCK, SOCK_STREAM, 0), EPERM);
	/* The kernel reads the family as an int: the register's upper half
	 * must not smuggle AF_VSOCK past the filter. */
	want_errno("socket(1 << 32 | AF_VSOCK)",
		   syscall(SYS_socket, (1L << 32) | AF_VSOCK, SOCK_STREAM, 0),
		   EPERM);

	/* btrfs subvolumes and snapshots (each a quota group of its own,
	 * outside the sandbox's disk limit), also with the request's
	 * upper half set (the kernel reads an unsigned int). fd -1: were
	 * one let through, it would fail with EBADF. */
	want_errno("ioctl(BTRFS_IOC_SUBVOL_CREATE)",
		   ioctl(-1, BTRFS_IOC_SUBVOL_CREATE, NULL), EPERM);
	want_errno("ioctl(BTRFS_IOC_SUBVOL_CREATE_V2)",
		   ioctl(-1, BTRFS_IOC_SUBVOL_CREATE_V2, NULL), EPERM);
	want_errno("ioctl(BTRFS_IOC_SNAP_CREATE)",
		   ioctl(-1, BTRFS_IOC_SNAP_CREATE, NULL), EPERM);
	want_errno("ioctl(BTRFS_IOC_SNAP_CREATE_V2)",
		   ioctl(-1, BTRFS_IOC_SNAP_CREATE_V2, NULL), EPERM);
	want_errno("ioctl(1 << 32 | BTRFS_IOC_SNAP_CREATE_V2)",
		   syscall(SYS_ioctl, -1, (1L << 32) | BTRFS_IOC_SNAP_CREATE_V2,
			   NULL),
		   EPERM);

	/* Numbers the filter has no name for, and clone3 (libc falls back
	 * to clone). */
	want_errno("syscall 1000", syscall(1000, 0, 0, 0), ENOSYS);
	want_errno("clone3", syscall(SYS_clone3, NULL, 0), ENOSYS);

	/* i386 through int 0x80. */
	if (have_i386)
		i386_checks();
	/* x32: the same calls with the x32 bit. */
	want_errno("x32 io_uring_setup",
		   syscall(X32 | X32_IO_URING_SETUP, 1, &io_params), EPERM);
	want_errno("x32 modify_ldt", syscall(X32 | X32_MODIFY_LDT, 0, 0, 0),
		   EPERM);
	want_errno("x32 kcmp", syscall(X32 | X32_KCMP, 1, 1, 0, 0, 0), EPERM);
	want_errno("x32 mbind", syscall(X32 | X32_MBIND, 0, 0, 0, 0, 0, 0),
		   EPERM);
	want_errno("x32 keyctl", syscall(X32 | X32_KEYCTL, 0, 0, 0), EPERM);
	want_errno("x32 bpf", syscall(X32 | X32_BPF, 0, 0, 0), EPERM);
	want_errno("x32 unshare", syscall(X32 | X32_UNSHARE, CLONE_NEWUSER),
		   EPERM);
	want_errno("x32 syscall 1000", syscall(X32 | 1000, 0, 0, 0), ENOSYS);
}

/* Plain work every process does. */
static void ordinary_work(void)
{
	int fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	want_ok("open", fd);
	want_ok("write", write(fd, "abc", 3) == 3 ? 0 : -1);
	want_ok("lseek", lseek(fd, 0, SEEK_SET));
	char buf[4] = "";
	want_ok("read",
		read(fd, buf, 3) == 3 && memcmp(buf, "abc", 3) == 0 ? 0 : -1);
	close(fd);
	void *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	want_ok("mmap", m == MAP_FAILED ? -1 : 0);
	if (m != MAP_FAILED) {
		memset(m, 1, 1 << 20);
		want_ok("munmap", munmap(m, 1 << 20));
	}
	want_ok("eventfd", (fd = (int)syscall(SYS_eventfd2, 0, 0)));
	close(fd);
	int p[2], queued = -1;
	want_ok("pipe", pipe(p));
	want_ok("write to pipe", write(p[1], "ab", 2) == 2 ? 0 : -1);
	want_ok("ioctl(FIONREAD)",
		ioctl(p[0], FIONREAD, &queued) == 0 && queued == 2 ? 0 : -1);
	close(p[0]);
	close(p[1]);
	want_thread();
}

static void ns_checks(void)
{
	refused_everywhere();
	ordinary_work();
	want_ok("fork without namespace flags", raw_clone(0));
	pid_t pid = fork();
	if (pid == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	int st = -1;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		report("fork and exec of /bin/true: status %#x", st);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	want_ok("socket(AF_INET)", s);
	close(s);
	s = socket(AF_UNIX, SOCK_DGRAM, 0);
	want_ok("socket(AF_UNIX)", s);
	close(s);
	s = socket(AF_INET6, SOCK_DGRAM, 0);
	want_ok("socket(AF_INET6)", s);
	close(s);
	s = socket(AF_NETLINK, SOCK_RAW, 0);
	want_ok("socket(AF_NETLINK)", s);
	close(s);
	want_errno("socket(64)", socket(64, SOCK_STREAM, 0), EPERM);
	int sp[2];
	want_ok("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, sp));
	/* Docker's personas, and nothing else. */
	want_ok("personality(PER_LINUX)", personality(PER_LINUX));
	want_ok("personality(query)", personality(0xffffffff));
	want_ok("personality(PER_LINUX32 | UNAME26)",
		personality(PER_LINUX32 | UNAME26));
	want_ok("personality back to PER_LINUX", personality(PER_LINUX));
	want_errno("personality(PER_BSD)", personality(PER_BSD), EPERM);
	want_errno("personality(ADDR_NO_RANDOMIZE)",
		   personality(PER_LINUX | ADDR_NO_RANDOMIZE), EPERM);
	want_errno("personality(READ_IMPLIES_EXEC)",
		   personality(PER_LINUX | READ_IMPLIES_EXEC), EPERM);
	/* The same through the i386 and x32 entries. */
	if (have_i386 && (int80(I386_PERSONALITY, PER_LINUX32, 0, 0) < 0 ||
			  int80(I386_PERSONALITY, PER_LINUX, 0, 0) < 0))
		report("i386 personality(PER_LINUX32, PER_LINUX) refused");
	if (have_i386)
		want_int80("personality(PER_BSD)", I386_PERSONALITY, PER_BSD,
			   EPERM);
	want_errno("x32 personality(PER_BSD)",
		   syscall(X32 | X32_PERSONALITY, PER_BSD), EPERM);
}

static void qemu_checks(void)
{
	refused_everywhere();
	ordinary_work();
	/* Threads only: no new process, no sockets of its own, no
	 * personality change, no tracing. */
	want_errno("fork", raw_clone(0), EPERM);
	want_errno("socket(AF_UNIX)", socket(AF_UNIX, SOCK_STREAM, 0), EPERM);
	want_errno("socket(AF_INET)", socket(AF_INET, SOCK_DGRAM, 0), EPERM);
	want_errno("personality(PER_LINUX)", personality(PER_LINUX), EPERM);
	want_errno("ptrace", syscall(SYS_ptrace, 0, 0, 0, 0), EPERM);
	char b;
	struct iovec iov = {&b, 1};
	want_errno("process_vm_readv",
		   syscall(SYS_process_vm_readv, getpid(), &iov, 1, &iov, 1, 0),
		   EPERM);
	want_errno("chroot", chroot("/"), EPERM);
}

static void gateway_checks(void)
{
	refused_everywhere();
	ordinary_work();
	/* Threads only, no exec; sockets of its families, never bound. */
	want_errno("fork", raw_clone(0), EPERM);
	want_errno("execve", execl("/bin/true", "true", (char *)NULL), EPERM);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	want_ok("socket(AF_INET)", s);
	struct sockaddr_in a = {.sin_family = AF_INET};
	want_errno("bind", bind(s, (struct sockaddr *)&a, sizeof a), EPERM);
	want_errno("listen", listen(s, 1), EPERM);
	close(s);
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	want_ok("socket(AF_UNIX)", s);
	close(s);
	s = socket(AF_INET6, SOCK_DGRAM, 0);
	want_ok("socket(AF_INET6)", s);
	close(s);
	want_errno("socket(AF_NETLINK)", socket(AF_NETLINK, SOCK_RAW, 0),
		   EPERM);
	want_errno("socket(AF_PACKET)", socket(AF_PACKET, SOCK_RAW, 0), EPERM);
	want_errno("socket(1 << 32 | AF_INET)",
		   syscall(SYS_socket, (1L << 32) | AF_INET, SOCK_STREAM, 0),
		   EPERM);
	want_errno("chmod", chmod("/tmp", 0777), EPERM);
	want_errno("ptrace", syscall(SYS_ptrace, 0, 0, 0, 0), EPERM);
	want_errno("personality(PER_LINUX)", personality(PER_LINUX), EPERM);
	/* Its credential channel comes over fd 6 with SCM_RIGHTS. */
	int sp[2];
	want_ok("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, sp));
	want_ok("al_fd_send", al_fd_send(sp[0], "x", 1, sp[0], NULL));
	char c;
	int got = -1;
	want_ok("al_fd_recv", (int)al_fd_recv(sp[1], &c, 1, &got, NULL) - 1);
	want_ok("a descriptor came", got >= 0 ? 0 : -1);
	close(got);
	close(sp[0]);
	close(sp[1]);
}

/* Without a filter the same child sees io_uring and new namespaces:
 * the refusals the tests below see are the filters', not this host's. */
static void unfiltered_checks(void)
{
	struct {
		char b[120];
	} io_params = {{0}};
	long fd = syscall(SYS_io_uring_setup, 1, &io_params);
	if (fd < 0)
		report("io_uring_setup unfiltered: %s", strerror(errno));
	if (geteuid() == 0 && unshare(CLONE_NEWUSER) < 0)
		report("unshare unfiltered: %s", strerror(errno));
	if (have_i386 && int80(I386_GETPID, 0, 0, 0) != getpid())
		report("the i386 entry answers getpid wrongly");
}

/* ---- the parent's side ---- */

/* Run checks in a child under prog (none if NULL); what they reported,
 * "" when all held. */
static const char *run_child(const struct sock_fprog *prog,
			     void (*checks)(void))
{
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		report_fd = p[1];
		if (prog != NULL &&
		    (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		     al_sysfilter_install(prog) < 0)) {
			report("install: %s", strerror(errno));
			_exit(1);
		}
		checks();
		_exit(0);
	}
	close(p[1]);
	static char out[16384];
	size_t have = 0;
	ssize_t n;
	while (have < sizeof out - 1 &&
	       (n = read(p[0], out + have, sizeof out - 1 - have)) > 0)
		have += (size_t)n;
	out[have] = '\0';
	close(p[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("checking child ended with status %#x: %s", st, out);
	return out;
}

static void test_host_allows_what_filters_refuse(void **state)
{
	(void)state;
	const char *out = run_child(NULL, unfiltered_checks);
	if (*out != '\0') {
		print_message("host baseline: %s", out);
		skip();
	}
}

/* Every check holds in a child under prog. */
static void assert_holds(const struct sock_fprog *prog, void (*checks)(void))
{
	assert_non_null(prog);
	const char *out = run_child(prog, checks);
	if (*out != '\0')
		fail_msg("%s", out);
}

static void test_jail_filter(void **state)
{
	(void)state;
	al_err err = {0};
	assert_holds(al_sysfilter_jail_prog(&err), ns_checks);
}

static void test_qemu_filter(void **state)
{
	(void)state;
	al_err err = {0};
	assert_holds(al_sysfilter_qemu_prog(&err), qemu_checks);
}

static void test_gateway_filter(void **state)
{
	(void)state;
	assert_holds(al_sysfilter_gateway_prog(), gateway_checks);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_allows_what_filters_refuse),
		cmocka_unit_test(test_jail_filter),
		cmocka_unit_test(test_qemu_filter),
		cmocka_unit_test(test_gateway_filter),
	};
	have_i386 = probe_i386();
	if (!have_i386)
		printf("this kernel has no i386 entry (int 0x80 from 64-bit "
		       "code ends the caller with SIGSEGV): no i386 surface "
		       "to filter, its checks are not made\n");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
