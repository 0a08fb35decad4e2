/* airlock-init: PID 1 of a vm sandbox, run from the initramfs.
 *
 * Boot: mount /dev, /proc, /sys; load the virtio modules listed in
 * /lib/airlock/modules.list (dependencies first); mount the sandbox's
 * disk (/dev/vda, ext4) and make it the root; find the virtio-serial port
 * named "airlock".
 *
 * Then, for every host connection on that port:
 *
 *   guest -> host   "AIRLOCK-INIT 1\n"   (INIT_MARKER; the write blocks in
 *                                         the kernel until a host is
 *                                         connected)
 *   host -> guest   "GO <unix_ms> <hostname> <64 hex digits> <mac> <net>\n"
 *
 * On GO, init sets the clock, the hostname, reseeds the kernel RNG with
 * the host's 32 bytes and gives the NIC (the first virtio-net interface)
 * the sandbox's MAC ("02:xx:xx:xx:xx:xx", lowercase; core/vm/net.h) and
 * its network (net "a.b.c.d/len,gateway": address, link up, default
 * route via the gateway, /etc/resolv.conf naming it; "none": the NIC
 * stays down), then runs airlock-agent with the port as fd 3; the agent
 * sends HELLO. When the agent ends (the
 * host closed the channel) init opens the port again and waits for the
 * next host.
 *
 * A template VM is snapshotted while init waits for GO (the host has read
 * the marker), so every restored clone gets its own clock, hostname,
 * entropy and MAC before anything in it runs. The clone's host therefore
 * skips the marker and sends GO straight away.
 *
 * Kernel command line: airlock.agent=PATH (default /sbin/airlock-agent);
 * airlock.probe=1 only loads the modules, prints "AIRLOCK-PROBE-OK" on the
 * console and powers off (the host's KVM probe, core/vm/probe.c).
 * PID 1 must not exit: a fatal error powers the VM off, which ends QEMU,
 * and the host reports the sandbox as failed. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <net/if.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../nic.h"
#include "base/hex.h"

#define INIT_MARKER "AIRLOCK-INIT 1\n"
#define INIT_PROBE_OK "AIRLOCK-PROBE-OK"
#define PORT_NAME "airlock"
#define MOD_DIR "/lib/airlock"
#define NEWROOT "/root"
#define GO_MAX 256
#define WAIT_DEV_MS 10000

static void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fatal(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2)));

static void logmsg(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof buf - 2)
		n = sizeof buf - 2;
	buf[n++] = '\n';
	/* The console is the serial port the host logs; a failed write has
	 * nowhere else to go. */
	(void)!write(2, "airlock-init: ", 14);
	(void)!write(2, buf, (size_t)n);
}

static void fatal(const char *fmt, ...)
{
	char buf[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	logmsg("fatal: %s", buf);
	sync();
	reboot(RB_POWER_OFF);
	/* Power-off failed: exiting PID 1 panics, and panic=-1 with QEMU's
	 * -no-reboot ends the VM as well. */
	_exit(1);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void mount_or_die(const char *src, const char *dst, const char *type,
			 unsigned long flags, const char *data)
{
	(void)mkdir(dst, 0755);
	if (mount(src, dst, type, flags, data) < 0 && errno != EBUSY)
		fatal("mount %s on %s: %s", type, dst, strerror(errno));
}

static void load_modules(void)
{
	FILE *f = fopen(MOD_DIR "/modules.list", "re");
	if (f == NULL)
		fatal("open " MOD_DIR "/modules.list: %s", strerror(errno));
	char line[128];
	while (fgets(line, sizeof line, f) != NULL) {
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '\0' || strchr(line, '/') != NULL)
			continue;
		char path[256];
		snprintf(path, sizeof path, MOD_DIR "/%s", line);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			fatal("open %s: %s", path, strerror(errno));
		if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST)
			fatal("load %s: %s", line, strerror(errno));
		close(fd);
	}
	fclose(f);
}

/* Devices appear asynchronously after their driver loads. */
static void wait_path(const char *path)
{
	for (int waited = 0; access(path, F_OK) < 0; waited += 2) {
		if (waited >= WAIT_DEV_MS)
			fatal("%s did not appear", path);
		sleep_ms(2);
	}
}

static void mount_root(void)
{
	wait_path("/dev/vda");
	(void)mkdir(NEWROOT, 0755);
	if (mount("/dev/vda", NEWROOT, "ext4", MS_NOATIME, NULL) < 0)
		fatal("mount /dev/vda: %s", strerror(errno));
	static const char *const moves[] = {"/dev", "/proc", "/sys"};
	for (size_t i = 0; i < sizeof moves / sizeof *moves; i++) {
		char dst[64];
		snprintf(dst, sizeof dst, NEWROOT "%s", moves[i]);
		(void)mkdir(dst, 0755);
		if (mount(moves[i], dst, NULL, MS_MOVE, NULL) < 0)
			fatal("move %s: %s", moves[i], strerror(errno));
	}
	if (chdir(NEWROOT) < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 ||
	    chroot(".") < 0 || chdir("/") < 0)
		fatal("switch to the disk root: %s", strerror(errno));
	/* Every tmpfs within the guest's RAM, so that filled they leave
	 * the guest's processes room, where its OOM killer finds the
	 * offender: a quarter each for /tmp and /dev/shm, a little for
	 * /dev (devtmpfs, half the RAM by default), inodes ~1 KiB each. */
	mount_or_die("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
		     "mode=1777,size=25%,nr_inodes=16384");
	(void)mkdir("/dev/shm", 01777);
	mount_or_die("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
		     "mode=1777,size=25%,nr_inodes=4096");
	if (mount(NULL, "/dev", NULL, MS_REMOUNT | MS_NOSUID,
		  "size=8m,nr_inodes=4096") < 0)
		logmsg("sizing /dev: %s", strerror(errno));
	mount_or_die("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		     "mode=0620,ptmxmode=0666");
}

/* /sys/class/virtio-ports/vportNpM/name holds the name QEMU gave the
 * port; the device node is /dev/vportNpM (no udev here). */
static void find_port(char *out, size_t outlen)
{
	for (int waited = 0;; waited += 2) {
		DIR *d = opendir("/sys/class/virtio-ports");
		if (d != NULL) {
			struct dirent *e;
			while ((e = readdir(d)) != NULL) {
				if (e->d_name[0] == '.' ||
				    strlen(e->d_name) > 32)
					continue;
				char p[96], name[64] = "";
				snprintf(p, sizeof p,
					 "/sys/class/virtio-ports/%s/name",
					 e->d_name);
				FILE *f = fopen(p, "re");
				if (f == NULL)
					continue;
				if (fgets(name, sizeof name, f) == NULL)
					name[0] = '\0';
				fclose(f);
				name[strcspn(name, "\n")] = '\0';
				if (strcmp(name, PORT_NAME) == 0) {
					snprintf(out, outlen, "/dev/%s",
						 e->d_name);
					closedir(d);
					wait_path(out);
					return;
				}
			}
			closedir(d);
		}
		if (waited >= WAIT_DEV_MS)
			fatal("no virtio-serial port named " PORT_NAME);
		sleep_ms(2);
	}
}

/* airlock.agent=PATH and airlock.probe=1 from the kernel command line. */
static void read_cmdline(char *out, size_t outlen, bool *probe)
{
	snprintf(out, outlen, "/sbin/airlock-agent");
	*probe = false;
	char buf[2048];
	int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	for (char *tok = strtok(buf, " \n"); tok != NULL;
	     tok = strtok(NULL, " \n")) {
		if (strncmp(tok, "airlock.agent=", 14) == 0 && tok[14] == '/' &&
		    strlen(tok + 14) < outlen)
			snprintf(out, outlen, "%s", tok + 14);
		else if (strcmp(tok, "airlock.probe=1") == 0)
			*probe = true;
	}
}

static bool write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* One line up to '\n'; false on EOF (host gone), error or overlong. */
static bool read_line(int fd, char *buf, size_t len)
{
	size_t have = 0;
	while (have + 1 < len) {
		ssize_t r = read(fd, buf + have, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		if (buf[have] == '\n') {
			buf[have] = '\0';
			return true;
		}
		have++;
	}
	return false;
}

typedef struct go_msg {
	int64_t unix_ms;
	char hostname[64];
	uint8_t seed[32];
	uint8_t mac[6];
	al_nic_net net;
} go_msg;

/* "GO <unix_ms> <hostname> <64 lowercase hex> <mac> <net>"; strict, no
 * extras. */
static bool parse_go(const char *s, go_msg *g)
{
	if (strncmp(s, "GO ", 3) != 0)
		return false;
	s += 3;
	int64_t ms = 0;
	int digits = 0;
	while (*s >= '0' && *s <= '9') {
		if (++digits > 15)
			return false;
		ms = ms * 10 + (*s++ - '0');
	}
	if (digits == 0 || *s++ != ' ')
		return false;
	g->unix_ms = ms;
	size_t hl = 0;
	while (*s != ' ' && *s != '\0') {
		char c = *s++;
		if (!(islower((unsigned char)c) || isdigit((unsigned char)c) ||
		      c == '-') ||
		    hl + 1 >= sizeof g->hostname)
			return false;
		g->hostname[hl++] = c;
	}
	g->hostname[hl] = '\0';
	if (hl == 0 || *s++ != ' ')
		return false;
	if (al_hex_decode_lower(s, sizeof g->seed, g->seed) < 0)
		return false;
	s += 2 * sizeof g->seed;
	if (*s++ != ' ')
		return false;
	char mac[18];
	if (strlen(s) < 18 || s[17] != ' ')
		return false;
	memcpy(mac, s, 17);
	mac[17] = '\0';
	return agent_nic_mac_parse(mac, g->mac) &&
	       agent_nic_net_parse(s + 18, &g->net);
}

/* The NIC's name: the virtio-net interface with the lowest ifindex (the
 * machine has one; without udev the kernel calls it eth0). Found at boot,
 * before the template snapshot, so a clone never looks again. */
static char nic_name[IF_NAMESIZE];

static void find_nic(void)
{
	for (int waited = 0; !agent_nic_find(nic_name); waited += 2) {
		if (waited >= WAIT_DEV_MS)
			fatal("no virtio-net interface");
		sleep_ms(2);
	}
}

/* Give the NIC its MAC (init never brings it up) and read it back: a
 * clone must never keep the template's address. */
static void set_mac(const uint8_t mac[6])
{
	const char *step;
	if (agent_nic_set_mac(nic_name, mac, &step) < 0)
		fatal("%s of %s: %s", step, nic_name, strerror(errno));
}

static void apply_go(const go_msg *g)
{
	struct timespec ts = {.tv_sec = g->unix_ms / 1000,
			      .tv_nsec = (g->unix_ms % 1000) * 1000000L};
	if (clock_settime(CLOCK_REALTIME, &ts) < 0)
		logmsg("clock_settime: %s", strerror(errno));
	if (sethostname(g->hostname, strlen(g->hostname)) < 0)
		logmsg("sethostname: %s", strerror(errno));
	struct {
		int entropy_count;
		int buf_size;
		uint8_t buf[32];
	} req = {.entropy_count = 256, .buf_size = 32};
	memcpy(req.buf, g->seed, sizeof req.buf);
	/* Clones of one snapshot share the RNG state: mix the host's bytes
	 * in and force a reseed so no two clones draw the same stream. */
	int fd = open("/dev/urandom", O_RDWR | O_CLOEXEC);
	if (fd < 0 || ioctl(fd, RNDADDENTROPY, &req) < 0 ||
	    ioctl(fd, RNDRESEEDCRNG) < 0)
		fatal("reseeding the RNG: %s", strerror(errno));
	close(fd);
	explicit_bzero(&req, sizeof req);
	set_mac(g->mac);
	const char *step;
	if (agent_nic_net_apply(nic_name, &g->net, &step) < 0)
		fatal("%s of %s: %s", step, nic_name, strerror(errno));
}

static pid_t start_agent(const char *agent, int chan)
{
	pid_t pid = fork();
	if (pid < 0) {
		logmsg("fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		/* Ignored dispositions survive exec: give the agent and
		 * everything it runs the defaults back. */
		for (int s = 1; s < NSIG; s++)
			signal(s, SIG_DFL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (chan != 3 && dup2(chan, 3) < 0)
			_exit(111);
		if (chan == 3)
			(void)fcntl(3, F_SETFD, 0);
		setsid();
		/* A guest out of memory loses the process that used it up,
		 * not its agent; the agent puts what it runs back to 0. */
		int oom = open("/proc/self/oom_score_adj",
			       O_WRONLY | O_CLOEXEC);
		if (oom < 0 || write(oom, "-1000", 5) != 5)
			logmsg("protecting the agent from the OOM killer: %s",
			       strerror(errno));
		if (oom >= 0)
			close(oom);
		char *argv[] = {(char *)agent, "--fd", "3", NULL};
		char *envp[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:"
				"/usr/bin:/sbin:/bin",
				"HOME=/root", "TERM=dumb", NULL};
		execve(agent, argv, envp);
		logmsg("exec %s: %s", agent, strerror(errno));
		_exit(111);
	}
	return pid;
}

/* Reap everything; return when `agent` has ended. */
static void wait_agent(pid_t agent)
{
	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, 0);
		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0)
			return;
		if (p == agent) {
			if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
				logmsg("agent exited with %d", WEXITSTATUS(st));
			else if (WIFSIGNALED(st))
				logmsg("agent killed by signal %d",
				       WTERMSIG(st));
			return;
		}
	}
}

/* Read the agent once so its pages are in the guest's page cache: a
 * template is snapshotted with them, and every clone then starts the
 * agent without going to its disk. */
static void warm(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char buf[16384];
	while (read(fd, buf, sizeof buf) > 0)
		;
	close(fd);
}

static void serve(const char *port, const char *agent)
{
	for (;;) {
		int fd = open(port, O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (fd < 0)
			fatal("open %s: %s", port, strerror(errno));
		/* Blocks until a host is connected to the chardev. */
		if (!write_all(fd, INIT_MARKER, sizeof INIT_MARKER - 1)) {
			close(fd);
			sleep_ms(10);
			continue;
		}
		char line[GO_MAX];
		go_msg g;
		if (!read_line(fd, line, sizeof line)) {
			/* Host went away before GO: wait for the next. */
			close(fd);
			sleep_ms(10);
			continue;
		}
		if (!parse_go(line, &g)) {
			logmsg("bad GO line from the host; waiting again");
			close(fd);
			sleep_ms(10);
			continue;
		}
		apply_go(&g);
		pid_t pid = start_agent(agent, fd);
		close(fd);
		if (pid > 0)
			wait_agent(pid);
		else
			sleep_ms(100);
	}
}

int main(void)
{
	if (getpid() != 1)
		fatal("must run as PID 1");
	mount_or_die("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
	int con = open("/dev/console", O_RDWR | O_NOCTTY);
	if (con >= 0) {
		dup2(con, 0);
		dup2(con, 1);
		dup2(con, 2);
		if (con > 2)
			close(con);
	}
	mount_or_die("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		     NULL);
	mount_or_die("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		     NULL);
	char agent[256];
	bool probe;
	read_cmdline(agent, sizeof agent, &probe);
	load_modules();
	if (probe) {
		/* The host's accelerator probe: a kernel that got here with
		 * its modules loaded runs guests well enough. */
		logmsg(INIT_PROBE_OK);
		sync();
		reboot(RB_POWER_OFF);
		_exit(0);
	}
	mount_root();
	if (sethostname("airlock", 7) < 0)
		logmsg("sethostname: %s", strerror(errno));
	find_nic();
	/* Loopback, as every machine has it (mode "none" has only it). */
	const char *step;
	if (agent_nic_up("lo", &step) < 0)
		logmsg("%s of lo: %s", step, strerror(errno));
	char port[64];
	find_port(port, sizeof port);
	if (access(agent, X_OK) < 0)
		fatal("agent %s: %s", agent, strerror(errno));
	/* Signals to PID 1 from inside the guest must not stop it. */
	for (int s = 1; s < NSIG; s++)
		if (s != SIGCHLD && s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_IGN);
	warm(agent);
	logmsg("ready, agent %s on %s, NIC %s", agent, port, nic_name);
	serve(port, agent);
	return 0;
}
