/* driver_ns: the namespace jail.
 *
 * The sandbox's first process (the agent) runs in new pid, mount, uts,
 * ipc, net and cgroup namespaces, pivot_root'ed into its rootfs, inside
 * its own cgroup leaf, as root of a user namespace of its own, with
 * Docker's default capability set, no_new_privs and the seccomp filter
 * of sysfilter.c.
 *
 * The user namespace maps 0..65535 to a host uid/gid range the sandbox
 * holds alone (uidrange.h, held by the caller's lock for the sandbox's
 * life; the jail dies with the thread that started it). It is owned by
 * the range's first uid, so per-user kernel counts are charged there, not
 * to host root. The rootfs is an idmapped mount over it: 0 on disk is
 * root inside, and root's writes land as 0 on disk.
 *
 * Only the user namespace is the sandbox's: the others are made first,
 * by host root, and belong to the host's user namespace. So root inside
 * has its capabilities over its own files and processes only: it cannot
 * mount, unmount a mask or remount a read-only bind (mount namespace),
 * configure its network (a later issue needs the
 * host to own it) or set its hostname. The host device nodes it uses are
 * bound read-only and their owner (host root) is unmapped: no chmod,
 * chown or utimes reaches a host inode. The kernel is still the host's:
 * the VM driver is the strong boundary, this one is for hosts without
 * usable virtualization.
 *
 * Start: the parent takes the range, makes the user namespace (a
 * throwaway child, see userns_make) and the idmapped clone of the rootfs,
 * then one clone() with the other namespace flags. The child's first
 * step is to move itself into its cgroups (through files the parent
 * opened: a task moving only itself skips the v1 cgroup-wide lock that
 * costs a parent's attach an RCU grace period), so nothing of the
 * sandbox ever runs outside its limits. Between clone and exec
 * the child only makes system calls on data the parent prepared (paths,
 * mount options, the compiled seccomp program, the capability set): the
 * caller may be multi-threaded, and the child shares its memory while
 * the calling thread sleeps (CLONE_VM | CLONE_VFORK, see ns_start). The
 * child's last steps before exec: setns into the user namespace, become
 * its root, capabilities, no_new_privs, seccomp, and a message with
 * when its steps ended, for the start's step timings. */
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/config.h"
#include "base/log.h"
#include "base/vfork.h"
#include "host/cgroup.h"
#include "host/memshare.h"
#include "host/sysfilter.h"
#include "host/uidrange.h"
#include "net/slot.h"

#define NS_DEFAULT_MEMORY (512ull << 20)
#define NS_DEFAULT_PIDS 512u
#define NS_DEFAULT_CPU_SHARES 1024u
/* From clone to the agent's exec; a healthy start takes milliseconds. */
#define NS_START_TIMEOUT_MS 10000

/* Plus CLONE_NEWNET for a sandbox without a network slot (loopback
 * only); one with a slot joins the slot's guest namespace instead. */
#define NS_CLONE_FLAGS                                                         \
	(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC)
/* "nameserver 255.255.255.255\n" */
#define NS_RESOLV_MAX 32

typedef struct ns_priv {
	int pidfd;	 /* the init, immune to pid reuse after it is reaped */
	int shm_fd;	 /* the jail's /dev/shm mount, resized on adopt */
	int paused;	 /* frozen through pause() */
	al_uidrange ids; /* host uids of the user namespace, held till stop */
} ns_priv;

/* What the child reports when a step before exec fails. Exec itself
 * closes the (close-on-exec) sync socket: EOF means success. */
typedef struct child_report {
	int sys_errno;
	char what[120];
} child_report;

/* What the child sends just before exec when it got that far: when its
 * steps ended (CLOCK_MONOTONIC is one clock for both processes), for the
 * start's step timings. Told apart from a child_report by its size. */
enum { MARK_BORN, MARK_JOINED, MARK_MOUNTS, MARK_IDS, MARK_FILTER, NMARKS };
typedef struct child_marks {
	struct timespec t[NMARKS];
} child_marks;

typedef struct child_args {
	const char *rootfs;
	const char *hostname;
	const char *agent;
	const char *dev_opts; /* /dev tmpfs options, owned by root inside */
	int shm_fd;	      /* /dev/shm, sized and detached: mounted there */
	const char *const *ipc_values; /* of ipc_sysctls, in order */
	int sync_fd;		       /* child end of the sync socketpair */
	int agent_fd;		       /* child end of the agent socketpair */
	int tree_fd;   /* the rootfs, idmapped, detached: mounted over rootfs */
	int userns_fd; /* the sandbox's user namespace, entered last */
	int netns_fd;  /* the slot's guest namespace, or -1: a new one */
	const char *resolv; /* /etc/resolv.conf to write, or NULL */
	size_t resolv_len;
	const int *cgroup_fds; /* al_cgroup_join_open's */
	int ncgroup_fds;
	const struct sock_fprog *filter;
	cap_t caps;
} child_args;

/* Docker's default set. Everything else is dropped from the bounding set,
 * so not even a setuid or file-capability binary gets it back. */
static const cap_value_t keep_caps[] = {
	CAP_CHOWN,   CAP_DAC_OVERRIDE, CAP_FSETID,	     CAP_FOWNER,
	CAP_MKNOD,   CAP_NET_RAW,      CAP_SETGID,	     CAP_SETUID,
	CAP_SETFCAP, CAP_SETPCAP,      CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT,
	CAP_KILL,    CAP_AUDIT_WRITE,
};
#define NKEEP (sizeof keep_caps / sizeof keep_caps[0])

static pthread_once_t caps_once = PTHREAD_ONCE_INIT;
static cap_t caps_built;
static int cap_last;

static void caps_build(void)
{
	cap_t c = cap_init(); /* all clear */
	if (c == NULL)
		return;
	/* Inheritable stays empty (CVE-2022-24769): a non-root program
	 * with file-inheritable bits must not gain capabilities. */
	if (cap_set_flag(c, CAP_PERMITTED, NKEEP, keep_caps, CAP_SET) < 0 ||
	    cap_set_flag(c, CAP_EFFECTIVE, NKEEP, keep_caps, CAP_SET) < 0) {
		cap_free(c);
		return;
	}
	cap_last = cap_max_bits() - 1;
	caps_built = c;
}

static int cap_kept(int c)
{
	for (size_t i = 0; i < NKEEP; i++) {
		if (keep_caps[i] == c)
			return 1;
	}
	return 0;
}

/* --- child side: system calls only, no allocation, no locks ---------- */

__attribute__((noreturn)) static void child_fail(int fd, const char *what)
{
	child_report r;
	memset(&r, 0, sizeof r);
	r.sys_errno = errno;
	size_t n = strlen(what);
	if (n >= sizeof r.what)
		n = sizeof r.what - 1;
	memcpy(r.what, what, n);
	(void)!send(fd, &r, sizeof r, MSG_NOSIGNAL);
	_exit(127);
}

/* A host node bound over dst, read-only: no chmod, chown, utimes or
 * rename reaches the host's inode through it (reading and writing the
 * device itself still work). */
static int bind_node(const char *src, const char *dst)
{
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		return -1;
	return mount(NULL, dst, NULL,
		     MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
		     NULL);
}

static int bind_file(const char *src, const char *dst)
{
	int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
	if (fd < 0)
		return -1;
	close(fd);
	return bind_node(src, dst);
}

static int write_sysctl(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, value, strlen(value));
	close(fd);
	return n == (ssize_t)strlen(value) ? 0 : -1;
}

static int bind_readonly(const char *path)
{
	if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) < 0)
		return errno == ENOENT ? 0 : -1;
	return mount(NULL, path, NULL,
		     MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV |
			     MS_NOEXEC,
		     NULL);
}

/* Hide a /proc entry that leaks host state or lets root poke the host
 * kernel: files get the host's /dev/null, directories an empty
 * read-only tmpfs. Called before pivot_root, cwd = new root. */
static int mask_path(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -1;
	if (S_ISDIR(st.st_mode))
		return mount("tmpfs", path, "tmpfs",
			     MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			     "size=0,nr_inodes=1,mode=0555");
	return bind_node("/dev/null", path);
}

static int is_real_dir(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static const char *const proc_readonly[] = {
	"proc/sys", "proc/sysrq-trigger", "proc/irq", "proc/bus", "proc/fs",
};
static const char *const proc_masked[] = {
	"proc/kcore",	    "proc/keys",	  "proc/timer_list",
	"proc/sched_debug", "proc/latency_stats", "proc/acpi",
	"proc/scsi",	    "proc/asound",	  "proc/kallsyms",
};
/* The SysV limits of the jail's ipc namespace (memshare.h), written by
 * host root: the sandbox's root has no say over them. */
static const char *const ipc_sysctls[] = {
	"kernel/shmmax",
	"kernel/shmall",
	"kernel/msgmni",
};
#define NIPC (sizeof ipc_sysctls / sizeof ipc_sysctls[0])
static const char *const dev_nodes[] = {
	"null", "zero", "full", "random", "urandom", "tty",
};

__attribute__((noreturn)) static int child_entry(void *arg)
{
	const child_args *a = arg;
	child_marks marks;
	clock_gettime(CLOCK_MONOTONIC, &marks.t[MARK_BORN]);
	int sync_fd, agent_fd;

	/* Nothing of the shim's handlers or ignored signals reaches the
	 * agent. */
	al_vfork_exec_signals();

	/* Keep our two ends above 0..3 before stdio and fd 3 are set, in
	 * case the caller ran with some of 0..2 closed. */
	sync_fd = fcntl(a->sync_fd, F_DUPFD_CLOEXEC, 10);
	if (sync_fd < 0)
		child_fail(a->sync_fd, "dup sync socket");
	agent_fd = fcntl(a->agent_fd, F_DUPFD_CLOEXEC, 10);
	if (agent_fd < 0)
		child_fail(sync_fd, "dup agent socket");
	int tree_fd = fcntl(a->tree_fd, F_DUPFD_CLOEXEC, 10);
	int userns_fd = fcntl(a->userns_fd, F_DUPFD_CLOEXEC, 10);
	if (tree_fd < 0 || userns_fd < 0)
		child_fail(sync_fd, "dup rootfs and user namespace fds");

	/* Into the sandbox's cgroups before anything else: its limits hold
	 * from the first instruction of the agent on. */
	if (al_cgroup_join(a->cgroup_fds, a->ncgroup_fds) < 0)
		child_fail(sync_fd, "join the sandbox's cgroups");
	/* Into the slot's guest namespace while still host root: host root
	 * made it, so it stays the host's and root inside holds no
	 * capability over it (nor over its eth0, address and route). */
	if (a->netns_fd >= 0 && setns(a->netns_fd, CLONE_NEWNET) < 0)
		child_fail(sync_fd, "join the network slot's namespace");
	clock_gettime(CLOCK_MONOTONIC, &marks.t[MARK_JOINED]);

	if (setsid() < 0)
		child_fail(sync_fd, "setsid");
	umask(022);
	/* Now that we sit in the sandbox's cgroups, make them our root. */
	if (unshare(CLONE_NEWCGROUP) < 0)
		child_fail(sync_fd, "unshare cgroup namespace");

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		child_fail(sync_fd, "make mounts private");
	/* The parent's idmapped (nosuid, nodev) clone of the rootfs. */
	if (move_mount(tree_fd, "", AT_FDCWD, a->rootfs,
		       MOVE_MOUNT_F_EMPTY_PATH) < 0)
		child_fail(sync_fd, "mount the idmapped rootfs");
	close(tree_fd);
	if (chdir(a->rootfs) < 0)
		child_fail(sync_fd, "chdir rootfs");

	/* A rootfs the sandbox wrote to before (resume) may have turned
	 * these into symlinks; a mount would follow them. Fail closed. */
	if (!is_real_dir("proc") || !is_real_dir("dev")) {
		errno = ENOTDIR;
		child_fail(sync_fd, "/proc or /dev in the rootfs is not a "
				    "directory");
	}
	if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  NULL) < 0)
		child_fail(sync_fd, "mount /proc (does the rootfs have it?)");
	/* Root inside holds no capability over the network namespace (the
	 * host's user namespace owns it): low ports and ICMP echo sockets
	 * are open to every uid of the sandbox instead, as in Docker. */
	if (write_sysctl("proc/sys/net/ipv4/ip_unprivileged_port_start", "0") <
		    0 ||
	    write_sysctl("proc/sys/net/ipv4/ping_group_range", "0 2147483647") <
		    0)
		child_fail(sync_fd, "net sysctls");
	for (size_t i = 0; i < NIPC; i++) {
		char path[32];
		memcpy(path, "proc/sys/", 10);
		strncat(path, ipc_sysctls[i], sizeof path - 10);
		if (write_sysctl(path, a->ipc_values[i]) < 0)
			child_fail(sync_fd, path);
	}
	for (size_t i = 0; i < sizeof proc_readonly / sizeof proc_readonly[0];
	     i++) {
		if (bind_readonly(proc_readonly[i]) < 0)
			child_fail(sync_fd, proc_readonly[i]);
	}
	for (size_t i = 0; i < sizeof proc_masked / sizeof proc_masked[0];
	     i++) {
		if (mask_path(proc_masked[i]) < 0)
			child_fail(sync_fd, proc_masked[i]);
	}

	if (mount("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  a->dev_opts) < 0)
		child_fail(sync_fd, "mount /dev (does the rootfs have it?)");
	for (size_t i = 0; i < sizeof dev_nodes / sizeof dev_nodes[0]; i++) {
		char src[32], dst[32];
		memcpy(src, "/dev/", 6);
		memcpy(dst, "dev/", 5);
		strncat(src, dev_nodes[i], sizeof src - 6);
		strncat(dst, dev_nodes[i], sizeof dst - 5);
		if (bind_file(src, dst) < 0)
			child_fail(sync_fd, dst);
	}
	if (symlink("/proc/self/fd", "dev/fd") < 0 ||
	    symlink("/proc/self/fd/0", "dev/stdin") < 0 ||
	    symlink("/proc/self/fd/1", "dev/stdout") < 0 ||
	    symlink("/proc/self/fd/2", "dev/stderr") < 0 ||
	    symlink("pts/ptmx", "dev/ptmx") < 0)
		child_fail(sync_fd, "/dev symlinks");
	if (mkdir("dev/pts", 0755) < 0 ||
	    mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=0620") < 0)
		child_fail(sync_fd, "mount /dev/pts");
	if (mkdir("dev/shm", 01777) < 0 ||
	    move_mount(a->shm_fd, "", AT_FDCWD, "dev/shm",
		       MOVE_MOUNT_F_EMPTY_PATH) < 0)
		child_fail(sync_fd, "mount /dev/shm");

	/* pivot_root(".", ".") stacks the old root under the new one;
	 * detaching "." then drops the old root without needing a
	 * directory for it in the rootfs. */
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		child_fail(sync_fd, "pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		child_fail(sync_fd, "detach old root");
	if (chdir("/") < 0)
		child_fail(sync_fd, "chdir /");
	clock_gettime(CLOCK_MONOTONIC, &marks.t[MARK_MOUNTS]);

	if (sethostname(a->hostname, strlen(a->hostname)) < 0)
		child_fail(sync_fd, "sethostname");

	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		child_fail(sync_fd, "socket for loopback");
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		child_fail(sync_fd, "get loopback flags");
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		child_fail(sync_fd, "bring loopback up");
	close(s);

	/* Into the sandbox's user namespace, as its root: the host uids of
	 * the range, no host group (dropped first, with the host's
	 * CAP_SETGID). Raw system calls: glibc's set*id
	 * would signal the caller's other threads, which this copy lacks. */
	if (syscall(SYS_setgroups, 0, NULL) < 0)
		child_fail(sync_fd, "drop supplementary groups");
	if (setns(userns_fd, CLONE_NEWUSER) < 0)
		child_fail(sync_fd, "enter the user namespace");
	close(userns_fd);
	if (syscall(SYS_setresgid, 0, 0, 0) < 0 ||
	    syscall(SYS_setresuid, 0, 0, 0) < 0)
		child_fail(sync_fd, "become root of the user namespace");
	/* The gateway is the only resolver the slot lets through. Written
	 * as the sandbox's root (its rootfs is an idmapped mount of its own
	 * snapshot, never the template): what is there goes first, a
	 * symlink included, and the new file is resolved inside the new
	 * root only. */
	if (a->resolv != NULL) {
		if (unlink("/etc/resolv.conf") < 0 && errno != ENOENT)
			child_fail(sync_fd, "remove /etc/resolv.conf");
		int rfd = open("/etc/resolv.conf",
			       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				       O_CLOEXEC,
			       0644);
		if (rfd < 0 || write(rfd, a->resolv, a->resolv_len) !=
				       (ssize_t)a->resolv_len)
			child_fail(sync_fd, "write /etc/resolv.conf");
		close(rfd);
	}
	/* The range is held by the parent's lock: nothing of the sandbox
	 * may outlive it. Set after the uid change, which clears it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		child_fail(sync_fd, "parent death signal");
	struct pollfd alive = {.fd = sync_fd, .events = POLLIN};
	if (poll(&alive, 1, 0) != 0)
		_exit(1);

	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		child_fail(sync_fd, "open /dev/null");
	for (int fd = 0; fd < 3; fd++) {
		if (dup2(null, fd) < 0)
			child_fail(sync_fd, "stdio to /dev/null");
	}
	if (dup2(agent_fd, 3) < 0)
		child_fail(sync_fd, "agent socket to fd 3");
	/* Everything else (the caller's fds included) closes on exec; the
	 * sync socket must stay open until then to report an exec error. */
	if (close_range(4, ~0u, CLOSE_RANGE_CLOEXEC) < 0) {
		for (int fd = 4; fd < 4096; fd++)
			fcntl(fd, F_SETFD, FD_CLOEXEC);
	}

	clock_gettime(CLOCK_MONOTONIC, &marks.t[MARK_IDS]);
	/* The bounding set first: dropping needs CAP_SETPCAP, which the
	 * capset below may keep or not. */
	for (int c = 0; c <= cap_last; c++) {
		if (!cap_kept(c) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 &&
		    errno != EINVAL)
			child_fail(sync_fd, "drop bounding capability");
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
	    errno != EINVAL)
		child_fail(sync_fd, "clear ambient capabilities");
	if (cap_set_proc(a->caps) < 0)
		child_fail(sync_fd, "set capabilities");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(sync_fd, "no_new_privs");
	if (al_sysfilter_install(a->filter) < 0)
		child_fail(sync_fd, "install seccomp filter");
	clock_gettime(CLOCK_MONOTONIC, &marks.t[MARK_FILTER]);
	(void)!send(sync_fd, &marks, sizeof marks, MSG_NOSIGNAL);

	char *const argv[] = {(char *)a->agent, "--fd", "3", NULL};
	char *const envp[] = {
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
		"/sbin:/bin",
		"HOME=/root",
		NULL,
	};
	execve(a->agent, argv, envp);
	child_fail(sync_fd, "exec agent");
}

/* --- parent side ------------------------------------------------------ */

static int hostname_ok(const char *h)
{
	size_t n = h != NULL ? strlen(h) : 0;
	if (n == 0 || n > 63)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = h[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '-' || c == '.'))
			return 0;
	}
	return 1;
}

static int abs_path_ok(const char *p)
{
	if (p == NULL || p[0] != '/' || strlen(p) >= AL_PATH_MAX)
		return 0;
	/* No ".." component: the agent path is resolved inside the new
	 * root anyway, the rootfs is bind-mounted as given. */
	for (const char *s = p; (s = strstr(s, "..")) != NULL; s += 2) {
		if (s[-1] == '/' && (s[2] == '/' || s[2] == '\0'))
			return 0;
	}
	return 1;
}

static void handle_reset(al_driver_handle *h)
{
	memset(h->steps, 0, sizeof h->steps);
	h->init_pid = 0;
	h->agent_fd = -1;
	h->cgroup[0] = '\0';
	h->priv = NULL;
	h->agent_in = NULL;
}

/* The id part of h->cgroup ("airlock/<id>"), or NULL. */
static const char *cgroup_name(const al_driver_handle *h)
{
	size_t pl = strlen(AL_CGROUP_PARENT);
	if (strncmp(h->cgroup, AL_CGROUP_PARENT "/", pl + 1) != 0 ||
	    h->cgroup[pl + 1] == '\0')
		return NULL;
	return h->cgroup + pl + 1;
}

/* __WALL: also userns_make's child, which has no exit signal. */
static void reap(int pidfd)
{
	siginfo_t si;
	while (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED | __WALL) <
	       0) {
		/* ECHILD: the caller's SIGCHLD handling reaped it first. */
		if (errno != EINTR)
			break;
	}
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) * 1e3 +
	       (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Record step name as ending now, and start the next one. */
static void step_done(al_driver_handle *h, int *n, const char *name,
		      struct timespec *t0)
{
	if (*n < AL_DRIVER_STEPS) {
		h->steps[*n].name = name;
		h->steps[*n].ms = ms_since(t0);
		(*n)++;
	}
	clock_gettime(CLOCK_MONOTONIC, t0);
}

static int write_map(pid_t pid, const char *file, const char *map, al_err *err)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
	al_autofd int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, map, strlen(map)) != (ssize_t)strlen(map))
		return al_err_sys(err, AL_ESYS, errno, "write %s", path);
	return 0;
}

/* The child of userns_make. It shares the caller's memory, so it touches
 * nothing but its own stack (not even errno): a raw pause, which returns
 * only to a signal, and every signal is blocked. */
__attribute__((noreturn)) static int userns_wait(void *arg)
{
	(void)arg;
	for (;;)
		syscall(SYS_pause);
}

/* A user namespace whose 0..65535 are host uids and gids base..: made by
 * cloning a child that only waits (a namespace needs a process to be born
 * in and to have its maps written through), killed again on return; the
 * returned fd keeps the namespace. The caller reaps *holder later, by
 * when it has exited (no wait here for the dying child to be scheduled),
 * and keeps stack, the child's, untouched until then. Made apart from the jail's init so
 * that the init's other namespaces stay the host's. CLONE_VM: no copy of
 * the caller's page tables (a fork of a big caller costs milliseconds).
 *
 * A namespace is owned by its creator's euid, and the per-user counts of
 * its processes (inotify instances, mqueue bytes, pending signals,
 * processes) are charged to the owner up in the host's namespace: so the
 * calling thread takes the range's first uid as its euid for the clone
 * alone (raw set*id calls change only the calling thread; real and saved
 * ids stay, so it gets its euid and capabilities back). */
static int userns_make(uid_t base, char *stack, size_t stack_len, int *holder,
		       al_err *err)
{
	sigset_t all, old;
	int pidfd = -1, fd = -1, clone_errno = 0;
	char map[48], path[64];
	uid_t euid = geteuid();
	gid_t egid = getegid();
	pid_t pid = -1;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (syscall(SYS_setresgid, -1, base, -1) < 0 ||
	    syscall(SYS_setresuid, -1, base, -1) < 0) {
		clone_errno = errno;
	} else {
		/* No exit signal: the caller's SIGCHLD handling never sees
		 * it. */
		pid = clone(userns_wait, stack + stack_len,
			    CLONE_VM | CLONE_NEWUSER | CLONE_PIDFD, NULL,
			    &pidfd);
		clone_errno = errno;
	}
	int back = syscall(SYS_setresuid, -1, euid, -1) == 0 &&
		   syscall(SYS_setresgid, -1, egid, -1) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!back) {
		/* Left without privileges, this thread fails closed. */
		al_err_sys(err, AL_EINTERNAL, errno,
			   "cannot take back euid %u after making a user "
			   "namespace",
			   (unsigned)euid);
		goto out;
	}
	if (pid < 0) {
		al_err_sys(err, AL_ESYS, clone_errno,
			   "clone into a new user namespace");
		goto out;
	}
	snprintf(map, sizeof map, "0 %u %u\n", (unsigned)base,
		 AL_UIDRANGE_NS_SIZE);
	snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
	if (write_map(pid, "uid_map", map, err) == 0 &&
	    write_map(pid, "gid_map", map, err) == 0) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			al_err_sys(err, AL_ESYS, errno, "open %s", path);
	}
out:
	if (pid > 0)
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	*holder = pidfd;
	return fd;
}

/* A detached clone of rootfs whose files, owned by uid/gid n on disk,
 * appear as n of userns_fd's namespace (host base + n): the template's
 * root-owned files are root's inside, and what root inside writes lands
 * owned by 0 on disk. nosuid, nodev: a node made anywhere in the sandbox
 * is inert; the ones it may use are bound from the host. */
static int idmapped_tree(const char *rootfs, int userns_fd, al_err *err)
{
	int fd = open_tree(AT_FDCWD, rootfs,
			   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open_tree %s", rootfs);
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID |
			    MOUNT_ATTR_NODEV,
		.userns_fd = (uint64_t)userns_fd,
	};
	if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0) {
		al_err_sys(err, AL_ESYS, errno,
			   "idmapped mount of %s (does its filesystem support "
			   "idmapped mounts?)",
			   rootfs);
		close(fd);
		return -1;
	}
	return fd;
}

/* The text of ipc_sysctls' values for a share, and pointers to them. */
typedef struct ipc_values {
	char text[NIPC][24];
	const char *ptr[NIPC];
} ipc_values;

static void ipc_values_of(const al_memshare *ms, ipc_values *v)
{
	const uint64_t n[NIPC] = {ms->sysv_bytes, ms->sysv_pages,
				  ms->msg_queues};
	for (size_t i = 0; i < NIPC; i++) {
		snprintf(v->text[i], sizeof v->text[i], "%" PRIu64, n[i]);
		v->ptr[i] = v->text[i];
	}
}

/* Size the tmpfs of fs context fsfd (a new one, or one picked from the
 * mount) as ms says, then run cmd on it (create, reconfigure). */
static int shm_config(int fsfd, const al_memshare *ms, unsigned cmd,
		      al_err *err)
{
	char size[24], inodes[24];
	snprintf(size, sizeof size, "%" PRIu64, ms->shm_bytes);
	snprintf(inodes, sizeof inodes, "%" PRIu64, ms->shm_inodes);
	if (fsconfig(fsfd, FSCONFIG_SET_STRING, "size", size, 0) < 0 ||
	    fsconfig(fsfd, FSCONFIG_SET_STRING, "nr_inodes", inodes, 0) < 0 ||
	    fsconfig(fsfd, cmd, NULL, NULL, 0) < 0)
		return al_err_sys(err, AL_ESYS, errno,
				  "size /dev/shm to %s bytes, %s inodes", size,
				  inodes);
	return 0;
}

/* The jail's /dev/shm: a detached tmpfs of ms's size, made by host root
 * (so root inside cannot remount it bigger), which the child mounts and
 * the host keeps (memshare_apply). */
static int shm_make(const al_memshare *ms, al_err *err)
{
	al_autofd int fsfd = fsopen("tmpfs", FSOPEN_CLOEXEC);
	if (fsfd < 0)
		return al_err_sys(err, AL_ESYS, errno, "fsopen tmpfs");
	if (fsconfig(fsfd, FSCONFIG_SET_STRING, "mode", "1777", 0) < 0)
		return al_err_sys(err, AL_ESYS, errno, "/dev/shm mode");
	if (shm_config(fsfd, ms, FSCONFIG_CMD_CREATE, err) < 0)
		return -1;
	int fd = fsmount(fsfd, FSMOUNT_CLOEXEC,
			 MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "fsmount /dev/shm");
	return fd;
}

/* The agent out of the OOM killer's reach, so that a sandbox out of
 * memory loses the process that used it up, not its agent. Written to
 * the legacy oom_adj (-17 is oom_score_adj -1000) on purpose: host
 * root's write to oom_score_adj would also lower the floor
 * (oom_score_adj_min) that the agent's children inherit, and any of
 * them could take -1000 again; through oom_adj the floor stays 0, so
 * once the agent resets a child to 0 (guest/exec.c) nothing in the
 * sandbox goes below it (that needs CAP_SYS_RESOURCE in the host's user
 * namespace). pid is unreaped: it cannot have been reused. */
static int protect_agent(pid_t pid, al_err *err)
{
	char path[40];
	snprintf(path, sizeof path, "/proc/%d/oom_adj", (int)pid);
	if (write_sysctl(path, "-17") == 0)
		return 0;
	/* EACCES: this host's root lacks CAP_SYS_RESOURCE (a container):
	 * the sandbox runs, its agent as exposed as what it starts. */
	if (errno == EACCES) {
		al_warn("the agent's OOM protection: writing %s: %s (host "
			"root without CAP_SYS_RESOURCE)",
			path, strerror(errno));
		return 0;
	}
	return al_err_sys(err, AL_ESYS, errno,
			  "write -17 to %s (the agent's OOM "
			  "protection)",
			  path);
}

/* The spec's limits with the defaults filled in. */
static al_cgroup_limits limits_of(const al_sandbox_spec *spec)
{
	al_cgroup_limits lim = {
		.memory_bytes = spec->limits.memory_bytes != 0
					? spec->limits.memory_bytes
					: NS_DEFAULT_MEMORY,
		.pids_max = spec->limits.pids_max != 0 ? spec->limits.pids_max
						       : NS_DEFAULT_PIDS,
		.cpu_shares = spec->limits.cpu_shares != 0
				      ? spec->limits.cpu_shares
				      : NS_DEFAULT_CPU_SHARES,
		.cpu_millis = spec->limits.cpu_millis,
	};
	return lim;
}

static double ms_between(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) * 1e3 +
	       (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

/* The child's steps from its marks, the first (clone) from *t0 on; the
 * next step starts at its last mark. */
static void child_steps(al_driver_handle *h, int *n, struct timespec *t0,
			const child_marks *m)
{
	static const char *const names[NMARKS] = {
		[MARK_BORN] = "clone",
		[MARK_JOINED] = "cgroup join",
		[MARK_MOUNTS] = "mounts",
		[MARK_IDS] = "user and fds",
		[MARK_FILTER] = "caps and seccomp",
	};
	for (int i = 0; i < NMARKS && *n < AL_DRIVER_STEPS; i++) {
		h->steps[*n].name = names[i];
		h->steps[*n].ms = ms_between(i == 0 ? t0 : &m->t[i - 1],
					     &m->t[i]);
		(*n)++;
	}
	*t0 = m->t[NMARKS - 1];
}

/* One message (or EOF: 0) from the jail's init within the start
 * timeout. */
static ssize_t recv_deadline(int fd, void *buf, size_t len, al_err *err)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	int pr;
	do
		pr = poll(&pfd, 1, NS_START_TIMEOUT_MS);
	while (pr < 0 && errno == EINTR);
	if (pr < 0)
		return al_err_sys(err, AL_ESYS, errno, "waiting for jail init");
	if (pr == 0)
		return al_err_set(err, AL_ETIMEDOUT, 0,
				  "jail init did not exec the agent within %d "
				  "ms",
				  NS_START_TIMEOUT_MS);
	ssize_t n = recv(fd, buf, len, 0);
	if (n < 0)
		return al_err_sys(err, AL_ESYS, errno,
				  "reading jail init status");
	return n;
}

static void close_fds(int *fds, int *n)
{
	while (*n > 0)
		close(fds[--*n]);
}

static int ns_start(const al_sandbox_spec *spec, al_driver_handle *h,
		    al_err *err)
{
	int agent_sp[2] = {-1, -1}, sync_sp[2] = {-1, -1};
	int pidfd = -1, cg_made = 0, nsteps = 0, ncg = 0;
	int cg_fds[AL_CGROUP_JOIN_FDS];
	al_autofd int userns_fd = -1;
	int holder = -1; /* userns_make's child, reaped on the way out */
	_Alignas(16) char holder_stack[8192];
	al_autofd int tree_fd = -1;
	struct timespec t0;
	char dev_opts[96];
	pid_t pid = -1;
	ns_priv *priv = NULL;
	struct stat st;

	if (h == NULL || spec == NULL)
		return al_err_set(err, AL_EINVAL, 0, "no spec or handle");
	handle_reset(h);
	if (spec->id == NULL || !al_id_valid(spec->id))
		return al_err_set(err, AL_EINVAL, 0, "invalid sandbox id");
	if (!hostname_ok(spec->hostname))
		return al_err_set(err, AL_EINVAL, 0, "invalid hostname");
	if (!abs_path_ok(spec->rootfs) || !abs_path_ok(spec->agent))
		return al_err_set(err, AL_EINVAL, 0,
				  "rootfs and agent must be absolute paths "
				  "without ..");
	if (stat(spec->rootfs, &st) < 0)
		return al_err_sys(err, AL_ENOENT, errno, "rootfs %s",
				  spec->rootfs);
	if (!S_ISDIR(st.st_mode))
		return al_err_sys(err, AL_ENOENT, ENOTDIR, "rootfs %s",
				  spec->rootfs);

	const struct sock_fprog *filter = al_sysfilter_jail_prog(err);
	if (filter == NULL)
		return -1;
	pthread_once(&caps_once, caps_build);
	if (caps_built == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "building capability set");

	al_cgroup_limits lim = limits_of(spec);
	al_memshare ms;
	al_memshare_of(lim.memory_bytes, (uint64_t)sysconf(_SC_PAGESIZE), &ms);
	ipc_values ipc;
	ipc_values_of(&ms, &ipc);
	snprintf(h->cgroup, sizeof h->cgroup, AL_CGROUP_PARENT "/%s", spec->id);

	priv = calloc(1, sizeof *priv);
	if (priv == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "driver state");
		goto fail;
	}
	priv->pidfd = -1;
	priv->shm_fd = -1;
	priv->ids.lock_fd = -1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (al_uidrange_take(&al_uidrange_ns, spec->id, &priv->ids, err) < 0)
		goto fail;
	step_done(h, &nsteps, "uid range", &t0);
	userns_fd = userns_make(priv->ids.base, holder_stack,
				sizeof holder_stack, &holder, err);
	if (userns_fd < 0)
		goto fail;
	step_done(h, &nsteps, "user namespace", &t0);
	tree_fd = idmapped_tree(spec->rootfs, userns_fd, err);
	if (tree_fd < 0)
		goto fail;
	step_done(h, &nsteps, "idmapped mount", &t0);
	snprintf(dev_opts, sizeof dev_opts,
		 "mode=0755,size=64k,nr_inodes=64,uid=%u,gid=%u",
		 (unsigned)priv->ids.base, (unsigned)priv->ids.base);
	priv->shm_fd = shm_make(&ms, err);
	if (priv->shm_fd < 0)
		goto fail;
	if (al_cgroup_create(spec->id, &lim, err) < 0)
		goto fail;
	cg_made = 1;
	ncg = al_cgroup_join_open(spec->id, AL_CGROUP_JOIN_ALL, cg_fds, err);
	if (ncg < 0) {
		ncg = 0;
		goto fail;
	}
	step_done(h, &nsteps, "cgroups", &t0);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, agent_sp) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync_sp) <
		    0) {
		al_err_sys(err, AL_ESYS, errno, "socketpair");
		goto fail;
	}

	char resolv[NS_RESOLV_MAX];
	int resolv_len = 0;
	if (spec->net != NULL) {
		char gw[AL_NET_ADDR_STRLEN];
		al_net_addr_format(spec->net->addr.gateway, gw);
		resolv_len = snprintf(resolv, sizeof resolv, "nameserver %s\n",
				      gw);
	}
	child_args args = {
		.netns_fd = spec->net != NULL ? spec->net->guest_fd : -1,
		.resolv = spec->net != NULL ? resolv : NULL,
		.resolv_len = (size_t)resolv_len,
		.rootfs = spec->rootfs,
		.hostname = spec->hostname,
		.agent = spec->agent,
		.dev_opts = dev_opts,
		.shm_fd = priv->shm_fd,
		.ipc_values = ipc.ptr,
		.sync_fd = sync_sp[1],
		.agent_fd = agent_sp[1],
		.tree_fd = tree_fd,
		.userns_fd = userns_fd,
		.cgroup_fds = cg_fds,
		.ncgroup_fds = ncg,
		.filter = filter,
		.caps = caps_built,
	};
	/* In this process's memory (vfork.h): no copy of its page tables
	 * to make, nor one for the exec to tear down. */
	pid = al_vfork_call(child_entry, &args,
			    NS_CLONE_FLAGS |
				    (spec->net != NULL ? 0 : CLONE_NEWNET) |
				    CLONE_PIDFD | SIGCHLD,
			    &pidfd, "into new namespaces", err);
	close_fds(cg_fds, &ncg); /* the child's copies are its own */
	if (pid < 0)
		goto fail;
	priv->pidfd = pidfd;
	close(al_steal_fd(&agent_sp[1]));
	close(al_steal_fd(&sync_sp[1]));

	union {
		child_report rep;
		child_marks marks;
	} msg;
	ssize_t n;
	int marked = 0;
	for (;;) {
		n = recv_deadline(sync_sp[0], &msg, sizeof msg, err);
		if (n < 0)
			goto fail;
		if (n != sizeof msg.marks || marked)
			break;
		marked = 1;
		child_steps(h, &nsteps, &t0, &msg.marks);
	}
	if (n > 0) {
		child_report rep = msg.rep;
		rep.what[sizeof rep.what - 1] = '\0';
		if ((size_t)n != sizeof rep) {
			al_err_set(err, AL_EINTERNAL, 0,
				   "short status from jail init");
		} else if (strcmp(rep.what, "exec agent") == 0) {
			al_err_sys(err,
				   rep.sys_errno == ENOENT ? AL_ENOENT
							   : AL_ESYS,
				   rep.sys_errno, "exec %s in %s", spec->agent,
				   spec->rootfs);
		} else {
			al_err_sys(err, AL_ESYS, rep.sys_errno,
				   "jail setup: %s", rep.what);
		}
		goto fail;
	}
	close(al_steal_fd(&sync_sp[0]));
	step_done(h, &nsteps, "exec", &t0);
	if (protect_agent(pid, err) < 0)
		goto fail;
	reap(holder);
	close(holder);
	step_done(h, &nsteps, "user namespace reap", &t0);

	h->init_pid = pid;
	h->agent_fd = al_steal_fd(&agent_sp[0]);
	h->priv = priv;
	return 0;

fail:
	close_fds(cg_fds, &ncg);
	if (holder >= 0) {
		reap(holder);
		close(holder);
	}
	if (pid > 0) {
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		reap(pidfd);
	}
	if (pidfd >= 0)
		close(pidfd);
	for (int i = 0; i < 2; i++) {
		if (agent_sp[i] >= 0)
			close(agent_sp[i]);
		if (sync_sp[i] >= 0)
			close(sync_sp[i]);
	}
	if (cg_made) {
		al_err tmp_err = {0};
		if (al_cgroup_destroy(spec->id, &tmp_err) < 0)
			al_warn("sandbox %s: %s", spec->id, tmp_err.msg);
	}
	if (priv != NULL) {
		if (priv->shm_fd >= 0)
			close(priv->shm_fd);
		al_uidrange_drop(&priv->ids);
	}
	free(priv);
	handle_reset(h);
	return -1;
}

static int ns_stop(al_driver_handle *h, al_err *err)
{
	if (h == NULL)
		return 0;
	ns_priv *p = h->priv;
	const char *name = cgroup_name(h);
	if (p != NULL && p->pidfd >= 0) {
		/* ESRCH: the init already died; its namespace with it. */
		syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
		if (p->paused && name != NULL) {
			al_err tmp_err = {0};
			if (al_cgroup_kill(name, &tmp_err) < 0)
				al_warn("%s", tmp_err.msg);
		}
		reap(p->pidfd);
		close(p->pidfd);
		p->pidfd = -1;
	}
	/* Before the cgroup goes: the tmpfs (and its pages, charged there)
	 * lives as long as this mount. */
	if (p != NULL && p->shm_fd >= 0) {
		close(p->shm_fd);
		p->shm_fd = -1;
	}
	h->init_pid = 0;
	if (h->agent_fd >= 0) {
		close(h->agent_fd);
		h->agent_fd = -1;
	}
	/* Last, and kept for a retry if it fails: the kernel may take a
	 * moment to empty the cgroup of the exiting tasks. */
	if (name != NULL && al_cgroup_destroy(name, err) < 0)
		return -1;
	h->cgroup[0] = '\0';
	/* Only now: every process of the range is gone with the init. */
	if (p != NULL)
		al_uidrange_drop(&p->ids);
	free(p);
	h->priv = NULL;
	return 0;
}

static int ns_freeze(al_driver_handle *h, int frozen, al_err *err)
{
	const char *name = h != NULL ? cgroup_name(h) : NULL;
	if (name == NULL || h->priv == NULL)
		return al_err_set(err, AL_ESTATE, 0, "sandbox is not running");
	if (al_cgroup_freeze(name, frozen, err) < 0)
		return -1;
	((ns_priv *)h->priv)->paused = frozen;
	return 0;
}

static int ns_pause(al_driver_handle *h, al_err *err)
{
	return ns_freeze(h, 1, err);
}

static int ns_resume(al_driver_handle *h, al_err *err)
{
	return ns_freeze(h, 0, err);
}

/* fn(arg) run in the jail's namespace of type nstype (CLONE_NEWUTS,
 * CLONE_NEWIPC), entered by this thread for the call alone: what root
 * inside may not change (it holds no CAP_SYS_ADMIN there), host root
 * changes from inside. */
static int in_jail_ns(const ns_priv *p, int nstype, int (*fn)(void *, al_err *),
		      void *arg, al_err *err)
{
	const char *self_path = nstype == CLONE_NEWUTS
					? "/proc/thread-self/ns/uts"
					: "/proc/thread-self/ns/ipc";
	al_autofd int self = open(self_path, O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", self_path);
	if (setns(p->pidfd, nstype) < 0)
		return al_err_sys(err, AL_ESYS, errno,
				  "enter the sandbox's %s namespace",
				  self_path + 22);
	int rc = fn(arg, err);
	if (setns(self, nstype) < 0) {
		/* Staying in the sandbox's namespace would change the host's
		 * view for every later sandbox this shim touches. */
		return al_err_sys(err, AL_EINTERNAL, errno,
				  "leave the sandbox's %s namespace",
				  self_path + 22);
	}
	return rc;
}

static int set_hostname(void *hostname, al_err *err)
{
	if (sethostname(hostname, strlen(hostname)) < 0)
		return al_err_sys(err, AL_ESYS, errno, "sethostname");
	return 0;
}

static int write_ipc_sysctls(void *values, al_err *err)
{
	const char *const *v = values;
	for (size_t i = 0; i < NIPC; i++) {
		char path[40];
		snprintf(path, sizeof path, "/proc/sys/%s", ipc_sysctls[i]);
		if (write_sysctl(path, v[i]) < 0)
			return al_err_sys(err, AL_ESYS, errno,
					  "write %s of the sandbox's ipc "
					  "namespace",
					  path);
	}
	return 0;
}

/* A claimed standby takes the shares of its new memory limit: /dev/shm
 * resized through the mount the host kept (it fails while more than the
 * new size is in use: a standby has run nothing), the SysV limits
 * written in the jail's ipc namespace. */
static int memshare_apply(const ns_priv *p, uint64_t limit, al_err *err)
{
	al_memshare ms;
	al_memshare_of(limit, (uint64_t)sysconf(_SC_PAGESIZE), &ms);
	al_autofd int fsfd = fspick(p->shm_fd, "",
				    FSPICK_EMPTY_PATH | FSPICK_CLOEXEC);
	if (fsfd < 0)
		return al_err_sys(err, AL_ESYS, errno, "fspick /dev/shm");
	if (shm_config(fsfd, &ms, FSCONFIG_CMD_RECONFIGURE, err) < 0)
		return -1;
	ipc_values values;
	ipc_values_of(&ms, &values);
	return in_jail_ns(p, CLONE_NEWIPC, write_ipc_sysctls,
			  (void *)values.ptr, err);
}

static int ns_adopt(al_driver_handle *h, const al_sandbox_spec *spec,
		    al_err *err)
{
	const char *name = h != NULL ? cgroup_name(h) : NULL;
	ns_priv *p = h != NULL ? h->priv : NULL;
	if (name == NULL || p == NULL || p->pidfd < 0)
		return al_err_set(err, AL_ESTATE, 0, "sandbox is not running");
	if (spec->id == NULL || !al_id_valid(spec->id))
		return al_err_set(err, AL_EINVAL, 0, "invalid sandbox id");
	if (!hostname_ok(spec->hostname))
		return al_err_set(err, AL_EINVAL, 0, "invalid hostname");
	if (strcmp(name, spec->id) != 0) {
		if (al_cgroup_rename(name, spec->id, err) < 0)
			return -1;
		snprintf(h->cgroup, sizeof h->cgroup, AL_CGROUP_PARENT "/%s",
			 spec->id);
	}
	al_cgroup_limits lim = limits_of(spec);
	if (al_cgroup_set_limits(spec->id, &lim, err) < 0 ||
	    memshare_apply(p, lim.memory_bytes, err) < 0)
		return -1;
	return in_jail_ns(p, CLONE_NEWUTS, set_hostname, (void *)spec->hostname,
			  err);
}

const al_driver al_driver_ns = {
	.adopt = ns_adopt,
	.net_kind = AL_NETSLOT_NS,
	.name = "ns",
	.init_name = "init",
	.start = ns_start,
	.stop = ns_stop,
	.pause = ns_pause,
	.resume = ns_resume,
};
