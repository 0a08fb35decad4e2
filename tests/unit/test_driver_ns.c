/* driver_ns: start real jails (root only) from a plain busybox rootfs
 * whose "agent" is a shell script: it says "@@HELLO" on fd 3, then runs
 * one command per line read from fd 3 and answers with the output and
 * "@@EXIT <rc>". Without root, busybox-static or cgroups every test is
 * reported as skipped. */
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "shrun.h"

#include "driver.h"
#include "host/cgroup.h"
#include "host/uidrange.h"

static char tmpdir[] = "/tmp/al-jail-XXXXXX";
static char rootfs[256];
static int made_tmp;
static int ready;
static const char *why_skip = "not set up";

static const char agent_sh[] =
	"#!/bin/sh\n"
	"echo @@HELLO >&3\n"
	"while IFS= read -r line <&3; do\n"
	"\tout=$(sh -c \"$line\" 2>&1 </dev/null)\n"
	"\trc=$?\n"
	"\tprintf '%s\\n@@EXIT %d\\n' \"$out\" \"$rc\" >&3\n"
	"done\n";

static int group_setup(void **state)
{
	(void)state;
	al_err err = {0};
	if (geteuid() != 0) {
		why_skip = "needs root";
		return 0;
	}
	if (access("/bin/busybox", X_OK) < 0) {
		why_skip = "no /bin/busybox (busybox-static)";
		return 0;
	}
	if (al_cgroup_version(&err) < 0) {
		why_skip = "no usable cgroups";
		return 0;
	}
	if (mkdtemp(tmpdir) == NULL)
		return -1;
	made_tmp = 1;
	snprintf(rootfs, sizeof rootfs, "%s/root", tmpdir);
	if (run("set -e; r=%s; mkdir -p $r/bin $r/proc $r/dev $r/sys $r/tmp "
		"$r/etc $r/mnt; cp /bin/busybox $r/bin/busybox; "
		"chroot $r /bin/busybox --install -s /bin; "
		"echo 'root:x:0:0::/root:/bin/sh' > $r/etc/passwd; "
		"echo 'nobody:x:65534:65534::/:/bin/sh' >> $r/etc/passwd; "
		"printf 'root:x:0:\\nnogroup:x:65534:\\n' > $r/etc/group",
		rootfs) != 0)
		return -1;
	char p[512];
	snprintf(p, sizeof p, "%s/agent.sh", rootfs);
	FILE *f = fopen(p, "w");
	if (f == NULL)
		return -1;
	fputs(agent_sh, f);
	fclose(f);
	chmod(p, 0755);
	ready = 1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	if (made_tmp)
		run("rm -rf %s", tmpdir);
	return 0;
}

#define NEED_JAIL()                                                            \
	do {                                                                   \
		if (!ready) {                                                  \
			print_message("skip: %s\n", why_skip);                 \
			skip();                                                \
		}                                                              \
	} while (0)

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Read from fd until buf contains marker (or timeout / EOF); returns the
 * offset just past the marker line, -1 on timeout or EOF. */
static int read_until(int fd, char *buf, size_t len, const char *marker,
		      int timeout_ms)
{
	size_t off = 0;
	double end = now_ms() + timeout_ms;
	buf[0] = '\0';
	for (;;) {
		char *m = strstr(buf, marker);
		if (m != NULL) {
			char *nl = strchr(m + strlen(marker), '\n');
			if (nl != NULL)
				return (int)(nl + 1 - buf);
		}
		int left = (int)(end - now_ms());
		if (left <= 0 || off + 1 >= len)
			return -1;
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (poll(&pfd, 1, left) <= 0)
			return -1;
		ssize_t r = read(fd, buf + off, len - 1 - off);
		if (r <= 0)
			return -1;
		off += (size_t)r;
		buf[off] = '\0';
	}
}

/* Run cmd in the jail; out gets its output (trailing newline removed).
 * Returns the exit code, -1 if the jail did not answer in time. */
static int jail_sh(al_driver_handle *h, const char *cmd, char *out,
		   size_t outlen, int timeout_ms)
{
	char line[1024], buf[16384];
	int n = snprintf(line, sizeof line, "%s\n", cmd);
	assert_true(n > 0 && (size_t)n < sizeof line);
	assert_int_equal(write(h->agent_fd, line, (size_t)n), n);
	if (read_until(h->agent_fd, buf, sizeof buf, "@@EXIT ", timeout_ms) < 0)
		return -1;
	char *m = strstr(buf, "\n@@EXIT ");
	assert_non_null(m);
	int rc = atoi(m + 8);
	*m = '\0';
	size_t bl = strlen(buf);
	if (bl >= outlen)
		bl = outlen - 1;
	memcpy(out, buf, bl);
	out[bl] = '\0';
	return rc;
}

/* Jails a failed assertion left running, stopped by the teardown. */
static al_driver_handle *live[8];

static int test_teardown(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof live / sizeof live[0]; i++) {
		al_err err = {0};
		if (live[i] != NULL)
			al_driver_ns.stop(live[i], &err);
		live[i] = NULL;
	}
	return 0;
}

static void start_jail(al_driver_handle *h, const char *id, uint64_t mem,
		       uint32_t pids)
{
	al_err err = {0};
	al_sandbox_spec spec = {
		.id = id,
		.rootfs = rootfs,
		.hostname = id,
		.agent = "/agent.sh",
		.limits = {.memory_bytes = mem,
			   .pids_max = pids,
			   .cpu_shares = 512,
			   .cpu_millis = 500},
	};
	int rc = al_driver_ns.start(&spec, h, &err);
	if (rc < 0)
		print_message("start: %s\n", err.msg);
	assert_int_equal(rc, 0);
	for (size_t i = 0; i < sizeof live / sizeof live[0]; i++) {
		if (live[i] == NULL || live[i] == h) {
			live[i] = h;
			break;
		}
	}
	assert_true(h->init_pid > 0);
	assert_true(h->agent_fd > 2);
	char buf[256];
	assert_true(read_until(h->agent_fd, buf, sizeof buf, "@@HELLO", 5000) >
		    0);
}

static void stop_jail(al_driver_handle *h)
{
	al_err err = {0};
	int rc = al_driver_ns.stop(h, &err);
	for (size_t i = 0; rc == 0 && i < sizeof live / sizeof live[0]; i++) {
		if (live[i] == h)
			live[i] = NULL;
	}
	if (rc < 0)
		print_message("stop: %s\n", err.msg);
	assert_int_equal(rc, 0);
}

static void test_find(void **state)
{
	(void)state;
	al_err err = {0};
	assert_ptr_equal(al_driver_find("ns", &err), &al_driver_ns);
	assert_null(al_driver_find("xen", &err));
	assert_int_equal(err.code, AL_EINVAL);
}

static void test_namespaces(void **state)
{
	(void)state;
	NEED_JAIL();
	al_driver_handle h;
	char out[8192], mpath[512];
	snprintf(mpath, sizeof mpath, "%s/al-marker", tmpdir);
	int marker = open(mpath, O_RDWR | O_CREAT, 0600);
	assert_true(marker >= 0);
	start_jail(&h, "t-ns", 128ull << 20, 64);

	assert_int_equal(jail_sh(&h, "hostname", out, sizeof out, 5000), 0);
	assert_string_equal(out, "t-ns");
	/* Only loopback, and it is up. */
	assert_int_equal(jail_sh(&h,
				 "tail -n +3 /proc/net/dev | cut -d: -f1 "
				 "| tr -d ' '",
				 out, sizeof out, 5000),
			 0);
	assert_string_equal(out, "lo");
	/* Loopback is up, and a port below 1024 binds: root inside holds
	 * no capability over the (host-owned) network namespace, so the
	 * jail opens low ports to every uid of the sandbox. */
	int up = jail_sh(&h,
			 "(nc -l -p 80 > /tmp/got &); i=0; "
			 "while [ $i -lt 50 ] && "
			 "! echo up | nc -w1 127.0.0.1 80 2>/dev/null; do "
			 "sleep 0.1; i=$((i+1)); done; i=0; "
			 "while [ $i -lt 50 ] && [ ! -s /tmp/got ]; do "
			 "sleep 0.1; i=$((i+1)); done; cat /tmp/got",
			 out, sizeof out, 5000);
	if (up != 0)
		print_message("loopback: %s\n", out);
	assert_int_equal(up, 0);
	assert_string_equal(out, "up");
	/* ... but not raw sockets (busybox ping only has those). */
	assert_int_not_equal(jail_sh(&h, "ping -c1 -W1 127.0.0.1", out,
				     sizeof out, 5000),
			     0);
	assert_non_null(strstr(out, "denied"));
	/* Host processes are invisible: only the agent, the shell running
	 * this and its children. */
	assert_int_equal(jail_sh(&h, "ls -d /proc/[0-9]* | wc -l", out,
				 sizeof out, 5000),
			 0);
	assert_true(atoi(out) <= 5);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "test -e /proc/%d/root && echo seen",
		 (int)getpid());
	jail_sh(&h, cmd, out, sizeof out, 5000);
	if (getpid() > 10)
		assert_string_equal(out, "");
	/* The agent is pid 1, and the root is the rootfs (it is at /). */
	assert_int_equal(jail_sh(&h, "cat /proc/1/cmdline | tr '\\0' ' '", out,
				 sizeof out, 5000),
			 0);
	assert_non_null(strstr(out, "/agent.sh --fd 3"));
	/* stdio is /dev/null, fd 3 the agent socket, and no fd of the
	 * caller's (marker, opened without O_CLOEXEC) got in. */
	assert_int_equal(jail_sh(&h,
				 "for f in 0 1 2 3; do readlink /proc/1/fd/$f; "
				 "done | tr '\\n' ' '",
				 out, sizeof out, 5000),
			 0);
	assert_non_null(strstr(out, "/dev/null /dev/null /dev/null socket:"));
	assert_int_equal(jail_sh(&h,
				 "for f in /proc/1/fd/*; do readlink $f; "
				 "done | grep -c al-marker",
				 out, sizeof out, 5000),
			 1);
	assert_string_equal(out, "0");
	stop_jail(&h);
	close(marker);
}

static void test_privileges(void **state)
{
	(void)state;
	NEED_JAIL();
	al_driver_handle h;
	char out[8192];
	start_jail(&h, "t-priv", 128ull << 20, 64);

	/* Docker's default capability set, nothing inheritable. */
	assert_int_equal(jail_sh(&h,
				 "grep -E '^(CapEff|CapBnd|CapInh|"
				 "NoNewPrivs|Seccomp):' /proc/self/status "
				 "| tr -s '\\t ' ' '",
				 out, sizeof out, 5000),
			 0);
	assert_non_null(strstr(out, "CapInh: 0000000000000000"));
	assert_non_null(strstr(out, "CapEff: 00000000a80425fb"));
	assert_non_null(strstr(out, "CapBnd: 00000000a80425fb"));
	assert_non_null(strstr(out, "NoNewPrivs: 1"));
	assert_non_null(strstr(out, "Seccomp: 2"));

	/* mount is refused (seccomp EPERM, and no CAP_SYS_ADMIN). */
	assert_int_not_equal(jail_sh(&h, "mount -t tmpfs none /mnt", out,
				     sizeof out, 5000),
			     0);
	assert_int_equal(jail_sh(&h, "grep -c ' /mnt ' /proc/mounts", out,
				 sizeof out, 5000),
			 1); /* grep: no match */
	/* unshare is refused, also through clone flags. */
	assert_int_not_equal(jail_sh(&h, "unshare -n true", out, sizeof out,
				     5000),
			     0);
	assert_non_null(strstr(out, "ermitted"));
	assert_int_not_equal(jail_sh(&h, "unshare -m true", out, sizeof out,
				     5000),
			     0);
	/* /proc/sys is read-only: writing the current value back fails
	 * (and would be harmless if it did not). */
	assert_int_not_equal(jail_sh(&h,
				     "cat /proc/sys/kernel/core_pattern "
				     "> /proc/sys/kernel/core_pattern",
				     out, sizeof out, 5000),
			     0);
	assert_non_null(strstr(out, "Read-only"));
	/* Host-wide kernel state is masked (kcore too, where it exists). */
	assert_int_equal(jail_sh(&h,
				 "cat /proc/keys /proc/timer_list "
				 "/proc/kallsyms | wc -c; test ! -e "
				 "/proc/kcore || wc -c < /proc/kcore",
				 out, sizeof out, 5000),
			 0);
	assert_string_equal(out, "0");
	/* Device nodes work through the bind mounts only: making one is
	 * refused in a user namespace (and would be inert: nodev). */
	assert_int_equal(jail_sh(&h,
				 "echo x > /dev/null && head -c 4 "
				 "/dev/urandom | wc -c",
				 out, sizeof out, 5000),
			 0);
	assert_string_equal(out, "4");
	assert_int_not_equal(jail_sh(&h, "mknod /tmp/mem c 1 1", out,
				     sizeof out, 5000),
			     0);
	assert_non_null(strstr(out, "ermitted"));
	assert_int_not_equal(jail_sh(&h, "test -e /tmp/mem", out, sizeof out,
				     5000),
			     0);
	/* No host mount survived the pivot. */
	assert_int_equal(jail_sh(&h,
				 "cut -d' ' -f2 /proc/mounts | sort -u | "
				 "tr '\\n' ' '",
				 out, sizeof out, 5000),
			 0);
	print_message("mounts: %s\n", out);
	assert_null(strstr(out, "/work"));
	assert_null(strstr(out, "/sys/fs"));
	stop_jail(&h);
}

static int read_int_file(const char *path, long long *v)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return -1;
	int ok = fscanf(f, "%lld", v) == 1;
	fclose(f);
	return ok ? 0 : -1;
}

/* The leaf's CFS quota (µs per 100 ms period) is quota_us. */
static void expect_cpu_quota(const char *name, int ver, long long quota_us)
{
	al_err err = {0};
	char path[512], buf[64];
	assert_int_equal(al_cgroup_file(name,
					ver == 2 ? "cpu.max"
						 : "cpu.cfs_quota_us",
					path, sizeof path, &err),
			 0);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof buf, f));
	fclose(f);
	char want[64];
	if (ver == 2)
		snprintf(want, sizeof want, "%lld 100000\n", quota_us);
	else
		snprintf(want, sizeof want, "%lld\n", quota_us);
	assert_string_equal(buf, want);
	if (ver == 1) {
		long long period = 0;
		assert_int_equal(al_cgroup_file(name, "cpu.cfs_period_us", path,
						sizeof path, &err),
				 0);
		assert_int_equal(read_int_file(path, &period), 0);
		assert_int_equal(period, AL_CGROUP_CPU_PERIOD_US);
	}
}

static void test_cpu_quota_values(void **state)
{
	(void)state;
	assert_int_equal(al_cgroup_cpu_quota_us(0), -1);
	assert_int_equal(al_cgroup_cpu_quota_us(10), 1000);
	assert_int_equal(al_cgroup_cpu_quota_us(500), 50000);
	assert_int_equal(al_cgroup_cpu_quota_us(1000), 100000);
	assert_int_equal(al_cgroup_cpu_quota_us(2500), 250000);
}

static void test_limits(void **state)
{
	(void)state;
	NEED_JAIL();
	al_err err = {0};
	al_driver_handle a, b;
	char out[8192], path[512];
	start_jail(&a, "t-lim-a", 64ull << 20, 32);
	start_jail(&b, "t-lim-b", 64ull << 20, 32);
	assert_string_equal(a.cgroup, "airlock/t-lim-a");

	/* The memory limit is in the cgroup. */
	int ver = al_cgroup_version(&err);
	assert_int_equal(al_cgroup_file("t-lim-a",
					ver == 2 ? "memory.max"
						 : "memory.limit_in_bytes",
					path, sizeof path, &err),
			 0);
	long long v = 0;
	assert_int_equal(read_int_file(path, &v), 0);
	assert_int_equal(v, 64ll << 20);
	assert_int_equal(al_cgroup_file("t-lim-a", "pids.max", path,
					sizeof path, &err),
			 0);
	assert_int_equal(read_int_file(path, &v), 0);
	assert_int_equal(v, 32);
	/* The CPU cap: 0.5 CPU is 50 ms of each 100 ms period. */
	expect_cpu_quota("t-lim-a", ver, 50000);
	/* A claim (adopt) rewrites it to the claiming sandbox's cap. */
	al_sandbox_spec claim = {.id = "t-lim-a",
				 .rootfs = rootfs,
				 .hostname = "t-lim-a",
				 .agent = "/agent.sh",
				 .limits = {.memory_bytes = 64ull << 20,
					    .pids_max = 32,
					    .cpu_shares = 512,
					    .cpu_millis = 1250}};
	assert_int_equal(al_driver_ns.adopt(&a, &claim, &err), 0);
	expect_cpu_quota("t-lim-a", ver, 125000);
	/* The init moved itself into every controller's leaf (the host
	 * sees the full path, whatever its cgroup namespace shows it). */
	snprintf(path, sizeof path, "/proc/%d/cgroup", (int)a.init_pid);
	FILE *cf = fopen(path, "r");
	assert_non_null(cf);
	char line[512];
	int joined = 0;
	while (fgets(line, sizeof line, cf) != NULL)
		joined += strstr(line, ":/airlock/t-lim-a\n") != NULL;
	fclose(cf);
	assert_int_equal(joined, ver == 2 ? 1 : 4);

	/* Fork bomb in a: capped at pids.max, and b is unaffected. */
	jail_sh(&a,
		"i=0; while [ $i -lt 200 ]; do "
		"sleep 30 >/dev/null 2>&1 & i=$((i+1)); "
		"done 2>/dev/null; true",
		out, sizeof out, 10000);
	assert_int_equal(al_cgroup_file("t-lim-a", "pids.current", path,
					sizeof path, &err),
			 0);
	assert_int_equal(read_int_file(path, &v), 0);
	print_message("fork bomb: pids.current=%lld (max 32)\n", v);
	assert_true(v <= 32);
	assert_true(v >= 20); /* it really tried */
	assert_int_equal(jail_sh(&b,
				 "i=0; while [ $i -lt 20 ]; do sleep 1 & "
				 "i=$((i+1)); done; wait; echo $i",
				 out, sizeof out, 10000),
			 0);
	assert_string_equal(out, "20");

	/* Memory hog in b: killed by b's own OOM; b keeps answering, and a
	 * (still full of sleeps) is untouched. */
	stop_jail(&a);
	start_jail(&a, "t-lim-a", 64ull << 20, 32);
	int rc = jail_sh(&b, "awk 'BEGIN { s = \"x\"; while (1) s = s s }'",
			 out, sizeof out, 30000);
	print_message("memory hog: exit %d\n", rc);
	assert_int_equal(rc, 137); /* SIGKILL from the cgroup's OOM killer */
	assert_int_equal(jail_sh(&b, "echo alive", out, sizeof out, 5000), 0);
	assert_string_equal(out, "alive");
	assert_int_equal(jail_sh(&a, "echo alive", out, sizeof out, 5000), 0);
	stop_jail(&a);
	stop_jail(&b);
}

/* Does this process (host root) hold CAP_SYS_RESOURCE? Without it (a
 * container) nothing can lower an oom_score_adj. */
static int have_sys_resource(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long eff = 0;
	while (f != NULL && fgets(line, sizeof line, f) != NULL)
		sscanf(line, "CapEff: %llx", &eff);
	if (f != NULL)
		fclose(f);
	return (eff >> 24) & 1; /* CAP_SYS_RESOURCE */
}

/* /dev/shm and the SysV limits are shares of the memory limit (core/
 * memshare.h) root inside cannot raise; filled, they leave the jail
 * answering; a claimed standby's follow its new limit. The agent is out
 * of the OOM killer's reach where the host may put it there. */
static void test_memory_shares(void **state)
{
	(void)state;
	NEED_JAIL();
	al_err err = {0};
	al_driver_handle h;
	char out[8192];
	start_jail(&h, "t-shm", 64ull << 20, 64);
	assert_int_equal(jail_sh(&h, "grep ' /dev/shm ' /proc/mounts", out,
				 sizeof out, 5000),
			 0);
	print_message("%s\n", out);
	assert_non_null(strstr(out, "size=32768k"));
	assert_non_null(strstr(out, "nr_inodes=512"));
	assert_non_null(strstr(out, "nosuid"));
	assert_non_null(strstr(out, "nodev"));
	assert_int_equal(jail_sh(&h,
				 "cat /proc/sys/kernel/shmmax "
				 "/proc/sys/kernel/shmall "
				 "/proc/sys/kernel/msgmni",
				 out, sizeof out, 5000),
			 0);
	assert_string_equal(out, "16777216\n4096\n256");
	/* Root inside can neither raise them nor remount /dev/shm. */
	assert_true(jail_sh(&h, "echo 999999 > /proc/sys/kernel/shmall", out,
			    sizeof out, 5000) != 0);
	assert_true(jail_sh(&h, "mount -o remount,size=1g /dev/shm", out,
			    sizeof out, 5000) != 0);
	/* Filling it stops at its size, and the jail goes on. */
	int rc = jail_sh(&h, "dd if=/dev/zero of=/dev/shm/big bs=1M count=100",
			 out, sizeof out, 30000);
	print_message("dd: %d %s\n", rc, out);
	assert_int_equal(rc, 1);
	assert_non_null(strstr(out, "No space left on device"));
	assert_int_equal(jail_sh(&h, "du -k /dev/shm/big", out, sizeof out,
				 5000),
			 0);
	assert_int_equal(atoi(out), 32768);
	assert_int_equal(jail_sh(&h, "rm /dev/shm/big; echo alive", out,
				 sizeof out, 5000),
			 0);
	assert_string_equal(out, "alive");

	char path[64];
	long long adj = 99;
	snprintf(path, sizeof path, "/proc/%d/oom_score_adj", (int)h.init_pid);
	assert_int_equal(read_int_file(path, &adj), 0);
	if (have_sys_resource()) {
		assert_int_equal(adj, -1000);
		/* Through oom_adj: its children's floor stays 0. */
		assert_int_equal(jail_sh(&h,
					 "sh -c 'echo 0 > "
					 "/proc/self/oom_score_adj && echo "
					 "-1000 > /proc/self/oom_score_adj'",
					 out, sizeof out, 5000) != 0,
				 1);
	} else {
		print_message("host root lacks CAP_SYS_RESOURCE: the agent "
			      "keeps %lld\n",
			      adj);
		assert_int_equal(adj, 0);
	}

	/* A standby claimed with another limit. */
	al_sandbox_spec spec = {
		.id = "t-shm2",
		.hostname = "t-shm2",
		.limits = {.memory_bytes = 128ull << 20,
			   .pids_max = 64,
			   .cpu_shares = 512},
	};
	rc = al_driver_ns.adopt(&h, &spec, &err);
	if (rc < 0)
		print_message("adopt: %s\n", err.msg);
	assert_int_equal(rc, 0);
	assert_int_equal(jail_sh(&h,
				 "grep ' /dev/shm ' /proc/mounts; cat "
				 "/proc/sys/kernel/shmmax "
				 "/proc/sys/kernel/shmall "
				 "/proc/sys/kernel/msgmni; hostname",
				 out, sizeof out, 5000),
			 0);
	print_message("%s\n", out);
	assert_non_null(strstr(out, "size=65536k,nr_inodes=1024"));
	assert_non_null(strstr(out, "\n33554432\n8192\n512\nt-shm2"));
	/* The host's own ipc and uts namespaces were left as they were. */
	char host[64];
	assert_int_equal(gethostname(host, sizeof host), 0);
	assert_string_not_equal(host, "t-shm2");
	FILE *f = fopen("/proc/sys/kernel/shmall", "r");
	assert_non_null(f);
	unsigned long long all = 0;
	assert_int_equal(fscanf(f, "%llu", &all), 1);
	fclose(f);
	assert_true(all != 8192);
	stop_jail(&h);
}

static void test_stop_cleans(void **state)
{
	(void)state;
	NEED_JAIL();
	al_err err = {0};
	al_driver_handle h;
	char path[512], out[256];
	start_jail(&h, "t-stop", 64ull << 20, 32);
	jail_sh(&h, "sleep 100 >/dev/null & sleep 100 >/dev/null & true", out,
		sizeof out, 5000);
	pid_t init = h.init_pid;
	assert_int_equal(al_cgroup_file("t-stop", "pids.max", path, sizeof path,
					&err),
			 0);
	char *slash = strrchr(path, '/');
	*slash = '\0';
	assert_int_equal(access(path, F_OK), 0);
	stop_jail(&h);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(h.agent_fd, -1);
	assert_int_equal(h.init_pid, 0);
	/* The init was reaped, not left a zombie. */
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/%d", (int)init);
	assert_int_equal(access(proc, F_OK), -1);
	/* Idempotent. */
	stop_jail(&h);
}

static void test_start_failure(void **state)
{
	(void)state;
	NEED_JAIL();
	al_err err = {0};
	al_driver_handle h;
	char path[512];
	al_sandbox_spec spec = {
		.id = "t-fail",
		.rootfs = rootfs,
		.hostname = "t-fail",
		.agent = "/sbin/no-such-agent",
	};
	int before = 0, after = 0;
	assert_int_equal(run("test $(ls /proc/%d/fd | wc -l) -lt 1000",
			     (int)getpid()),
			 0);
	before = run("exit $(ls /proc/%d/fd | wc -l)", (int)getpid());
	assert_int_equal(al_driver_ns.start(&spec, &h, &err), -1);
	assert_int_equal(err.code, AL_ENOENT);
	assert_non_null(strstr(err.msg, "exec /sbin/no-such-agent"));
	assert_int_equal(h.agent_fd, -1);
	assert_int_equal(h.init_pid, 0);
	after = run("exit $(ls /proc/%d/fd | wc -l)", (int)getpid());
	assert_int_equal(before, after); /* no fd leaked */
	assert_int_equal(al_cgroup_file("t-fail", "pids.max", path, sizeof path,
					&err),
			 0);
	*strrchr(path, '/') = '\0';
	assert_int_equal(access(path, F_OK), -1);

	/* Bad input is refused before anything is created. */
	spec.agent = "/agent.sh";
	spec.id = "../x";
	assert_int_equal(al_driver_ns.start(&spec, &h, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	spec.id = "t-fail";
	spec.hostname = "bad host";
	assert_int_equal(al_driver_ns.start(&spec, &h, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	spec.hostname = "t-fail";
	spec.rootfs = "/nonexistent-root";
	assert_int_equal(al_driver_ns.start(&spec, &h, &err), -1);
	assert_int_equal(err.code, AL_ENOENT);
}

static void test_pause_resume(void **state)
{
	(void)state;
	NEED_JAIL();
	al_err err = {0};
	al_driver_handle h;
	char out[256], buf[256];
	start_jail(&h, "t-pause", 64ull << 20, 32);
	assert_int_equal(al_driver_ns.pause(&h, &err), 0);
	/* Frozen: a command gets no answer. */
	assert_int_equal(write(h.agent_fd, "echo thawed\n", 12), 12);
	assert_int_equal(read_until(h.agent_fd, buf, sizeof buf, "@@EXIT", 300),
			 -1);
	assert_int_equal(al_driver_ns.resume(&h, &err), 0);
	assert_true(read_until(h.agent_fd, buf, sizeof buf, "@@EXIT", 5000) >
		    0);
	assert_non_null(strstr(buf, "thawed"));
	/* Stopping a paused jail works too. */
	assert_int_equal(al_driver_ns.pause(&h, &err), 0);
	stop_jail(&h);
	(void)out;
}

/* The first host uid of h's user namespace, from its uid_map as the host
 * sees it ("0 <base> 65536"), checked against the ns pool. */
static unsigned host_base(const al_driver_handle *h, const char *file)
{
	char path[64];
	unsigned in = 1, base = 0, count = 0;
	snprintf(path, sizeof path, "/proc/%d/%s", (int)h->init_pid, file);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%u %u %u", &in, &base, &count), 3);
	fclose(f);
	assert_int_equal(in, 0);
	assert_int_equal(count, AL_UIDRANGE_NS_SIZE);
	assert_true(base >= AL_UIDRANGE_NS_BASE);
	assert_true(base - AL_UIDRANGE_NS_BASE <
		    AL_UIDRANGE_NS_SIZE * (AL_UIDRANGE_NS_SLOTS - 1) + 1);
	assert_int_equal((base - AL_UIDRANGE_NS_BASE) % AL_UIDRANGE_NS_SIZE, 0);
	return base;
}

static void test_userns(void **state)
{
	(void)state;
	NEED_JAIL();
	al_driver_handle h;
	char out[8192], want[64], path[512];
	start_jail(&h, "t-userns", 128ull << 20, 64);
	unsigned base = host_base(&h, "uid_map");
	assert_int_equal(host_base(&h, "gid_map"), base);
	/* The namespace is owned by the range's first uid, not host root:
	 * per-user counts inside are charged to it. */
	snprintf(path, sizeof path, "/proc/%d/ns/user", (int)h.init_pid);
	int nsfd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(nsfd >= 0);
	uid_t owner = 0;
	assert_int_equal(ioctl(nsfd, NS_GET_OWNER_UID, &owner), 0);
	close(nsfd);
	assert_int_equal(owner, base);
	/* The user namespace's throwaway child is gone (reaped, no zombie):
	 * the jail's init is this thread's only child. */
	char kids[256] = "", want_kids[32];
	snprintf(path, sizeof path, "/proc/self/task/%d/children",
		 (int)gettid());
	FILE *kf = fopen(path, "r");
	if (kf != NULL) {
		if (fgets(kids, sizeof kids, kf) == NULL)
			kids[0] = '\0';
		fclose(kf);
		snprintf(want_kids, sizeof want_kids, "%d ", (int)h.init_pid);
		assert_string_equal(kids, want_kids);
	} else {
		print_message("no %s (CONFIG_PROC_CHILDREN): not checked\n",
			      path);
	}
	/* The start's steps were measured. */
	assert_string_equal(h.steps[0].name, "uid range");
	assert_string_equal(h.steps[1].name, "user namespace");
	assert_string_equal(h.steps[2].name, "idmapped mount");
	static const char *const later[] = {
		"cgroups",	"clone",
		"cgroup join",	"mounts",
		"user and fds", "caps and seccomp",
		"exec",		"user namespace reap",
	};
	for (size_t i = 0; i < sizeof later / sizeof later[0]; i++)
		assert_string_equal(h.steps[3 + i].name, later[i]);
	for (size_t i = 0; i < 3 + sizeof later / sizeof later[0]; i++) {
		assert_true(h.steps[i].ms >= 0);
		print_message("step %s: %.3f ms\n", h.steps[i].name,
			      h.steps[i].ms);
	}

	/* Inside: root is the range's first uid, and sees it so. */
	assert_int_equal(jail_sh(&h, "tr -s ' ' < /proc/self/uid_map", out,
				 sizeof out, 5000),
			 0);
	snprintf(want, sizeof want, " 0 %u 65536", base);
	assert_string_equal(out, want);
	assert_int_equal(jail_sh(&h, "id -u; id -g; id -G", out, sizeof out,
				 5000),
			 0);
	assert_string_equal(out, "0\n0\n0");
	/* The template's files, owned by 0 on disk, are root's inside, ... */
	assert_int_equal(jail_sh(&h, "stat -c '%u:%g' / /bin/busybox", out,
				 sizeof out, 5000),
			 0);
	assert_string_equal(out, "0:0\n0:0");
	/* ... and what root makes inside is owned by 0 on the host's disk,
	 * another uid inside by that uid on disk. */
	assert_int_equal(jail_sh(&h,
				 "echo x > /tmp/by-root && mkdir /tmp/d && "
				 "touch /tmp/by-1000 && "
				 "chown 1000:1001 /tmp/by-1000",
				 out, sizeof out, 5000),
			 0);
	struct stat st;
	snprintf(path, sizeof path, "%s/tmp/by-root", rootfs);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(st.st_gid, 0);
	snprintf(path, sizeof path, "%s/tmp/d", rootfs);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_uid, 0);
	snprintf(path, sizeof path, "%s/tmp/by-1000", rootfs);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_uid, 1000);
	assert_int_equal(st.st_gid, 1001);
	/* A uid outside the range does not exist inside. */
	assert_int_not_equal(jail_sh(&h, "chown 70000 /tmp/by-root", out,
				     sizeof out, 5000),
			     0);

	/* The host's device nodes and the /dev/null behind the /proc masks
	 * stay as they are: their owner (host root) is nobody inside, and
	 * the binds are read-only. */
	struct stat full0, null0, full1, null1;
	assert_int_equal(stat("/dev/full", &full0), 0);
	assert_int_equal(stat("/dev/null", &null0), 0);
	assert_int_equal(jail_sh(&h, "stat -c '%u' /dev/full /proc/keys", out,
				 sizeof out, 5000),
			 0);
	assert_string_equal(out, "65534\n65534");
	static const char *const attempts[] = {
		"chmod 600 /dev/full", "chown 0 /dev/full",
		"touch /dev/full",     "chmod 600 /proc/keys",
		"chown 1 /proc/keys",  "touch /proc/timer_list",
		"chmod 700 /proc/sys", "chmod 600 /proc/sys/kernel/hostname",
	};
	for (size_t i = 0; i < sizeof attempts / sizeof *attempts; i++) {
		int rc = jail_sh(&h, attempts[i], out, sizeof out, 5000);
		if (rc == 0)
			print_message("%s succeeded\n", attempts[i]);
		assert_int_not_equal(rc, 0);
	}
	assert_int_equal(stat("/dev/full", &full1), 0);
	assert_int_equal(stat("/dev/null", &null1), 0);
	assert_int_equal(full1.st_mode, full0.st_mode);
	assert_int_equal(full1.st_uid, full0.st_uid);
	assert_int_equal(full1.st_ctim.tv_sec, full0.st_ctim.tv_sec);
	assert_int_equal(full1.st_ctim.tv_nsec, full0.st_ctim.tv_nsec);
	assert_int_equal(null1.st_mode, null0.st_mode);
	assert_int_equal(null1.st_ctim.tv_nsec, null0.st_ctim.tv_nsec);
	/* The nodes still work, for root and for another uid. */
	assert_int_equal(jail_sh(&h,
				 "echo x > /dev/null && "
				 "head -c 3 /dev/zero | wc -c && "
				 "su -s /bin/sh nobody -c "
				 "'echo y > /dev/null && id -u'",
				 out, sizeof out, 5000),
			 0);
	assert_string_equal(out, "3\n65534");
	/* /dev itself is the sandbox's own tmpfs, root's inside. */
	assert_int_equal(jail_sh(&h, "touch /dev/mine && stat -c %u /dev/mine",
				 out, sizeof out, 5000),
			 0);
	assert_string_equal(out, "0");
	stop_jail(&h);
}

/* Two live sandboxes never share a range; stop frees it. */
static void test_userns_ranges(void **state)
{
	(void)state;
	NEED_JAIL();
	al_err err = {0};
	al_driver_handle a, b;
	start_jail(&a, "t-range-a", 64ull << 20, 32);
	start_jail(&b, "t-range-b", 64ull << 20, 32);
	unsigned ba = host_base(&a, "uid_map"), bb = host_base(&b, "uid_map");
	assert_true(ba + AL_UIDRANGE_NS_SIZE <= bb ||
		    bb + AL_UIDRANGE_NS_SIZE <= ba);
	/* While a runs, its slot is not to be had, even asked for with a's
	 * own id (where the search starts). */
	al_uidrange r;
	assert_int_equal(al_uidrange_take(&al_uidrange_ns, "t-range-a", &r,
					  &err),
			 0);
	assert_int_not_equal(r.base, ba);
	assert_int_not_equal(r.base, bb);
	al_uidrange_drop(&r);
	stop_jail(&a);
	/* Stopped, it is free again: the same search now lands on it. */
	assert_int_equal(al_uidrange_take(&al_uidrange_ns, "t-range-a", &r,
					  &err),
			 0);
	assert_int_equal(r.base, ba);
	al_uidrange_drop(&r);
	stop_jail(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_cpu_quota_values),
		cmocka_unit_test_teardown(test_namespaces, test_teardown),
		cmocka_unit_test_teardown(test_privileges, test_teardown),
		cmocka_unit_test_teardown(test_limits, test_teardown),
		cmocka_unit_test_teardown(test_memory_shares, test_teardown),
		cmocka_unit_test_teardown(test_stop_cleans, test_teardown),
		cmocka_unit_test_teardown(test_start_failure, test_teardown),
		cmocka_unit_test_teardown(test_pause_resume, test_teardown),
		cmocka_unit_test_teardown(test_userns, test_teardown),
		cmocka_unit_test_teardown(test_userns_ranges, test_teardown),
	};
	return cmocka_run_group_tests_name("driver_ns", tests, group_setup,
					   group_teardown);
}
