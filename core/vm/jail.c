/* vmjail: see vm/jail.h. The child side runs between clone3 and execve in
 * a copy of a single-threaded caller: no allocation, no stdio, errors go
 * back to the parent through a close-on-exec pipe (EOF = exec done). */
#include "vm/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "host/sysfilter.h"

/* ---- uids ---- */

int al_vmjail_uid_take(const char *hint, al_vmjail_uid *u, al_err *err)
{
	al_uidrange r;
	int rc = al_uidrange_take(&al_uidrange_vm, hint, &r, err);
	u->uid = r.base;
	u->lock_fd = r.lock_fd;
	return rc;
}

void al_vmjail_uid_drop(al_vmjail_uid *u)
{
	if (u == NULL)
		return;
	al_uidrange r = {.base = u->uid, .lock_fd = u->lock_fd};
	al_uidrange_drop(&r);
	u->uid = 0;
	u->lock_fd = -1;
}

/* ---- the child: build the root, drop everything, exec ---- */

/* Report "what: strerror" to the parent and die. */
static void __attribute__((noreturn)) child_fail(int efd, const char *what)
{
	char msg[200];
	int e = errno;
	int n = snprintf(msg, sizeof msg, "%s: %s", what, strerror(e));
	if (n > 0)
		(void)!write(efd, msg,
			     (size_t)n < sizeof msg ? (size_t)n
						    : sizeof msg - 1);
	_exit(111);
}

/* Bind host over the existing node at target, then make that mount
 * read-only (and nosuid/nodev/noexec as flags says): a bind mount takes
 * its flags only on a remount. */
static int bind_ro(const char *host, const char *target, unsigned long flags)
{
	if (mount(host, target, NULL, MS_BIND | MS_REC, NULL) < 0)
		return -1;
	return mount(NULL, target, NULL,
		     MS_REMOUNT | MS_BIND | MS_RDONLY | flags, NULL);
}

static int touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* /lib, /lib64, /bin, /sbin as the host has them: symlinks into /usr on
 * a merged-/usr host, else read-only binds. */
static int mirror_top(const char *name, char *buf, size_t len)
{
	char host[32];
	snprintf(host, sizeof host, "/%s", name);
	struct stat st;
	if (lstat(host, &st) < 0)
		return errno == ENOENT ? 0 : -1;
	if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlink(host, buf, len - 1);
		if (n < 0)
			return -1;
		buf[n] = '\0';
		return symlink(buf, name);
	}
	if (!S_ISDIR(st.st_mode))
		return 0;
	if (mkdir(name, 0755) < 0)
		return -1;
	return bind_ro(host, name, MS_NOSUID | MS_NODEV);
}

/* Has the parent gone (its end of the alive pipe closed)? */
static int parent_gone(int alive)
{
	struct pollfd p = {.fd = alive, .events = POLLIN};
	return poll(&p, 1, 0) != 0;
}

/* "/dir/name": one directory level, neither part empty, "." or "..",
 * so the file and its directory land inside the jail's root. */
static int jail_path_ok(const char *in)
{
	if (in == NULL || in[0] != '/')
		return 0;
	const char *slash = strchr(in + 1, '/');
	if (slash == NULL || strchr(slash + 1, '/') != NULL)
		return 0;
	size_t dl = (size_t)(slash - in) - 1;
	const char *name = slash + 1;
	if (dl == 0 || dl >= 200 || name[0] == '\0')
		return 0;
	if (in[1] == '.' && (dl == 1 || (dl == 2 && in[2] == '.')))
		return 0;
	return strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static void __attribute__((noreturn))
child_run(const al_vmjail *j, char *const argv[],
	  const struct sock_fprog *filter, int efd, int alive)
{
	/* Die with the caller; the pipe catches a death before this. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || parent_gone(alive))
		_exit(111);
	char buf[256];
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		child_fail(efd, "make / private");
	if (mount("airlock-vm", j->root, "tmpfs",
		  MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,mode=0755") < 0)
		child_fail(efd, "mount the jail's tmpfs");
	if (chdir(j->root) < 0)
		child_fail(efd, "chdir to the jail");
	if (mkdir("usr", 0755) < 0 ||
	    bind_ro("/usr", "usr", MS_NOSUID | MS_NODEV) < 0)
		child_fail(efd, "bind /usr");
	static const char *const tops[] = {"lib", "lib64", "bin", "sbin"};
	for (size_t i = 0; i < sizeof tops / sizeof *tops; i++)
		if (mirror_top(tops[i], buf, sizeof buf) < 0)
			child_fail(efd, "mirror /lib, /bin");
	/* /dev is a tmpfs of its own: the root is nodev, and kvm must be a
	 * node of the jail's uid (hosts make /dev/kvm 0600 root or 0660
	 * group kvm; neither lets the uid in). */
	if (mkdir("dev", 0755) < 0 ||
	    mount("airlock-vm-dev", "dev", "tmpfs", MS_NOSUID | MS_NOEXEC,
		  "size=16k,mode=0755") < 0)
		child_fail(efd, "mount /dev");
	if (j->kvm) {
		struct stat st;
		if (stat("/dev/kvm", &st) < 0 || !S_ISCHR(st.st_mode))
			child_fail(efd, "stat /dev/kvm");
		if (mknod("dev/kvm", S_IFCHR | 0600, st.st_rdev) < 0 ||
		    chown("dev/kvm", j->uid, j->uid) < 0)
			child_fail(efd, "make the jail's /dev/kvm");
	}
	static const char *const devs[] = {"null", "zero", "random", "urandom"};
	for (size_t i = 0; i < sizeof devs / sizeof *devs; i++) {
		char host[32], in[32];
		snprintf(host, sizeof host, "/dev/%s", devs[i]);
		snprintf(in, sizeof in, "dev/%s", devs[i]);
		if (touch(in) < 0 ||
		    bind_ro(host, in, MS_NOSUID | MS_NOEXEC) < 0) {
			/* Read-only applies to the mount, not the device:
			 * writes to /dev/null still work. */
			child_fail(efd, "bind a device into /dev");
		}
	}
	/* A device node on a read-only mount still opens read-write. */
	if (mount(NULL, "dev", NULL,
		  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
		  NULL) < 0)
		child_fail(efd, "make /dev read-only");
	for (size_t i = 0; i < j->nfiles; i++) {
		/* "/dir/name", checked by jail_path_ok before the clone. */
		const char *in = j->files[i].jail;
		const char *slash = strrchr(in, '/');
		memcpy(buf, in + 1, (size_t)(slash - in) - 1);
		buf[slash - in - 1] = '\0';
		if ((mkdir(buf, 0755) < 0 && errno != EEXIST) ||
		    touch(in + 1) < 0 ||
		    bind_ro(j->files[i].host, in + 1,
			    MS_NOSUID | MS_NODEV | MS_NOEXEC) < 0)
			child_fail(efd, "bind a file into the jail");
	}
	/* This pid namespace's proc: QEMU sees itself only. It needs it for
	 * /proc/self/fd/N, how guest RAM that came as an fd is opened. */
	if (mkdir("proc", 0555) < 0 ||
	    mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "hidepid=2") < 0)
		child_fail(efd, "mount /proc");
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		child_fail(efd, "pivot_root");
	/* The old root is stacked under the new one: detach it. */
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		child_fail(efd, "detach the host's root");
	if (mount(NULL, "/", NULL,
		  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV |
			  MS_NOEXEC,
		  NULL) < 0)
		child_fail(efd, "make the jail's root read-only");

	struct rlimit none = {0, 0};
	if (setrlimit(RLIMIT_CORE, &none) < 0)
		child_fail(efd, "RLIMIT_CORE");
	/* Nothing to regain: empty the bounding set while root can. */
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			child_fail(efd, "drop the capability bounding set");
	if (setgroups(0, NULL) < 0 || setresgid(j->uid, j->uid, j->uid) < 0 ||
	    setresuid(j->uid, j->uid, j->uid) < 0)
		child_fail(efd, "drop to the jail's uid");
	/* A change of uid clears the parent-death signal: set it again. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || parent_gone(alive))
		_exit(111);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(efd, "no_new_privs");
	if (getuid() == 0 || geteuid() == 0 || setuid(0) == 0) {
		errno = EPERM;
		child_fail(efd, "still root after dropping");
	}

	/* Descriptors: fds[i] to i. First out of the way (above every
	 * target and both pipes), then down, then close the rest. */
	int high = 64;
	int moved[64];
	if (j->nfds > 32) {
		errno = EMFILE;
		child_fail(efd, "too many descriptors");
	}
	for (int i = 0; i < j->nfds; i++) {
		moved[i] = fcntl(j->fds[i], F_DUPFD, high);
		if (moved[i] < 0)
			child_fail(efd, "dup a descriptor");
	}
	for (int i = 0; i < j->nfds; i++)
		if (moved[i] >= high)
			high = moved[i] + 1;
	int efd_high = fcntl(efd, F_DUPFD_CLOEXEC, high);
	if (efd_high < 0)
		child_fail(efd, "dup the error pipe");
	efd = efd_high;
	for (int i = 0; i < j->nfds; i++)
		if (dup2(moved[i], i) < 0)
			child_fail(efd, "place a descriptor");
	/* efd (close-on-exec) is above every other descriptor now. */
	if (syscall(SYS_close_range, j->nfds, efd - 1, 0) < 0 ||
	    syscall(SYS_close_range, efd + 1, ~0u, 0) < 0)
		child_fail(efd, "close_range");
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	/* Last: QEMU's allowlist (sysfilter.h: threads but no processes,
	 * no sockets of its own, no mount, namespaces, bpf, perf, keyrings,
	 * ptrace, io_uring...); QEMU's own -sandbox stacks on top. */
	char *envp[] = {"PATH=/usr/bin", NULL};
	if (al_sysfilter_install(filter) < 0)
		child_fail(efd, "install the syscall filter");
	execve(argv[0], argv, envp);
	child_fail(efd, argv[0]);
}

pid_t al_vmjail_spawn(const al_vmjail *j, char *const argv[], int *pidfd,
		      al_err *err)
{
	*pidfd = -1;
	if (j == NULL || j->uid == 0 || j->root == NULL || j->nfds < 3 ||
	    argv == NULL || argv[0] == NULL ||
	    strncmp(argv[0], "/usr/", 5) != 0)
		return al_err_set(err, AL_EINVAL, 0, "vmjail: bad spec"), -1;
	for (size_t i = 0; i < j->nfiles; i++)
		if (j->files[i].host == NULL || !jail_path_ok(j->files[i].jail))
			return al_err_set(err, AL_EINVAL, 0,
					  "vmjail: bad jail file path"),
			       -1;
	const struct sock_fprog *filter = al_sysfilter_qemu_prog(err);
	if (filter == NULL)
		return -1;
	int ep[2], ap[2];
	if (pipe2(ep, O_CLOEXEC) < 0)
		return al_err_sys(err, AL_ESYS, errno, "pipe"), -1;
	if (pipe2(ap, O_CLOEXEC) < 0) {
		int e = errno;
		close(ep[0]);
		close(ep[1]);
		return al_err_sys(err, AL_ESYS, e, "pipe"), -1;
	}
	int pfd = -1;
	struct clone_args ca = {
		.flags = CLONE_PIDFD | CLONE_NEWNS | CLONE_NEWPID |
			 CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS,
		.pidfd = (uint64_t)(uintptr_t)&pfd,
		.exit_signal = SIGCHLD,
	};
	long pid = syscall(SYS_clone3, &ca, sizeof ca);
	if (pid == 0) {
		close(ep[0]);
		close(ap[1]);
		child_run(j, argv, filter, ep[1], ap[0]);
	}
	int e = errno;
	close(ep[1]);
	close(ap[0]);
	if (pid < 0) {
		close(ep[0]);
		close(ap[1]);
		return al_err_sys(err, AL_ESYS, e, "clone3 (QEMU's jail)"), -1;
	}
	/* EOF: the exec happened (the pipe is close-on-exec). */
	char msg[200];
	size_t have = 0;
	for (;;) {
		ssize_t n = read(ep[0], msg + have, sizeof msg - 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		if (have == sizeof msg - 1)
			break;
	}
	close(ep[0]);
	close(ap[1]);
	if (have > 0) {
		msg[have] = '\0';
		syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
		while (waitpid((pid_t)pid, NULL, 0) < 0 && errno == EINTR)
			;
		close(pfd);
		return al_err_set(err, AL_ESYS, 0, "QEMU's jail: %s", msg), -1;
	}
	*pidfd = pfd;
	return (pid_t)pid;
}
