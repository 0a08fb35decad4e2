/* vm machine: see vm/machine.h. */
#include "vm/machine.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/file.h"
#include "base/log.h"
#include "host/cgroup.h"
#include "proto/agentproto.h"
#include "vm/net.h"

/* guest/init/init.c */
#define INIT_MARKER "AIRLOCK-INIT 1\n"

#define VM_RUNDIR_PREFIX "/tmp/airlock-vm-"
#define VM_ARGV_MAX 80
/* What a sandbox's QEMU may write to its qemu.log: the guest can make it
 * print (device errors), and the file is on the host's disk. */
#define VM_QEMU_LOG_MAX (1u << 20)

/* What QEMU finds at each descriptor in its jail (vm/jail.h): it opens no
 * file of the host by name, except the kernel and initrd of a boot. */
enum {
	JFD_QMP = 3,	 /* socketpair end: the monitor */
	JFD_AGENT = 4,	 /* socketpair end: the virtio-serial port */
	JFD_MEM = 5,	 /* guest RAM (memfd), as /proc/self/fd/5 */
	JFD_DISK = 6,	 /* the disk, read-write ... */
	JFD_DISK_RO = 7, /* ... and read-only: QEMU's first open probes */
	JFD_SERIAL = 8,	 /* console log file (template, probe) */
	JFD_TAP = 9,	 /* the network slot's tap (a sandbox's NIC) */
	JFD_COUNT = 10,
};
#define JAIL_KERNEL "/boot/vmlinuz"
#define JAIL_INITRD "/boot/initrd"

/* ---- small helpers ---- */

int al_vm_path(char *out, size_t len, al_err *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out, len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len)
		return al_err_set(err, AL_EINVAL, 0, "path too long");
	return 0;
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
			out[i] = out[i] == '\n'	  ? '|'
				 : out[i] == '\r' ? ' '
						  : '?';
}

void al_vm_rundir_remove(const char *dir)
{
	/* Only a directory of the name al_vm_rundir_make gives, and only the
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

/* The sandbox's NIC: virtio-net on the network slot's tap (given as a
 * descriptor: QEMU opens nothing and needs no privilege for it), or
 * with no backend at all (a template boot, a sandbox of mode "none"):
 * QEMU warns "nic net0 has no peer" and runs. A backend is not part of
 * the device state, so a template and its clones still match. The tap
 * has no IFF_VNET_HDR, which QEMU probes: the device offers no
 * offloads either way. Every machine presents AL_VM_TEMPLATE_MAC to
 * QEMU; the guest sets its sandbox's own address (core/vm/net.h). */
static int nic_args(vm_argv *a, const al_vm_launch *l)
{
	int bad = 0;
	if (l->tap_fd > 0) {
		bad |= arg(a, "-netdev");
		bad |= arg(a, "tap,id=tap0,fd=%d", JFD_TAP);
		bad |= arg(a, "-device");
		bad |= arg(a, "virtio-net-device,id=net0,netdev=tap0,"
			      "mac=" AL_VM_TEMPLATE_MAC);
		return bad;
	}
	bad |= arg(a, "-device");
	bad |= arg(a, "virtio-net-device,id=net0,mac=" AL_VM_TEMPLATE_MAC);
	return bad;
}

/* One command line for all modes: template and clone must present the
 * same devices in the same order for the device state to load. */
static int build_argv(const al_vm_launch *l, vm_argv *a, al_err *err)
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
	bad |= arg(a, "%u", l->vcpus != 0 ? l->vcpus : AL_VM_VCPUS);
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
	if (l->mode == AL_VM_TEMPLATE || l->mode == AL_VM_CLONE) {
		/* QEMU 7.2 takes no fd for guest RAM: it opens the path,
		 * and the jail's /proc makes that the memfd it was given. */
		bad |= arg(a,
			   "memory-backend-file,id=mem,size=%dM,"
			   "mem-path=/proc/self/fd/%d,share=%s",
			   AL_VM_MEM_MB, JFD_MEM,
			   l->mode == AL_VM_TEMPLATE ? "on" : "off");
	} else {
		bad |= arg(a, "memory-backend-ram,id=mem,size=%dM",
			   AL_VM_MEM_MB);
	}
	if (l->mode != AL_VM_CLONE) {
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
			   l->mode == AL_VM_PROBE ? " airlock.probe=1" : "",
			   tsc);
	}
	/* A sandbox's guest controls its console: it goes to a bounded
	 * ring in QEMU, never to a file that could fill the host's disk.
	 * The template and probe boots run only our kernel and init. */
	if (l->mode == AL_VM_COLD || l->mode == AL_VM_CLONE) {
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
	if (l->mode != AL_VM_PROBE) {
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
	if (l->mode == AL_VM_CLONE) {
		bad |= arg(a, "-incoming");
		bad |= arg(a, "defer");
		/* A migration stream's first section says what machine it
		 * came from; device state alone has none, and QEMU refuses
		 * a load without it ("Configuration section missing") unless
		 * told not to expect it. Only for that load: a template's
		 * state has the section, and this setting would fail it. */
		if (l->devices_only) {
			bad |= arg(a, "-global");
			bad |= arg(a, "migration.send-configuration=off");
		}
	}
	/* A sandbox's boot waits for the shim to put QEMU in its cgroup. */
	if (l->mode == AL_VM_COLD)
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
static pid_t spawn_qemu(const al_vm_launch *l, int *pidfd, int *qmp_fd,
			int *agent_fd, al_err *err)
{
	al_autofree vm_argv *a = calloc(1, sizeof *a);
	if (a == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "out of memory"), -1;
	if (build_argv(l, a, err) < 0)
		return -1;
	char logp[128], serp[128], root[128];
	if (al_vm_path(logp, sizeof logp, err, "%s/qemu.log", l->rundir) < 0 ||
	    al_vm_path(serp, sizeof serp, err, "%s/serial.log", l->rundir) <
		    0 ||
	    al_vm_path(root, sizeof root, err, "%s/root", l->rundir) < 0)
		return -1;
	if (mkdir(root, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", root), -1;
	al_autofd int logfd = open(logp,
				   O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				   0600);
	if (logfd < 0)
		return al_err_sys(err, AL_ESYS, errno, "create %s", logp), -1;
	al_autofd int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nullfd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open /dev/null"), -1;
	/* The template and probe boots run only our kernel and init. */
	al_autofd int outfd = -1;
	if (l->mode == AL_VM_COLD || l->mode == AL_VM_CLONE) {
		outfd = capped_log_pipe(logfd, err);
		if (outfd < 0)
			return -1;
	}
	al_autofd int serfd = -1, disk = -1, disk_ro = -1;
	if (l->mode == AL_VM_TEMPLATE || l->mode == AL_VM_PROBE) {
		serfd = open(serp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			     0600);
		if (serfd < 0)
			return al_err_sys(err, AL_ESYS, errno, "create %s",
					  serp),
			       -1;
	}
	if (l->mode != AL_VM_PROBE) {
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
		[JFD_TAP] = l->tap_fd > 0 ? l->tap_fd : nullfd,
	};
	al_vmjail_file files[2];
	size_t nfiles = 0;
	if (l->mode != AL_VM_CLONE) {
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
					  AL_VM_BOOT_TIMEOUT_MS / 1000);
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

int al_vm_entropy_hex(char hex[AL_VM_ENTROPY_HEX], al_err *err)
{
	uint8_t seed[(AL_VM_ENTROPY_HEX - 1) / 2];
	if (getrandom(seed, sizeof seed, 0) != (ssize_t)sizeof seed)
		return al_err_sys(err, AL_ESYS, errno, "getrandom");
	for (size_t i = 0; i < sizeof seed; i++)
		snprintf(hex + 2 * i, 3, "%02x", seed[i]);
	explicit_bzero(seed, sizeof seed);
	return 0;
}

int al_vm_machine_go(int fd, const char *hostname, const char *mac,
		     const char *net, al_err *err)
{
	char hex[AL_VM_ENTROPY_HEX];
	if (al_vm_entropy_hex(hex, err) < 0)
		return -1;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	char line[256];
	int n = snprintf(line, sizeof line, "GO %lld %s %s %s %s\n",
			 (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000,
			 hostname, hex, mac, net);
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
			al_err_set(err, AL_EINTERNAL, 0, "%s %s: %.200s", cmd,
				   s,
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

int al_vm_rundir_make(char *out, size_t len, al_err *err)
{
	if (al_vm_path(out, len, err, VM_RUNDIR_PREFIX "XXXXXX") < 0)
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
static void console_tail(const char *rundir, al_qmp *q, char *out, size_t len)
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

void al_vm_machine_log_tail(const al_vm_machine *m, char *out, size_t len)
{
	char p[128];
	snprintf(p, sizeof p, "%s/qemu.log", m->rundir);
	file_tail(p, out, len);
}

void al_vm_machine_explain(const al_vm_machine *m, int with_console,
			   al_err *err)
{
	if (m->rundir[0] == '\0')
		return;
	char tail[240];
	al_vm_machine_log_tail(m, tail, sizeof tail);
	/* Every QEMU says this of the unconnected NIC (nic_args): noise. */
	static const char nopeer[] =
		"qemu-system-x86_64: warning: nic net0 has no peer|";
	char *w = strstr(tail, nopeer);
	if (w != NULL)
		memmove(w, w + sizeof nopeer - 1,
			strlen(w + sizeof nopeer - 1) + 1);
	if (tail[0] != '\0' && strlen(err->msg) + 20 < sizeof err->msg) {
		size_t l = strlen(err->msg);
		snprintf(err->msg + l, sizeof err->msg - l, " (qemu: %s)",
			 tail);
	}
	console_tail(m->rundir, m->qmp, tail, sizeof tail);
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

/* ---- the machine's life ---- */

void al_vm_machine_init(al_vm_machine *m)
{
	*m = (al_vm_machine){.pidfd = -1, .uid = {.lock_fd = -1}};
}

int al_vm_machine_spawn(al_vm_machine *m, const al_vm_launch *l, int *qmp_fd,
			int *agent_fd, al_err *err)
{
	pid_t pid = spawn_qemu(l, &m->pidfd, qmp_fd, agent_fd, err);
	if (pid < 0)
		return -1;
	m->pid = pid;
	return 0;
}

/* Start QEMU for m and talk QMP to it; *agent_fd gets the agent port. */
static int launch(al_vm_machine *m, const al_vm_launch *l, int *agent_fd,
		  int64_t deadline_ms, al_err *err)
{
	int qmp_fd = -1;
	if (al_vm_machine_spawn(m, l, &qmp_fd, agent_fd, err) < 0)
		return -1;
	m->qmp = al_qmp_open_fd(qmp_fd, deadline_ms, err);
	if (m->qmp == NULL)
		return -1;
	if (l->mode == AL_VM_COLD)
		return al_qmp_run(m->qmp, "cont", NULL, deadline_ms, err);
	return 0;
}

int al_vm_machine_boot(al_vm_machine *m, const al_vm_launch *l, int *agent_fd,
		       al_err *err)
{
	int64_t deadline = al_now_ms() + AL_VM_BOOT_TIMEOUT_MS;
	if (launch(m, l, agent_fd, deadline, err) < 0)
		return -1;
	return read_marker(*agent_fd, m->pidfd, deadline, err);
}

/* The agent port is connected from QEMU's start, so before the load: the
 * snapshot was taken with a host connected, and a port whose host is
 * gone after the load would make the guest init start over. */
int al_vm_machine_restore(al_vm_machine *m, const al_vm_launch *l, int state_fd,
			  al_vm_before_load before_load, void *arg,
			  int *agent_fd, al_err *err)
{
	int64_t deadline = al_now_ms() + AL_VM_RESTORE_TIMEOUT_MS;
	int64_t t0 = al_now_ms();
	if (launch(m, l, agent_fd, deadline, err) < 0)
		return -1;
	if (before_load != NULL && before_load(m, arg, err) < 0)
		return -1;
	int64_t t1 = al_now_ms();
	if (migrate(m->qmp, "migrate-incoming", state_fd, deadline, err) < 0)
		return -1;
	int64_t t2 = al_now_ms();
	int rc = al_qmp_run(m->qmp, "cont", NULL, deadline, err);
	al_info("vm restore: QEMU up in %lld ms, state loaded in %lld ms, "
		"running after %lld ms",
		(long long)(t1 - t0), (long long)(t2 - t1),
		(long long)(al_now_ms() - t0));
	return rc;
}

int al_vm_machine_save(al_vm_machine *m, int state_fd, al_err *err)
{
	int64_t deadline = al_now_ms() + AL_VM_RESTORE_TIMEOUT_MS;
	if (al_qmp_run(m->qmp, "stop", NULL, deadline, err) < 0)
		return -1;
	return migrate(m->qmp, "migrate", state_fd, deadline, err);
}

/* The set QEMU knows the device state's descriptor by: 1 is the disk's,
 * 2 the console file's (build_argv). */
#define VM_FDSET_DEVSTATE 3
#define VM_FDSET_DEVSTATE_PATH "/dev/fdset/3"

/* Copy the device state QEMU wrote into the memfd mfd to fd: at most
 * AL_VM_DEVSTATE_MAX bytes, else nothing. */
static int copy_devstate(int mfd, int fd, uint64_t *bytes, al_err *err)
{
	/* Sealed first: a QEMU that kept a copy of it cannot change it
	 * between the check and the copy. */
	struct stat st;
	if (fcntl(mfd, F_ADD_SEALS,
		  F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_WRITE) < 0)
		return al_err_sys(err, AL_EPROTO, errno,
				  "sealing QEMU's device state");
	if (fstat(mfd, &st) < 0)
		return al_err_sys(err, AL_ESYS, errno, "fstat device state");
	if (st.st_size > AL_VM_DEVSTATE_MAX)
		return al_err_set(err, AL_EPROTO, 0,
				  "QEMU wrote %lld bytes of device state, over "
				  "the %d it may",
				  (long long)st.st_size, AL_VM_DEVSTATE_MAX);
	if (al_file_copy_sparse(mfd, fd, err) < 0) {
		al_err_wrap(err, "copying the device state");
		return -1;
	}
	*bytes = (uint64_t)st.st_size;
	return 0;
}

int al_vm_machine_save_devices(al_vm_machine *m, int fd, uint64_t *bytes,
			       al_err *err)
{
	*bytes = 0;
	al_autofd int mfd = memfd_create("airlock-devstate",
					 MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return al_err_sys(err, AL_ESYS, errno, "memfd_create");
	/* QEMU opens the set's file write-only (and truncates it): a
	 * write-only description of the same memfd. */
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", mfd);
	al_autofd int wr = open(self, O_WRONLY | O_CLOEXEC);
	if (wr < 0)
		return al_err_sys(err, AL_ESYS, errno, "reopen %s", self);
	int64_t deadline = al_now_ms() + AL_VM_RESTORE_TIMEOUT_MS;
	json_object *args = json_object_new_object();
	json_object_object_add(args, "fdset-id",
			       json_object_new_int(VM_FDSET_DEVSTATE));
	json_object *r = al_qmp_exec(m->qmp, "add-fd", args, wr, deadline, err);
	json_object_put(args);
	if (r == NULL)
		return -1;
	json_object_put(r);
	/* live=false: a stopped guest's disk stays active (with true, QEMU
	 * hands its images over as to a migration's destination). */
	args = json_object_new_object();
	json_object_object_add(args, "filename",
			       json_object_new_string(VM_FDSET_DEVSTATE_PATH));
	json_object_object_add(args, "live", json_object_new_boolean(0));
	int rc = al_qmp_run(m->qmp, "xen-save-devices-state", args, deadline,
			    err);
	json_object_put(args);
	/* The set holds QEMU's copy of the memfd until removed. */
	args = json_object_new_object();
	json_object_object_add(args, "fdset-id",
			       json_object_new_int(VM_FDSET_DEVSTATE));
	al_err rerr = {0};
	if (al_qmp_run(m->qmp, "remove-fd", args, deadline, &rerr) < 0 &&
	    rc == 0)
		rc = al_err_set(err, rerr.code, 0, "%s", rerr.msg);
	json_object_put(args);
	if (rc == 0)
		rc = copy_devstate(mfd, fd, bytes, err);
	return rc;
}

int al_vm_machine_running(al_vm_machine *m, al_err *err)
{
	json_object *r = al_qmp_exec(m->qmp, "query-status", NULL, -1,
				     al_now_ms() + AL_VM_QUIT_TIMEOUT_MS, err);
	if (r == NULL)
		return -1;
	json_object *v = NULL;
	int running = -1;
	if (json_object_object_get_ex(r, "running", &v) &&
	    json_object_is_type(v, json_type_boolean))
		running = json_object_get_boolean(v);
	json_object_put(r);
	if (running < 0)
		return al_err_set(err, AL_EPROTO, 0,
				  "QEMU's query-status has no \"running\"");
	return running;
}

int al_vm_machine_version(al_vm_machine *m, char *out, size_t len, al_err *err)
{
	json_object *r = al_qmp_exec(m->qmp, "query-version", NULL, -1,
				     al_now_ms() + AL_VM_QUIT_TIMEOUT_MS, err);
	if (r == NULL)
		return -1;
	json_object *q = NULL, *pkg = NULL, *v;
	int64_t n[3] = {-1, -1, -1};
	static const char *const keys[3] = {"major", "minor", "micro"};
	json_object_object_get_ex(r, "qemu", &q);
	json_object_object_get_ex(r, "package", &pkg);
	for (int i = 0; i < 3; i++)
		if (json_object_object_get_ex(q, keys[i], &v) &&
		    json_object_is_type(v, json_type_int))
			n[i] = json_object_get_int64(v);
	const char *p = json_object_is_type(pkg, json_type_string)
				? json_object_get_string(pkg)
				: "";
	int k = snprintf(out, len, "%lld.%lld.%lld %s", (long long)n[0],
			 (long long)n[1], (long long)n[2], p);
	json_object_put(r);
	if (n[0] < 0 || n[1] < 0 || n[2] < 0 || k < 0 || (size_t)k >= len)
		return al_err_set(err, AL_EPROTO, 0,
				  "QEMU's query-version answer is not one");
	/* One line, printable: it goes into a capture's meta. */
	for (char *c = out; *c != '\0'; c++)
		if (*c < ' ' || *c > '~')
			*c = '?';
	return 0;
}

int al_vm_machine_exited(const al_vm_machine *m, int ms)
{
	return wait_exit(m->pidfd, ms);
}

void al_vm_machine_quit(al_vm_machine *m)
{
	if (m->qmp == NULL || wait_exit(m->pidfd, 0))
		return;
	al_err e;
	if (al_qmp_run(m->qmp, "quit", NULL,
		       al_now_ms() + AL_VM_QUIT_TIMEOUT_MS, &e) == 0)
		(void)wait_exit(m->pidfd, AL_VM_QUIT_TIMEOUT_MS);
}

void al_vm_machine_kill(al_vm_machine *m, int *agent_fd)
{
	al_qmp_close(m->qmp);
	m->qmp = NULL;
	if (m->pidfd >= 0 || m->pid > 0)
		kill_reap(m->pid, m->pidfd);
	if (m->pidfd >= 0)
		close(m->pidfd);
	m->pidfd = -1;
	m->pid = 0;
	if (*agent_fd >= 0)
		close(*agent_fd);
	*agent_fd = -1;
}

void al_vm_machine_release(al_vm_machine *m)
{
	if (m == NULL)
		return;
	int no_agent = -1;
	al_vm_machine_kill(m, &no_agent);
	al_vm_rundir_remove(m->rundir);
	al_vmjail_uid_drop(&m->uid);
}
