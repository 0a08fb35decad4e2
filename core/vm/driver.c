/* driver_vm: every sandbox its own QEMU microvm and guest kernel.
 *
 * A sandbox's rootfs (a snapshot of its template's subvolume) holds the
 * symlink .airlock-vm to the template's VM directory (see vmprobe.h).
 * start() reflinks the template's disk.ext4 into the rootfs and then:
 *
 *  - restores, when the template has a base snapshot: QEMU starts with
 *    -incoming defer and maps the template's guest RAM file privately
 *    (share=off: copy-on-write, every clone shares the unchanged pages);
 *    over QMP the device state (~64 KB) is loaded with x-ignore-shared and
 *    the guest continued. It resumes inside the guest init, which was
 *    waiting for its host when the snapshot was taken;
 *  - otherwise boots the kernel cold (seconds under TCG).
 *
 * Either way the host then sends the init its GO line (clock, hostname,
 * fresh entropy, the sandbox's MAC; guest/init/init.c) on the
 * virtio-serial port "airlock", whose QEMU end is a unix socket. The
 * init starts airlock-agent on the port, and that socket becomes
 * h->agent_fd: the agent's HELLO is the first thing on it.
 *
 * QEMU gets -nodefaults, a NIC attached to nothing (vm/net.h), no
 * firmware ROMs, -sandbox on with every optional seccomp group denied
 * (it never needs to spawn: snapshot files are handed over as fds with
 * QMP getfd), and dies with its shim (PR_SET_PDEATHSIG), inside a cgroup
 * leaf named after the sandbox with memory (guest RAM + emulator), thread
 * and CPU limits. Running it under its own uid and chroot is not done
 * yet (docs/architecture.md says why). */
#include "driver.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agentproto.h"
#include "cgroup.h"
#include "cleanup.h"
#include "config.h"
#include "log.h"
#include "vm/jail.h"
#include "vm/mem.h"
#include "vm/net.h"
#include "vm/probe.h"
#include "vm/qmp.h"

/* guest/init/init.c */
#define INIT_MARKER "AIRLOCK-INIT 1\n"

#define VM_LINK ".airlock-vm"
#define VM_DISK ".airlock-disk.ext4"
/* symlink in the sandbox's rootfs to its QEMU run directory */
#define VM_RUNLINK ".airlock-vm-run"
#define VM_RUNDIR_PREFIX "/tmp/airlock-vm-"
#define VM_BOOT_TIMEOUT_MS 120000
#define VM_RESTORE_TIMEOUT_MS 20000
#define VM_QUIT_TIMEOUT_MS 2000
#define VM_ARGV_MAX 80
/* What a sandbox's QEMU may write to its qemu.log: the guest can make it
 * print (device errors), and the file is on the host's disk. */
#define VM_QEMU_LOG_MAX (1u << 20)

typedef enum vm_mode {
	VM_COLD,     /* boot the kernel, private anonymous RAM */
	VM_TEMPLATE, /* boot the kernel, RAM in a shared file to snapshot */
	VM_CLONE,    /* restore: RAM file mapped privately, -incoming defer */
	VM_PROBE,    /* boot to the init's probe marker, no disk or port */
} vm_mode;

/* What QEMU finds at each descriptor in its jail (vm/jail.h): it opens no
 * file of the host by name, except the kernel and initrd of a boot. */
enum {
	JFD_QMP = 3,     /* socketpair end: the monitor */
	JFD_AGENT = 4,   /* socketpair end: the virtio-serial port */
	JFD_MEM = 5,     /* guest RAM (memfd), as /proc/self/fd/5 */
	JFD_DISK = 6,    /* the disk, read-write ... */
	JFD_DISK_RO = 7, /* ... and read-only: QEMU's first open probes */
	JFD_SERIAL = 8,  /* console log file (template, probe) */
	JFD_COUNT = 9,
};
#define JAIL_KERNEL "/boot/vmlinuz"
#define JAIL_INITRD "/boot/initrd"

typedef struct vm_launch {
	vm_mode mode;
	al_vm_accel accel;
	const al_vm_kernel *kernel; /* not for VM_CLONE */
	int mem_fd;                 /* VM_TEMPLATE (to fill), VM_CLONE (sealed) */
	const char *disk;           /* not for VM_PROBE */
	const char *agent;          /* path inside the guest */
	const char *rundir;         /* QEMU's log, the jail's mount point */
	const char *cgroup;         /* leaf QEMU runs in (sandboxes), or NULL */
	uid_t uid;                  /* QEMU's, from al_vmjail_uid_take */
} vm_launch;

typedef struct vm_priv {
	al_vm_accel accel;
	pid_t pid;
	int pidfd;
	al_qmp *qmp;
	al_vmjail_uid uid;
	uint64_t disk_size; /* bytes of its disk image, as QEMU sees it */
	char rundir[64];
} vm_priv;

/* ---- small helpers ---- */

static int fmt_path(char *out, size_t len, al_err *err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fmt_path(char *out, size_t len, al_err *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out, len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len)
		return al_err_set(err, AL_EINVAL, 0, "path too long");
	return 0;
}

static int hostname_ok(const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;
	if (n == 0 || n > 63 || s[0] == '-')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-'))
			return 0;
	}
	return 1;
}

/* Absolute, no "..", nothing the kernel command line would split. */
static int guest_path_ok(const char *s)
{
	if (s == NULL || s[0] != '/' || strlen(s) > 200 ||
	    strstr(s, "/..") != NULL)
		return 0;
	for (const char *p = s; *p != '\0'; p++)
		if (*p <= ' ' || *p == '"' || *p > '~')
			return 0;
	return 1;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Wait for the process behind pidfd to end, at most ms; 1 if it did. */
static int wait_exit(int pidfd, int ms)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	int rc;
	do
		rc = poll(&p, 1, ms);
	while (rc < 0 && errno == EINTR);
	return rc > 0;
}

static void kill_reap(pid_t pid, int pidfd)
{
	if (pidfd >= 0) {
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		siginfo_t si;
		while (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED) <
			       0 &&
		       errno == EINTR)
			;
	} else if (pid > 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
}

/* Last bytes of a log file, made printable, for error messages. */
static void file_tail(const char *path, char *out, size_t len)
{
	out[0] = '\0';
	al_autofd int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || len < 2)
		return;
	off_t end = lseek(fd, 0, SEEK_END);
	off_t from = end > (off_t)(len - 1) ? end - (off_t)(len - 1) : 0;
	ssize_t n = pread(fd, out, len - 1, from);
	if (n < 0)
		n = 0;
	out[n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if (out[i] < ' ' || out[i] > '~')
			out[i] = out[i] == '\n' ? '|' : out[i] == '\r' ? ' ' : '?';
}

void al_vm_rundir_remove(const char *dir)
{
	/* Only a directory of the name rundir_make gives, and only the
	 * files the driver puts there: the reaper passes what a link in a
	 * sandbox's rootfs says. */
	static const char prefix[] = VM_RUNDIR_PREFIX;
	if (strncmp(dir, prefix, sizeof prefix - 1) != 0 ||
	    strchr(dir + sizeof prefix - 1, '/') != NULL ||
	    strstr(dir, "..") != NULL)
		return;
	static const char *const names[] = {"serial.log", "qemu.log"};
	char p[128];
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		snprintf(p, sizeof p, "%s/%s", dir, names[i]);
		unlink(p);
	}
	/* The jail's mount point: its mounts lived only in QEMU's mount
	 * namespace, so on the host it is an empty directory. */
	snprintf(p, sizeof p, "%s/root", dir);
	rmdir(p);
	rmdir(dir);
}

/* ---- QEMU ---- */

/* Under TCG the guest's TSC is the host's (offset, and stopped while the
 * VM is). microvm has no HPET or ACPI PM timer to check it against, and
 * the kernel's two checks both fail on a busy host: it calibrates the TSC
 * against the PIT, which jitters, and then hangs in early boot; and its
 * clocksource watchdog compares the TSC with jiffies, which lose ticks
 * whenever QEMU is descheduled, marks the TSC unstable and falls back to
 * jiffies. A jiffies clock cannot drive one-shot timers, so the guest
 * then ticks at HZ for good, every tick waking QEMU (6 % of a core per
 * idle VM). Telling it the rate (tsc_early_khz=, measured once per
 * process) skips the calibration, tsc=reliable the watchdog. */
static unsigned host_tsc_khz(void)
{
#if defined(__x86_64__)
	static unsigned khz;
	if (khz != 0)
		return khz;
	struct timespec a, b, pause = {0, 20 * 1000 * 1000};
	unsigned lo, hi;
	clock_gettime(CLOCK_MONOTONIC_RAW, &a);
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	uint64_t t0 = (uint64_t)hi << 32 | lo;
	nanosleep(&pause, NULL);
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	clock_gettime(CLOCK_MONOTONIC_RAW, &b);
	uint64_t t1 = (uint64_t)hi << 32 | lo;
	int64_t ns = (int64_t)(b.tv_sec - a.tv_sec) * 1000000000 +
		     (b.tv_nsec - a.tv_nsec);
	if (ns > 0 && t1 > t0)
		khz = (unsigned)((t1 - t0) * 1000000 / (uint64_t)ns);
	return khz;
#else
	return 0;
#endif
}

typedef struct vm_argv {
	char *v[VM_ARGV_MAX];
	int n;
	char store[8192];
	size_t used;
} vm_argv;

static int arg(vm_argv *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int arg(vm_argv *a, const char *fmt, ...)
{
	if (a->n + 1 >= VM_ARGV_MAX)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(a->store + a->used, sizeof a->store - a->used, fmt,
			  ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof a->store - a->used)
		return -1;
	a->v[a->n++] = a->store + a->used;
	a->v[a->n] = NULL;
	a->used += (size_t)n + 1;
	return 0;
}

/* The sandbox's NIC: virtio-net with no backend, so nothing the guest
 * sends goes anywhere until the egress gateway gives it one. Every
 * machine presents AL_VM_TEMPLATE_MAC to QEMU (template and clones must
 * match for the device state to load); the guest sets its sandbox's own
 * address (core/vm/net.h). QEMU warns "nic net0 has no peer" and runs. */
static int nic_args(vm_argv *a, const vm_launch *l)
{
	(void)l;
	int bad = 0;
	bad |= arg(a, "-device");
	bad |= arg(a, "virtio-net-device,id=net0,mac=" AL_VM_TEMPLATE_MAC);
	return bad;
}

/* One command line for all modes: template and clone must present the
 * same devices in the same order for the device state to load. */
static int build_argv(const vm_launch *l, vm_argv *a, al_err *err)
{
	int bad = 0;
	a->n = 0;
	a->used = 0;
	bad |= arg(a, "%s", AL_VM_QEMU);
	bad |= arg(a, "-M");
	/* No PIT: QEMU's runs from reset (18.2 Hz, a wakeup every 27 ms)
	 * though the guest never unmasks its interrupt. The guest kernel
	 * times with the TSC, whose rate it is told (host_tsc_khz, or
	 * kvm-clock), and the APIC. */
	bad |= arg(a, "microvm,x-option-roms=off,isa-serial=on,rtc=off,"
		      "pit=off,memory-backend=mem");
	bad |= arg(a, "-accel");
	bad |= arg(a, "%s", al_vm_accel_name(l->accel));
	bad |= arg(a, "-m");
	bad |= arg(a, "%d", AL_VM_MEM_MB);
	bad |= arg(a, "-smp");
	bad |= arg(a, "1");
	/* ARAT (the APIC timer keeps running in every C-state) is true of
	 * QEMU's APIC but not announced by its default CPU. Without it the
	 * guest kernel keeps ticking when idle: an APIC timer that may stop
	 * needs a broadcast timer to stand in, and microvm has none. */
	bad |= arg(a, "-cpu");
	bad |= arg(a, "qemu64,+arat");
	bad |= arg(a, "-nodefaults");
	bad |= arg(a, "-no-user-config");
	bad |= arg(a, "-display");
	bad |= arg(a, "none");
	bad |= arg(a, "-no-reboot");
	bad |= arg(a, "-sandbox");
	bad |= arg(a, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,"
		      "resourcecontrol=deny");
	bad |= arg(a, "-object");
	if (l->mode == VM_TEMPLATE || l->mode == VM_CLONE) {
		/* QEMU 7.2 takes no fd for guest RAM: it opens the path,
		 * and the jail's /proc makes that the memfd it was given. */
		bad |= arg(a,
			   "memory-backend-file,id=mem,size=%dM,"
			   "mem-path=/proc/self/fd/%d,share=%s",
			   AL_VM_MEM_MB, JFD_MEM,
			   l->mode == VM_TEMPLATE ? "on" : "off");
	} else {
		bad |= arg(a, "memory-backend-ram,id=mem,size=%dM",
			   AL_VM_MEM_MB);
	}
	if (l->mode != VM_CLONE) {
		bad |= arg(a, "-kernel");
		bad |= arg(a, JAIL_KERNEL);
		bad |= arg(a, "-initrd");
		bad |= arg(a, JAIL_INITRD);
		bad |= arg(a, "-append");
		char tsc[64] = "";
		unsigned khz = l->accel == AL_VM_TCG ? host_tsc_khz() : 0;
		if (l->accel == AL_VM_TCG)
			snprintf(tsc, sizeof tsc, " tsc=reliable");
		if (khz != 0)
			snprintf(tsc + strlen(tsc), sizeof tsc - strlen(tsc),
				 " tsc_early_khz=%u", khz);
		/* What else wakes an idle guest: the soft lockup detector
		 * (every 4 s; a host that deschedules QEMU is no lockup to
		 * report) and proactive compaction (kcompactd, twice a
		 * second; nothing to gain in 256 MiB). */
		bad |= arg(a,
			   "console=ttyS0 quiet panic=-1 nowatchdog "
			   "sysctl.vm.compaction_proactiveness=0 "
			   "airlock.agent=%s%s%s",
			   l->agent != NULL ? l->agent : "/sbin/airlock-agent",
			   l->mode == VM_PROBE ? " airlock.probe=1" : "", tsc);
	}
	/* A sandbox's guest controls its console: it goes to a bounded
	 * ring in QEMU, never to a file that could fill the host's disk.
	 * The template and probe boots run only our kernel and init. */
	if (l->mode == VM_COLD || l->mode == VM_CLONE) {
		bad |= arg(a, "-chardev");
		bad |= arg(a, "ringbuf,id=ser,size=65536");
	} else {
		bad |= arg(a, "-add-fd");
		bad |= arg(a, "fd=%d,set=2", JFD_SERIAL);
		bad |= arg(a, "-chardev");
		bad |= arg(a, "file,id=ser,path=/dev/fdset/2");
	}
	bad |= arg(a, "-serial");
	bad |= arg(a, "chardev:ser");
	/* Both channels are socketpairs made by the shim: nothing for a
	 * QEMU (or whoever runs as its uid) to rebind or swap in a path. */
	bad |= arg(a, "-chardev");
	bad |= arg(a, "socket,id=qmp,fd=%d", JFD_QMP);
	bad |= arg(a, "-mon");
	bad |= arg(a, "chardev=qmp,mode=control");
	if (l->mode != VM_PROBE) {
		bad |= arg(a, "-device");
		bad |= arg(a, "virtio-serial-device,max_ports=2");
		bad |= arg(a, "-chardev");
		bad |= arg(a, "socket,id=agent,fd=%d", JFD_AGENT);
		bad |= arg(a, "-device");
		bad |= arg(a, "virtserialport,chardev=agent,name=airlock");
		bad |= arg(a, "-add-fd");
		bad |= arg(a, "fd=%d,set=1", JFD_DISK);
		bad |= arg(a, "-add-fd");
		bad |= arg(a, "fd=%d,set=1", JFD_DISK_RO);
		bad |= arg(a, "-drive");
		/* A full pool must reach the guest as a write error: QEMU's
		 * default (werror=enospc) pauses the VM instead, which hangs
		 * the sandbox with no one to resume it. The disk is this
		 * sandbox's alone: no image locking (it would see the two
		 * descriptors of the set as two users). */
		bad |= arg(a, "id=vda,file=/dev/fdset/1,file.locking=off,"
			      "format=raw,if=none,discard=unmap,"
			      "werror=report,rerror=report");
		bad |= arg(a, "-device");
		bad |= arg(a, "virtio-blk-device,drive=vda");
		bad |= arg(a, "-object");
		bad |= arg(a, "rng-random,id=rng,filename=/dev/urandom");
		bad |= arg(a, "-device");
		bad |= arg(a, "virtio-rng-device,rng=rng");
		bad |= nic_args(a, l);
	}
	if (l->mode == VM_CLONE) {
		bad |= arg(a, "-incoming");
		bad |= arg(a, "defer");
	}
	/* A sandbox's boot waits for the shim to put QEMU in its cgroup. */
	if (l->mode == VM_COLD)
		bad |= arg(a, "-S");
	if (bad)
		return al_err_set(err, AL_EINTERNAL, 0,
				  "QEMU command line too long");
	return 0;
}

/* A pipe whose bytes a forked child copies to logfd, the first
 * VM_QEMU_LOG_MAX of them, discarding the rest until every writer is
 * gone: the write end, or -1. The child uses only read, write and _exit
 * (the caller may have threads); the shim reaps it (waitpid(-1)). */
static int capped_log_pipe(int logfd, al_err *err)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return al_err_sys(err, AL_ESYS, errno, "pipe");
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(pfd[0]);
		close(pfd[1]);
		return al_err_sys(err, AL_ESYS, e, "fork");
	}
	if (pid == 0) {
		if (dup2(pfd[0], 0) < 0 || dup2(logfd, 1) < 0)
			_exit(111);
		syscall(SYS_close_range, 2, ~0u, 0);
		static const char cut[] =
			"airlock: QEMU's output past 1 MiB is dropped\n";
		size_t kept = 0;
		int said = 0;
		char buf[4096];
		for (;;) {
			ssize_t n = read(0, buf, sizeof buf);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				_exit(0);
			size_t w = VM_QEMU_LOG_MAX - kept;
			if ((size_t)n < w)
				w = (size_t)n;
			/* A failed write (disk full) ends the copy, never
			 * the draining: QEMU must not block on its stderr. */
			if (w > 0 && write(1, buf, w) != (ssize_t)w) {
				said = 1;
				w = VM_QEMU_LOG_MAX - kept;
			}
			kept += w;
			if (kept == VM_QEMU_LOG_MAX && !said) {
				said = 1;
				ssize_t c = write(1, cut, sizeof cut - 1);
				(void)c;
			}
		}
	}
	close(pfd[0]);
	return pfd[1];
}

/* Start QEMU in its jail (vm/jail.h) with the descriptors of the JFD_
 * layout; *pidfd follows it, *qmp_fd and *agent_fd are the shim's ends of
 * its two channels. Its stdout and stderr go to rundir/qemu.log, read
 * back for error messages; a sandbox's through capped_log_pipe. */
static pid_t spawn_qemu(const vm_launch *l, int *pidfd, int *qmp_fd,
			int *agent_fd, al_err *err)
{
	al_autofree vm_argv *a = calloc(1, sizeof *a);
	if (a == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "out of memory"), -1;
	if (build_argv(l, a, err) < 0)
		return -1;
	char logp[128], serp[128], root[128];
	if (fmt_path(logp, sizeof logp, err, "%s/qemu.log", l->rundir) < 0 ||
	    fmt_path(serp, sizeof serp, err, "%s/serial.log", l->rundir) < 0 ||
	    fmt_path(root, sizeof root, err, "%s/root", l->rundir) < 0)
		return -1;
	if (mkdir(root, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", root), -1;
	al_autofd int logfd = open(logp, O_WRONLY | O_CREAT | O_TRUNC |
						 O_CLOEXEC,
				   0600);
	if (logfd < 0)
		return al_err_sys(err, AL_ESYS, errno, "create %s", logp), -1;
	al_autofd int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nullfd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open /dev/null"), -1;
	/* The template and probe boots run only our kernel and init. */
	al_autofd int outfd = -1;
	if (l->mode == VM_COLD || l->mode == VM_CLONE) {
		outfd = capped_log_pipe(logfd, err);
		if (outfd < 0)
			return -1;
	}
	al_autofd int serfd = -1, disk = -1, disk_ro = -1;
	if (l->mode == VM_TEMPLATE || l->mode == VM_PROBE) {
		serfd = open(serp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			     0600);
		if (serfd < 0)
			return al_err_sys(err, AL_ESYS, errno, "create %s",
					  serp),
			       -1;
	}
	if (l->mode != VM_PROBE) {
		disk = open(l->disk, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		disk_ro = open(l->disk, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (disk < 0 || disk_ro < 0)
			return al_err_sys(err, AL_ESYS, errno, "open %s",
					  l->disk),
			       -1;
	}
	int qsp[2], asp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, qsp) < 0)
		return al_err_sys(err, AL_ESYS, errno, "socketpair"), -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, asp) < 0) {
		int e = errno;
		close(qsp[0]);
		close(qsp[1]);
		return al_err_sys(err, AL_ESYS, e, "socketpair"), -1;
	}
	int fds[JFD_COUNT] = {
		[0] = nullfd,
		[1] = outfd >= 0 ? outfd : logfd,
		[2] = outfd >= 0 ? outfd : logfd,
		[JFD_QMP] = qsp[1],
		[JFD_AGENT] = asp[1],
		[JFD_MEM] = l->mem_fd >= 0 ? l->mem_fd : nullfd,
		[JFD_DISK] = disk >= 0 ? disk : nullfd,
		[JFD_DISK_RO] = disk_ro >= 0 ? disk_ro : nullfd,
		[JFD_SERIAL] = serfd >= 0 ? serfd : nullfd,
	};
	al_vmjail_file files[2];
	size_t nfiles = 0;
	if (l->mode != VM_CLONE) {
		files[nfiles++] = (al_vmjail_file){l->kernel->vmlinuz,
						   JAIL_KERNEL};
		files[nfiles++] = (al_vmjail_file){l->kernel->initrd,
						   JAIL_INITRD};
	}
	al_vmjail j = {.uid = l->uid,
		       .root = root,
		       .kvm = l->accel == AL_VM_KVM,
		       .files = files,
		       .nfiles = nfiles,
		       .fds = fds,
		       .nfds = JFD_COUNT};
	pid_t pid = al_vmjail_spawn(&j, a->v, pidfd, err);
	close(qsp[1]);
	close(asp[1]);
	if (pid < 0) {
		close(qsp[0]);
		close(asp[0]);
		return -1;
	}
	/* Into its limits before any guest code runs: a boot waits in -S,
	 * a restore for migrate-incoming. The first cgroup attach of a
	 * process waits for an RCU grace period (cgroup v1): here it
	 * overlaps QEMU's own start. */
	if (l->cgroup != NULL && al_cgroup_attach(l->cgroup, pid, err) < 0) {
		kill_reap(pid, *pidfd);
		close(*pidfd);
		*pidfd = -1;
		close(qsp[0]);
		close(asp[0]);
		return -1;
	}
	*qmp_fd = qsp[0];
	*agent_fd = asp[0];
	return pid;
}

/* Read exactly the init's marker, no more (the agent's HELLO follows). */
static int read_marker(int fd, int pidfd, int64_t deadline_ms, al_err *err)
{
	char buf[sizeof INIT_MARKER];
	size_t have = 0, want = sizeof INIT_MARKER - 1;
	while (have < want) {
		int64_t left = deadline_ms - al_now_ms();
		if (left <= 0)
			return al_err_set(err, AL_ETIMEDOUT, 0,
					  "guest did not boot within %d s",
					  VM_BOOT_TIMEOUT_MS / 1000);
		struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
				      {.fd = pidfd, .events = POLLIN}};
		int rc = poll(p, 2, left > 1000 ? 1000 : (int)left);
		if (rc < 0 && errno != EINTR)
			return al_err_sys(err, AL_ESYS, errno, "poll");
		if (rc <= 0)
			continue;
		if (p[0].revents != 0) {
			ssize_t n = read(fd, buf + have, want - have);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return al_err_set(err, AL_EPROTO, 0,
						  "guest channel closed during "
						  "boot");
			have += (size_t)n;
		} else if (p[1].revents != 0) {
			return al_err_set(err, AL_EUNAVAIL, 0,
					  "QEMU exited during boot");
		}
	}
	if (memcmp(buf, INIT_MARKER, want) != 0)
		return al_err_set(err, AL_EPROTO, 0,
				  "guest init sent something else than its "
				  "marker");
	return 0;
}

/* The init's GO line (guest/init/init.c): clock, hostname, 32 bytes of
 * entropy and the MAC its NIC takes ("xx:xx:xx:xx:xx:xx", vm/net.h). */
static int send_go(int fd, const char *hostname, const char *mac,
		   al_err *err)
{
	uint8_t seed[32];
	if (getrandom(seed, sizeof seed, 0) != (ssize_t)sizeof seed)
		return al_err_sys(err, AL_ESYS, errno, "getrandom");
	char hex[2 * sizeof seed + 1];
	for (size_t i = 0; i < sizeof seed; i++)
		snprintf(hex + 2 * i, 3, "%02x", seed[i]);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	char line[192];
	int n = snprintf(line, sizeof line, "GO %lld %s %s %s\n",
			 (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000,
			 hostname, hex, mac);
	explicit_bzero(seed, sizeof seed);
	if (n < 0 || (size_t)n >= sizeof line)
		return al_err_set(err, AL_EINTERNAL, 0, "GO line too long");
	ssize_t w = send(fd, line, (size_t)n, MSG_NOSIGNAL);
	explicit_bzero(line, sizeof line);
	explicit_bzero(hex, sizeof hex);
	if (w != n)
		return al_err_sys(err, AL_EPROTO, errno,
				  "sending GO to the guest");
	return 0;
}

static json_object *caps_ignore_shared(void)
{
	json_object *args = json_object_new_object();
	json_object *caps = json_object_new_array();
	json_object *c = json_object_new_object();
	json_object_object_add(c, "capability",
			       json_object_new_string("x-ignore-shared"));
	json_object_object_add(c, "state", json_object_new_boolean(1));
	json_object_array_add(caps, c);
	json_object_object_add(args, "capabilities", caps);
	return args;
}

/* Hand fd to QEMU under the name "mig" and run a migration command with
 * uri fd:mig, then poll query-migrate until it completed. */
static int migrate(al_qmp *q, const char *cmd, int fd, int64_t deadline_ms,
		   al_err *err)
{
	json_object *args = caps_ignore_shared();
	int rc = al_qmp_run(q, "migrate-set-capabilities", args, deadline_ms,
			    err);
	json_object_put(args);
	if (rc < 0)
		return -1;
	args = json_object_new_object();
	json_object_object_add(args, "fdname", json_object_new_string("mig"));
	json_object *r = al_qmp_exec(q, "getfd", args, fd, deadline_ms, err);
	json_object_put(args);
	if (r == NULL)
		return -1;
	json_object_put(r);
	args = json_object_new_object();
	json_object_object_add(args, "uri", json_object_new_string("fd:mig"));
	rc = al_qmp_run(q, cmd, args, deadline_ms, err);
	json_object_put(args);
	if (rc < 0)
		return -1;
	for (;;) {
		r = al_qmp_exec(q, "query-migrate", NULL, -1, deadline_ms, err);
		if (r == NULL)
			return -1;
		json_object *st = NULL;
		json_object_object_get_ex(r, "status", &st);
		const char *s = json_object_is_type(st, json_type_string)
					? json_object_get_string(st)
					: "";
		if (strcmp(s, "completed") == 0) {
			json_object_put(r);
			return 0;
		}
		if (strcmp(s, "failed") == 0 || strcmp(s, "cancelled") == 0) {
			json_object *d = NULL;
			json_object_object_get_ex(r, "error-desc", &d);
			al_err_set(err, AL_EINTERNAL, 0, "%s %s: %.200s", cmd, s,
				   json_object_is_type(d, json_type_string)
					   ? json_object_get_string(d)
					   : "no reason given");
			json_object_put(r);
			return -1;
		}
		json_object_put(r);
		if (al_now_ms() >= deadline_ms)
			return al_err_set(err, AL_ETIMEDOUT, 0,
					  "%s did not complete in time", cmd);
		sleep_ms(1);
	}
}

/* Clone a disk image: a reflink where the filesystem can (btrfs, xfs),
 * else a copy of the data extents only (the image is sparse); *size is
 * its size. */
static int disk_clone(const char *src, const char *dst, uint64_t *size,
		      al_err *err)
{
	al_autofd int in = open(src, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (in < 0 || fstat(in, &st) < 0)
		return al_err_sys(err, AL_ENOENT, errno, "disk image %s", src);
	*size = (uint64_t)st.st_size;
	al_autofd int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC |
					      O_CLOEXEC | O_NOFOLLOW,
				 0600);
	if (out < 0)
		return al_err_sys(err, AL_ESYS, errno, "create %s", dst);
	if (ioctl(out, FICLONE, in) == 0)
		return 0;
	int e = errno;
	if (e != ENOSPC && e != EDQUOT && al_copy_sparse(in, out, err) == 0)
		return 0;
	unlink(dst);
	/* A full pool is the operator's to fix, not a bug: say so. */
	if (e == ENOSPC || e == EDQUOT || err->code == AL_EUNAVAIL)
		return al_err_set(err, AL_EUNAVAIL, 0,
				  "the sandbox pool is full (cloning the disk "
				  "image)");
	al_err_wrap(err, "copy %s to %s", src, dst);
	return -1;
}

/* A fresh private run directory; short, because unix socket paths are. */
static int rundir_make(char *out, size_t len, al_err *err)
{
	if (fmt_path(out, len, err, VM_RUNDIR_PREFIX "XXXXXX") < 0)
		return -1;
	if (mkdtemp(out) == NULL) {
		int e = errno;
		out[0] = '\0';
		return al_err_sys(err, AL_ESYS, e, "mkdtemp");
	}
	return 0;
}

/* The guest console's last bytes: from the file of a template boot, or
 * over QMP from a sandbox's ring buffer. */
static void console_tail(const char *rundir, al_qmp *q, char *out,
			 size_t len)
{
	char p[128];
	snprintf(p, sizeof p, "%s/serial.log", rundir);
	file_tail(p, out, len);
	if (out[0] != '\0' || q == NULL)
		return;
	json_object *args = json_object_new_object();
	json_object_object_add(args, "device", json_object_new_string("ser"));
	json_object_object_add(args, "size", json_object_new_int(4096));
	json_object_object_add(args, "format", json_object_new_string("utf8"));
	al_err e;
	json_object *r = al_qmp_exec(q, "ringbuf-read", args, -1,
				     al_now_ms() + 1000, &e);
	json_object_put(args);
	const char *s = json_object_get_string(r);
	size_t n = s != NULL ? strlen(s) : 0;
	const char *from = n >= len ? s + n - (len - 1) : s;
	snprintf(out, len, "%s", from != NULL ? from : "");
	for (char *c = out; *c != '\0'; c++)
		if (*c < ' ' || *c > '~')
			*c = *c == '\n' ? '|' : '?';
	json_object_put(r);
}

/* Append what QEMU said last to a failure; log the guest's console, and
 * add it to the error too when the guest is ours (template builds): a
 * sandbox's console is its owner's data and goes only to the log. */
static void explain(const char *rundir, al_qmp *q, int with_console,
		    al_err *err)
{
	char tail[240], p[128];
	snprintf(p, sizeof p, "%s/qemu.log", rundir);
	file_tail(p, tail, sizeof tail);
	/* Every QEMU says this of the unconnected NIC (nic_args): noise. */
	static const char nopeer[] =
		"qemu-system-x86_64: warning: nic net0 has no peer|";
	char *w = strstr(tail, nopeer);
	if (w != NULL)
		memmove(w, w + sizeof nopeer - 1,
			strlen(w + sizeof nopeer - 1) + 1);
	if (tail[0] != '\0' && strlen(err->msg) + 20 < sizeof err->msg) {
		size_t l = strlen(err->msg);
		snprintf(err->msg + l, sizeof err->msg - l, " (qemu: %s)", tail);
	}
	console_tail(rundir, q, tail, sizeof tail);
	if (tail[0] == '\0')
		return;
	al_warn("vm: guest console before the failure: %s", tail);
	if (with_console && strlen(err->msg) + 40 < sizeof err->msg) {
		size_t l = strlen(err->msg);
		const char *t = tail;
		size_t room = sizeof err->msg - l - 14;
		if (strlen(t) > room)
			t += strlen(t) - room;
		snprintf(err->msg + l, sizeof err->msg - l, " (console: %s)",
			 t);
	}
}

/* Start QEMU for p and talk QMP to it; *agent_fd gets the agent port. */
static int launch(vm_priv *p, const vm_launch *l, int *agent_fd,
		  int64_t deadline_ms, al_err *err)
{
	int qmp_fd = -1;
	p->pid = spawn_qemu(l, &p->pidfd, &qmp_fd, agent_fd, err);
	if (p->pid < 0) {
		p->pid = 0;
		return -1;
	}
	p->qmp = al_qmp_open_fd(qmp_fd, deadline_ms, err);
	if (p->qmp == NULL)
		return -1;
	if (l->mode == VM_COLD)
		return al_qmp_run(p->qmp, "cont", NULL, deadline_ms, err);
	return 0;
}

/* Boot: start QEMU and wait for the init's marker. */
static int boot_machine(vm_priv *p, const vm_launch *l, int *agent_fd,
			al_err *err)
{
	int64_t deadline = al_now_ms() + VM_BOOT_TIMEOUT_MS;
	if (launch(p, l, agent_fd, deadline, err) < 0)
		return -1;
	return read_marker(*agent_fd, p->pidfd, deadline, err);
}

/* Restore: start QEMU waiting for its state, load it, run. The agent port
 * is connected from QEMU's start, so before the load: the snapshot was
 * taken with a host connected, and a port whose host is gone after the
 * load would make the guest init start over. */
static int restore_machine(vm_priv *p, const vm_launch *l, int state_fd,
			   int *agent_fd, al_err *err)
{
	int64_t deadline = al_now_ms() + VM_RESTORE_TIMEOUT_MS;
	int64_t t0 = al_now_ms();
	if (launch(p, l, agent_fd, deadline, err) < 0)
		return -1;
	int64_t t1 = al_now_ms();
	if (migrate(p->qmp, "migrate-incoming", state_fd, deadline, err) < 0)
		return -1;
	int64_t t2 = al_now_ms();
	int rc = al_qmp_run(p->qmp, "cont", NULL, deadline, err);
	al_info("vm restore: QEMU up in %lld ms, state loaded in %lld ms, "
		"running after %lld ms",
		(long long)(t1 - t0), (long long)(t2 - t1),
		(long long)(al_now_ms() - t0));
	return rc;
}

/* End p's QEMU, keeping its run directory and uid for another start. */
static void machine_kill(vm_priv *p, int *agent_fd)
{
	al_qmp_close(p->qmp);
	p->qmp = NULL;
	if (p->pidfd >= 0 || p->pid > 0)
		kill_reap(p->pid, p->pidfd);
	if (p->pidfd >= 0)
		close(p->pidfd);
	p->pidfd = -1;
	p->pid = 0;
	if (*agent_fd >= 0)
		close(*agent_fd);
	*agent_fd = -1;
}

static void priv_free(vm_priv *p)
{
	if (p == NULL)
		return;
	int no_agent = -1;
	machine_kill(p, &no_agent);
	al_vm_rundir_remove(p->rundir);
	al_vmjail_uid_drop(&p->uid);
	free(p);
}

static int read_small(const char *path, char *buf, size_t len)
{
	al_autofd int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* ---- the driver ---- */

/* What a sandbox's QEMU may use: the guest's RAM plus the emulator's
 * own (TCG's translation cache, device buffers), a few dozen threads,
 * and the sandbox's CPU share. */
#define VM_QEMU_OVERHEAD (512ull << 20)
#define VM_QEMU_PIDS 256u

static al_cgroup_limits vm_limits(const al_sandbox_spec *spec)
{
	al_cgroup_limits lim = {
		.memory_bytes = ((uint64_t)AL_VM_MEM_MB << 20) +
				VM_QEMU_OVERHEAD,
		.pids_max = VM_QEMU_PIDS,
		.cpu_shares = spec->limits.cpu_shares != 0
				      ? spec->limits.cpu_shares
				      : 1024,
	};
	return lim;
}

static int vm_start(const al_sandbox_spec *spec, al_driver_handle *h,
		    al_err *err)
{
	if (h == NULL || spec == NULL)
		return al_err_set(err, AL_EINVAL, 0, "no spec or handle");
	h->init_pid = 0;
	h->agent_fd = -1;
	h->cgroup[0] = '\0';
	h->priv = NULL;
	h->agent_in = NULL;
	if (spec->id == NULL || !al_id_valid(spec->id))
		return al_err_set(err, AL_EINVAL, 0, "invalid sandbox id");
	if (!hostname_ok(spec->hostname))
		return al_err_set(err, AL_EINVAL, 0, "invalid hostname");
	if (spec->rootfs == NULL || spec->rootfs[0] != '/' ||
	    !guest_path_ok(spec->agent))
		return al_err_set(err, AL_EINVAL, 0,
				  "rootfs and agent must be absolute paths");

	char link[AL_PATH_MAX], vmdir[AL_PATH_MAX], disk[AL_PATH_MAX];
	char tdisk[AL_PATH_MAX], mem[AL_PATH_MAX], state[AL_PATH_MAX];
	char accel_s[8] = "";
	if (fmt_path(link, sizeof link, err, "%s/" VM_LINK, spec->rootfs) < 0 ||
	    fmt_path(disk, sizeof disk, err, "%s/" VM_DISK, spec->rootfs) < 0)
		return -1;
	ssize_t n = readlink(link, vmdir, sizeof vmdir - 1);
	if (n < 0)
		return al_err_sys(err, AL_ENOENT, errno,
				  "template has no VM image (%s)", link);
	vmdir[n] = '\0';
	if (vmdir[0] != '/' || (size_t)n >= sizeof vmdir - 16)
		return al_err_set(err, AL_EINVAL, 0, "bad %s link", VM_LINK);
	if (fmt_path(tdisk, sizeof tdisk, err, "%s/disk.ext4", vmdir) < 0 ||
	    fmt_path(mem, sizeof mem, err, "%s/mem", vmdir) < 0 ||
	    fmt_path(state, sizeof state, err, "%s/state", vmdir) < 0)
		return -1;
	char accel_p[AL_PATH_MAX + 8];
	snprintf(accel_p, sizeof accel_p, "%s/accel", vmdir);

	al_autofd int state_fd = open(state, O_RDONLY | O_CLOEXEC);
	int restore = state_fd >= 0 && access(mem, R_OK) == 0 &&
		      read_small(accel_p, accel_s, sizeof accel_s) == 0;
	if (restore && !al_vm_snapshot_current(vmdir)) {
		/* Taken by an older Airlock: its devices or init may not
		 * match. The controller rebuilds it at its next start. */
		al_warn("vm %s: template snapshot %s is of an older format: "
			"booting instead",
			spec->id, vmdir);
		restore = 0;
	}
	al_vm_kernel kernel;
	al_config cfg;
	if (al_config_load(&cfg, err) < 0)
		return -1;
	int64_t t0 = al_now_ms();
	al_autofd int mem_fd = -1;
	vm_launch l = {.agent = spec->agent, .disk = disk, .mem_fd = -1};
	if (restore) {
		l.mode = VM_CLONE;
		l.accel = strcmp(accel_s, "kvm") == 0 ? AL_VM_KVM : AL_VM_TCG;
		int shared;
		mem_fd = al_vmmem_get(cfg.run_dir, vmdir, &shared, err);
		if (mem_fd < 0)
			return -1;
		l.mem_fd = mem_fd;
	} else {
		if (al_vm_kernel_find(cfg.state_dir, &kernel, err) < 0)
			return -1;
		l.mode = VM_COLD;
		l.kernel = &kernel;
		l.accel = al_vm_accel_load(cfg.state_dir);
	}

	uint64_t disk_size;
	if (disk_clone(tdisk, disk, &disk_size, err) < 0)
		return -1;
	vm_priv *p = calloc(1, sizeof *p);
	if (p == NULL) {
		unlink(disk);
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	}
	p->pidfd = -1;
	p->uid.lock_fd = -1;
	p->disk_size = disk_size;
	al_autofd int agent_fd = -1;
	char runlink[AL_PATH_MAX] = "";
	int cg_made = 0;
	if (al_vmjail_uid_take(spec->id, &p->uid, err) < 0)
		goto fail;
	l.uid = p->uid.uid;
	al_cgroup_limits lim = vm_limits(spec);
	if (al_cgroup_create(spec->id, &lim, err) < 0)
		goto fail;
	cg_made = 1;
	snprintf(h->cgroup, sizeof h->cgroup, "%s", spec->id);
	l.cgroup = spec->id;
	if (rundir_make(p->rundir, sizeof p->rundir, err) < 0)
		goto fail;
	l.rundir = p->rundir;
	/* Where the run directory is, for whoever releases the sandbox
	 * when its shim died without doing it (al_reap_sandbox). */
	if (fmt_path(runlink, sizeof runlink, err, "%s/" VM_RUNLINK,
		     spec->rootfs) == 0) {
		unlink(runlink);
		if (symlink(p->rundir, runlink) < 0)
			al_warn("vm %s: link %s: %s", spec->id, runlink,
				strerror(errno));
	}
	int rc = restore ? restore_machine(p, &l, state_fd, &agent_fd, err)
			 : boot_machine(p, &l, &agent_fd, err);
	if (rc < 0 && restore && err->code != AL_ETIMEDOUT) {
		/* A snapshot this QEMU cannot load (a damaged file, a QEMU
		 * changed under it): boot the template instead, seconds not
		 * milliseconds, and say why. A timeout is load, not a bad
		 * snapshot: it fails the create like any other. */
		explain(p->rundir, p->qmp, 0, err);
		al_warn("vm %s: restoring %s failed (%s): booting it instead",
			spec->id, vmdir, err->msg);
		machine_kill(p, &agent_fd);
		restore = 0;
		unlink(disk);
		if (disk_clone(tdisk, disk, &p->disk_size, err) < 0 ||
		    al_vm_kernel_find(cfg.state_dir, &kernel, err) < 0)
			goto fail;
		l.mode = VM_COLD;
		l.kernel = &kernel;
		l.mem_fd = -1;
		l.accel = al_vm_accel_load(cfg.state_dir);
		rc = boot_machine(p, &l, &agent_fd, err);
	}
	if (rc < 0)
		goto fail;
	int64_t t1 = al_now_ms();
	uint8_t macb[6];
	char mac[AL_VM_MAC_STRLEN];
	if (al_vm_mac_for_id(spec->id, macb, err) < 0)
		goto fail;
	al_vm_mac_format(macb, mac);
	if (send_go(agent_fd, spec->hostname, mac, err) < 0)
		goto fail;
	al_info("vm %s: %s under %s in %lld ms", spec->id,
		restore ? "restored" : "booted", al_vm_accel_name(l.accel),
		(long long)(t1 - t0));
	p->accel = l.accel;
	h->init_pid = p->pid;
	h->agent_fd = al_steal_fd(&agent_fd);
	h->priv = p;
	return 0;
fail:
	if (p->rundir[0] != '\0')
		explain(p->rundir, p->qmp, 0, err);
	al_err_wrap(err, "starting vm %s", spec->id);
	priv_free(p);
	if (cg_made) {
		al_err tmp_err = {0};
		if (al_cgroup_destroy(spec->id, &tmp_err) < 0)
			al_warn("vm %s: %s", spec->id, tmp_err.msg);
	}
	h->cgroup[0] = '\0';
	unlink(disk);
	if (runlink[0] != '\0')
		unlink(runlink);
	return -1;
}

static int vm_stop(al_driver_handle *h, al_err *err)
{
	(void)err;
	if (h == NULL)
		return 0;
	vm_priv *p = h->priv;
	if (h->agent_fd >= 0) {
		close(h->agent_fd);
		h->agent_fd = -1;
	}
	if (p != NULL) {
		if (p->qmp != NULL && !wait_exit(p->pidfd, 0)) {
			al_err e;
			if (al_qmp_run(p->qmp, "quit", NULL,
				       al_now_ms() + VM_QUIT_TIMEOUT_MS,
				       &e) == 0)
				(void)wait_exit(p->pidfd, VM_QUIT_TIMEOUT_MS);
		}
		/* Gone already, or SIGKILL now; reaped either way (ECHILD if
		 * the shim's SIGCHLD handling got there first). */
		priv_free(p);
	}
	h->priv = NULL;
	h->init_pid = 0;
	/* Last, and kept for a retry if the leaf is still emptying. */
	if (h->cgroup[0] != '\0') {
		if (al_cgroup_destroy(h->cgroup, err) < 0)
			return -1;
		h->cgroup[0] = '\0';
	}
	return 0;
}

/* Request ids of the driver's own requests to the agent (agentproto.h):
 * the shim's relay hands out ids from 1 upwards and has served none yet
 * when the driver asks (a standby serves none; a start grows before going
 * live). */
#define VM_IDENTITY_ID AL_REQ_ID_VM_IDENTITY
#define VM_DISK_ID AL_REQ_ID_VM_DISK_GROW
#define VM_ADOPT_TIMEOUT_MS 5000
/* The agent waits up to 5 s for the device; the resize itself is ms. */
#define VM_GROW_TIMEOUT_MS 15000

/* Send the agent one request and wait for its answer: 0 on RESULT. Sent
 * synchronously on h->agent_fd: the shim asks the driver only while no
 * request is in flight on the agent channel, so the answer is the next
 * frame of that id; stray output of the guest's own making is dropped.
 * Read through the owner's reader (h->agent_in), which may hold bytes. */
static int agent_call(al_driver_handle *h, uint16_t type, uint32_t id,
		      const char *body, size_t len, int timeout_ms,
		      al_err *err)
{
	if (al_frame_send(h->agent_fd, type, id, body, len, err) < 0)
		return -1;
	al_frame_reader own;
	al_frame_reader_init(&own);
	al_frame_reader *rd = h->agent_in != NULL ? h->agent_in : &own;
	int64_t deadline = al_now_ms() + timeout_ms;
	int rc;
	for (;;) {
		al_frame f;
		if (al_frame_recv(h->agent_fd, rd, &f, deadline, err) < 0) {
			rc = -1;
			break;
		}
		if (f.id != id) {
			al_frame_free(&f);
			continue;
		}
		if (f.type == AL_F_RESULT) {
			rc = 0;
		} else {
			/* The guest's words, bounded and printable: for the
			 * log, never to act on. */
			char why[161] = "";
			for (size_t i = 0; f.type == AL_F_ERROR && i < f.len &&
					   i < sizeof why - 1;
			     i++) {
				char c = (char)f.payload[i];
				why[i] = c >= ' ' && c <= '~' ? c : '?';
				why[i + 1] = '\0';
			}
			rc = al_err_set(err, AL_EPROTO, 0,
					"the guest refused %s (%s %s)",
					al_frame_type_name(type),
					al_frame_type_name(f.type), why);
		}
		al_frame_free(&f);
		break;
	}
	al_frame_reader_free(&own);
	return rc;
}

/* A standby VM becomes sandbox spec->id: the agent sets the hostname,
 * reseeds the kernel RNG from the host and takes the host's clock (the
 * GO line gave it the standby's), by agent_call. The machine's rootfs
 * moved with the shim's rename; QEMU holds its disk open and needs
 * nothing else. */
static int vm_adopt(al_driver_handle *h, const al_sandbox_spec *spec,
		    al_err *err)
{
	if (h == NULL || h->priv == NULL || h->agent_fd < 0 || spec == NULL)
		return al_err_set(err, AL_ESTATE, 0, "vm not running");
	if (spec->id == NULL || !al_id_valid(spec->id) ||
	    !hostname_ok(spec->hostname))
		return al_err_set(err, AL_EINVAL, 0,
				  "invalid sandbox id or hostname");
	/* The standby's limits leaf takes the sandbox's name and share. */
	if (h->cgroup[0] != '\0' && strcmp(h->cgroup, spec->id) != 0) {
		if (al_cgroup_rename(h->cgroup, spec->id, err) < 0)
			return -1;
		snprintf(h->cgroup, sizeof h->cgroup, "%s", spec->id);
	}
	al_cgroup_limits lim = vm_limits(spec);
	if (h->cgroup[0] != '\0' &&
	    al_cgroup_set_limits(h->cgroup, &lim, err) < 0)
		return -1;
	uint8_t seed[32];
	if (getrandom(seed, sizeof seed, 0) != (ssize_t)sizeof seed)
		return al_err_sys(err, AL_ESYS, errno, "getrandom");
	char hex[2 * sizeof seed + 1];
	for (size_t i = 0; i < sizeof seed; i++)
		snprintf(hex + 2 * i, 3, "%02x", seed[i]);
	explicit_bzero(seed, sizeof seed);
	/* The standby's NIC has the standby's MAC (its GO line): it takes
	 * the sandbox's, which the API reports and the gateway expects. */
	uint8_t macb[6];
	char mac[AL_VM_MAC_STRLEN];
	if (al_vm_mac_for_id(spec->id, macb, err) < 0) {
		explicit_bzero(hex, sizeof hex);
		return -1;
	}
	al_vm_mac_format(macb, mac);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	char body[256];
	int n = snprintf(body, sizeof body,
			 "{\"hostname\":\"%s\",\"entropy\":\"%s\","
			 "\"time_ms\":%lld,\"mac\":\"%s\"}",
			 spec->hostname, hex,
			 (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000,
			 mac);
	explicit_bzero(hex, sizeof hex);
	if (n < 0 || (size_t)n >= sizeof body)
		return al_err_set(err, AL_EINTERNAL, 0, "identity too long");
	int rc = agent_call(h, AL_F_IDENTITY, VM_IDENTITY_ID, body, (size_t)n,
			    VM_ADOPT_TIMEOUT_MS, err);
	explicit_bzero(body, sizeof body);
	if (rc < 0)
		al_err_wrap(err, "adopting vm as %s", spec->id);
	return rc;
}

/* The guest's filesystem grows online: QEMU resizes the image (the guest
 * kernel gets a config interrupt and the new capacity), then the agent
 * grows the mounted ext4 to it. The size is the host's alone, from the
 * sandbox's limit; the guest only says whether it did it. */
static int vm_grow_disk(al_driver_handle *h, uint64_t bytes, al_err *err)
{
	vm_priv *p = h != NULL ? h->priv : NULL;
	if (p == NULL || p->qmp == NULL || h->agent_fd < 0)
		return al_err_set(err, AL_ESTATE, 0, "vm not running");
	uint64_t want = al_vm_disk_size(p->disk_size, bytes);
	if (want == p->disk_size)
		return 0;
	json_object *args = json_object_new_object();
	json_object_object_add(args, "device", json_object_new_string("vda"));
	json_object_object_add(args, "size",
			       json_object_new_int64((int64_t)want));
	int rc = al_qmp_run(p->qmp, "block_resize", args,
			    al_now_ms() + VM_GROW_TIMEOUT_MS, err);
	json_object_put(args);
	al_autofree char *body = rc == 0 ? al_disk_grow_pack("/", want, err)
					  : NULL;
	if (rc == 0 && body == NULL)
		rc = -1;
	if (rc == 0)
		rc = agent_call(h, AL_F_DISK_GROW, VM_DISK_ID, body,
				strlen(body), VM_GROW_TIMEOUT_MS, err);
	if (rc < 0) {
		al_err_wrap(err, "growing the vm's disk to %llu MiB",
			    (unsigned long long)(want >> 20));
		return -1;
	}
	p->disk_size = want;
	return 1;
}

static int vm_pause_resume(al_driver_handle *h, const char *cmd, al_err *err)
{
	vm_priv *p = h != NULL ? h->priv : NULL;
	if (p == NULL || p->qmp == NULL)
		return al_err_set(err, AL_ESTATE, 0, "vm not running");
	return al_qmp_run(p->qmp, cmd, NULL, al_now_ms() + 5000, err);
}

static int vm_pause(al_driver_handle *h, al_err *err)
{
	return vm_pause_resume(h, "stop", err);
}

static int vm_resume(al_driver_handle *h, al_err *err)
{
	return vm_pause_resume(h, "cont", err);
}

static const char *vm_accel(const al_driver_handle *h)
{
	const vm_priv *p = h != NULL ? h->priv : NULL;
	return al_vm_accel_name(p != NULL ? p->accel : AL_VM_TCG);
}

const al_driver al_driver_vm = {
	.name = "vm",
	.init_name = "virtual machine (QEMU)",
	.warm_up = 1,
	.start = vm_start,
	.stop = vm_stop,
	.adopt = vm_adopt,
	.grow_disk = vm_grow_disk,
	.pause = vm_pause,
	.resume = vm_resume,
	.accel = vm_accel,
};

/* ---- accelerator probe ---- */

al_vm_accel al_vm_probe(const al_vm_kernel *k, int timeout_ms, char *why,
			size_t whylen)
{
	snprintf(why, whylen, "unknown");
	al_autofd int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0) {
		snprintf(why, whylen, "/dev/kvm: %s", strerror(errno));
		return AL_VM_TCG;
	}
	al_err err = {0};
	char rundir[64];
	if (rundir_make(rundir, sizeof rundir, &err) < 0) {
		snprintf(why, whylen, "%s", err.msg);
		return AL_VM_TCG;
	}
	al_vmjail_uid uid;
	if (al_vmjail_uid_take("probe", &uid, &err) < 0) {
		snprintf(why, whylen, "%s", err.msg);
		al_vm_rundir_remove(rundir);
		return AL_VM_TCG;
	}
	vm_launch l = {.mode = VM_PROBE,
		       .accel = AL_VM_KVM,
		       .kernel = k,
		       .mem_fd = -1,
		       .rundir = rundir,
		       .uid = uid.uid};
	int pidfd = -1;
	al_autofd int qmp_fd = -1, agent_fd = -1;
	al_vm_accel res = AL_VM_TCG;
	pid_t pid = spawn_qemu(&l, &pidfd, &qmp_fd, &agent_fd, &err);
	if (pid < 0) {
		snprintf(why, whylen, "%s", err.msg);
		al_vm_rundir_remove(rundir);
		al_vmjail_uid_drop(&uid);
		return AL_VM_TCG;
	}
	char serial[128];
	snprintf(serial, sizeof serial, "%s/serial.log", rundir);
	int64_t deadline = al_now_ms() + timeout_ms;
	snprintf(why, whylen, "guest did not reach init within %d ms",
		 timeout_ms);
	int exited = 0;
	for (;;) {
		char buf[4096];
		al_autofd int fd = open(serial, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : 0;
		if (n > 0) {
			buf[n] = '\0';
			if (memmem(buf, (size_t)n, AL_VM_PROBE_MARKER,
				   strlen(AL_VM_PROBE_MARKER)) != NULL) {
				res = AL_VM_KVM;
				snprintf(why, whylen, "guest booted under kvm");
				break;
			}
		}
		if (exited)
			break;
		if (wait_exit(pidfd, 20)) {
			char tail[160], p[128];
			snprintf(p, sizeof p, "%s/qemu.log", rundir);
			file_tail(p, tail, sizeof tail);
			snprintf(why, whylen, "QEMU exited under kvm: %s",
				 tail[0] != '\0' ? tail : "no message");
			/* The marker may have landed right before exit: one
			 * more read. */
			exited = 1;
			continue;
		}
		if (al_now_ms() >= deadline)
			break;
	}
	kill_reap(pid, pidfd);
	close(pidfd);
	al_vm_rundir_remove(rundir);
	al_vmjail_uid_drop(&uid);
	return res;
}

/* ---- template build ---- */

static int run_wait(char *const argv[], al_err *err)
{
	pid_t pid = fork();
	if (pid < 0)
		return al_err_sys(err, AL_ESYS, errno, "fork");
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
		}
		char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
		execve(argv[0], argv, envp);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return al_err_sys(err, AL_ESYS, errno, "waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return al_err_set(err, AL_ESYS, 0, "%s failed (status %d)",
				  argv[0], st);
	return 0;
}

static int build_disk(const char *rootfs, const char *disk, al_err *err)
{
	al_autofd int fd = open(disk, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				0600);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "create %s", disk);
	if (ftruncate(fd, (off_t)AL_VM_DISK_BYTES) < 0)
		return al_err_sys(err, AL_ESYS, errno, "size %s", disk);
	char *argv[] = {"/usr/sbin/mkfs.ext4", "-q", "-F", "-L", "airlock",
			"-d", (char *)rootfs, (char *)disk, NULL};
	if (run_wait(argv, err) < 0) {
		al_err_wrap(err, "building the disk image of %s", rootfs);
		return -1;
	}
	return 0;
}

static int fsync_path(const char *path, al_err *err)
{
	al_autofd int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		return al_err_sys(err, AL_ESYS, errno, "fsync %s", path);
	return 0;
}

/* Write the guest RAM of a template boot to path, holes kept. */
static int save_ram(int mem_fd, const char *path, al_err *err)
{
	al_autofd int out = open(path, O_WRONLY | O_CREAT | O_TRUNC |
					       O_CLOEXEC | O_NOFOLLOW,
				 0600);
	if (out < 0)
		return al_err_sys(err, AL_ESYS, errno, "create %s", path);
	if (al_copy_sparse(mem_fd, out, err) < 0) {
		al_err_wrap(err, "writing %s", path);
		return -1;
	}
	if (fsync(out) < 0)
		return al_err_sys(err, AL_ESYS, errno, "fsync %s", path);
	return 0;
}

/* Boot the template disk once and snapshot it in dir (mem, state). The
 * guest RAM lives in a memfd QEMU shares (share=on) while it runs; once
 * QEMU is gone it is copied to dir/mem, holes kept. */
static int snapshot_template(const char *dir, const al_vm_kernel *k,
			     al_vm_accel accel, al_err *err)
{
	char disk[AL_PATH_MAX], mem[AL_PATH_MAX], state[AL_PATH_MAX];
	if (fmt_path(disk, sizeof disk, err, "%s/disk.ext4", dir) < 0 ||
	    fmt_path(mem, sizeof mem, err, "%s/mem", dir) < 0 ||
	    fmt_path(state, sizeof state, err, "%s/state", dir) < 0)
		return -1;
	al_autofd int mem_fd = memfd_create("airlock-template-boot",
					    MFD_CLOEXEC);
	if (mem_fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "memfd_create");
	if (ftruncate(mem_fd, (off_t)AL_VM_MEM_MB << 20) < 0)
		return al_err_sys(err, AL_ESYS, errno, "size guest RAM");
	vm_priv *p = calloc(1, sizeof *p);
	if (p == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	p->pidfd = -1;
	p->uid.lock_fd = -1;
	al_autofd int agent_fd = -1;
	al_autofd int state_fd = -1;
	vm_launch l = {.mode = VM_TEMPLATE,
		       .accel = accel,
		       .kernel = k,
		       .mem_fd = mem_fd,
		       .disk = disk,
		       .agent = "/sbin/airlock-agent"};
	if (al_vmjail_uid_take(dir, &p->uid, err) < 0 ||
	    rundir_make(p->rundir, sizeof p->rundir, err) < 0)
		goto fail;
	l.rundir = p->rundir;
	l.uid = p->uid.uid;
	int64_t deadline = al_now_ms() + VM_BOOT_TIMEOUT_MS;
	if (launch(p, &l, &agent_fd, deadline, err) < 0 ||
	    read_marker(agent_fd, p->pidfd, deadline, err) < 0)
		goto fail;
	/* The guest init now waits for GO with this host connected: the
	 * state every clone resumes in. */
	state_fd = open(state, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (state_fd < 0) {
		al_err_sys(err, AL_ESYS, errno, "create %s", state);
		goto fail;
	}
	deadline = al_now_ms() + VM_RESTORE_TIMEOUT_MS;
	if (al_qmp_run(p->qmp, "stop", NULL, deadline, err) < 0 ||
	    migrate(p->qmp, "migrate", state_fd, deadline, err) < 0)
		goto fail;
	if (fsync(state_fd) < 0) {
		al_err_sys(err, AL_ESYS, errno, "fsync %s", state);
		goto fail;
	}
	al_err e;
	(void)al_qmp_run(p->qmp, "quit", NULL, al_now_ms() + 2000, &e);
	(void)wait_exit(p->pidfd, VM_QUIT_TIMEOUT_MS);
	priv_free(p);
	if (save_ram(mem_fd, mem, err) < 0)
		return -1;
	return fsync_path(disk, err);
fail:
	if (p->rundir[0] != '\0')
		explain(p->rundir, p->qmp, 1, err);
	priv_free(p);
	return -1;
}

static int write_small(const char *path, const char *s, al_err *err)
{
	al_autofd int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				0644);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s) ||
	    fsync(fd) < 0)
		return al_err_sys(err, AL_ESYS, errno, "write %s", path);
	return 0;
}

static void remove_vmdir(const char *dir)
{
	static const char *const names[] = {"disk.ext4", "mem", "state",
					    "accel", "format"};
	char p[AL_PATH_MAX + 16];
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		snprintf(p, sizeof p, "%s/%s", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
}

int al_vm_template_build(const char *rootfs, const char *vmdir,
			 const al_vm_kernel *k, al_vm_accel accel,
			 al_err *err)
{
	char nd[AL_PATH_MAX], disk[AL_PATH_MAX], link[AL_PATH_MAX];
	char tmplink[AL_PATH_MAX], accel_p[AL_PATH_MAX], format_p[AL_PATH_MAX];
	if (rootfs == NULL || rootfs[0] != '/' || vmdir == NULL ||
	    vmdir[0] != '/')
		return al_err_set(err, AL_EINVAL, 0,
				  "rootfs and vmdir must be absolute");
	if (fmt_path(nd, sizeof nd, err, "%s.new", vmdir) < 0 ||
	    fmt_path(disk, sizeof disk, err, "%s/disk.ext4", nd) < 0 ||
	    fmt_path(accel_p, sizeof accel_p, err, "%s/accel", nd) < 0 ||
	    fmt_path(format_p, sizeof format_p, err, "%s/format", nd) < 0 ||
	    fmt_path(link, sizeof link, err, "%s/" VM_LINK, rootfs) < 0 ||
	    fmt_path(tmplink, sizeof tmplink, err, "%s/" VM_LINK ".new",
		     rootfs) < 0)
		return -1;
	remove_vmdir(nd);
	if (mkdir(nd, 0700) < 0)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", nd);
	/* The link is the host's business; keep it out of the guest. */
	unlink(link);
	int64_t t0 = al_now_ms();
	if (build_disk(rootfs, disk, err) < 0 ||
	    snapshot_template(nd, k, accel, err) < 0)
		goto fail;
	if (write_small(accel_p, al_vm_accel_name(accel), err) < 0 ||
	    write_small(format_p, AL_VM_SNAPSHOT_FORMAT, err) < 0)
		goto fail;
	/* Swap the complete new directory in; clones running from the old
	 * one keep their (now unlinked) memory file mapped. */
	if (syscall(SYS_renameat2, AT_FDCWD, nd, AT_FDCWD, vmdir,
		    RENAME_EXCHANGE) == 0) {
		remove_vmdir(nd);
	} else if (errno != ENOENT || rename(nd, vmdir) < 0) {
		al_err_sys(err, AL_ESYS, errno, "rename %s", nd);
		goto fail;
	}
	unlink(tmplink);
	if (symlink(vmdir, tmplink) < 0 || rename(tmplink, link) < 0) {
		al_err_sys(err, AL_ESYS, errno, "link %s", link);
		unlink(tmplink);
		return -1;
	}
	al_info("vm template %s built in %lld ms", vmdir,
		(long long)(al_now_ms() - t0));
	return 0;
fail:
	remove_vmdir(nd);
	al_err_wrap(err, "building vm template for %s", rootfs);
	return -1;
}
