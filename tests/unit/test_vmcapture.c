/* vm capture (vm/capture.h) through the vm driver, as the lifecycle's
 * suspend and resume use it: a real QEMU microvm under TCG, its pool a
 * loop-mounted btrfs of the test's own (reflinks and subvolume
 * snapshots, as in production), the template's RAM shared by a vm-mem
 * server as the controller runs it.
 *
 * Needs root, qemu-system-x86, busybox-static, mkfs.btrfs, the agent
 * (AIRLOCK_AGENT, default build/airlock-agent) and the guest kernel:
 * AIRLOCK_TEST_VM_CACHE/vm (scripts/vm-kernel.sh) or $AIRLOCK_STATE/vm.
 * Without them every test is reported as skipped, saying why.
 * AIRLOCK_VM_TEMPLATE_CACHE (vm/tmplcache.h) spares the template boot. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "shrun.h"

#include "base/config.h"
#include "base/log.h"
#include "driver.h"
#include "proto/agentproto.h"
#include "vm/capture.h"
#include "vm/machine.h"
#include "vm/mem.h"
#include "vm/snapshot.h"
#include "vm_agent.h"

static char tmpdir[] = "/tmp/al-vmcap-XXXXXX";
static char pool[420], tmpl[440], vmdir[440];
static int mounted, ready;
static const char *why_skip = "not set up";
static const al_driver *drv;
static al_vmmem_server *memsrv;
static al_vm_kernel kernel;

#define RAM ((uint64_t)AL_VM_MEM_MB << 20)

/* ---- setup ---- */

static int skip_with(const char *why)
{
	static char msg[600];
	snprintf(msg, sizeof msg, "%s", why);
	why_skip = msg;
	return 0;
}

static int group_setup(void **state)
{
	(void)state;
	al_err err = {0};
	al_log_init("test_vmcapture",
		    getenv("TVC_INFO") ? AL_LOG_INFO : AL_LOG_WARN);
	if (geteuid() != 0)
		return skip_with("needs root");
	if (access(AL_VM_QEMU, X_OK) < 0)
		return skip_with("no " AL_VM_QEMU);
	if (access("/bin/busybox", X_OK) < 0)
		return skip_with("no /bin/busybox (busybox-static)");
	if (run("command -v mkfs.btrfs >/dev/null 2>&1") != 0)
		return skip_with("no mkfs.btrfs (btrfs-progs)");
	const char *agent = getenv("AIRLOCK_AGENT");
	if (agent == NULL)
		agent = "build/airlock-agent";
	if (access(agent, X_OK) < 0)
		return skip_with("no build/airlock-agent");
	/* The guest kernel, from the test cache or the configured state. */
	char kdir[AL_PATH_MAX + 8];
	const char *cache = getenv("AIRLOCK_TEST_VM_CACHE");
	al_config cfg;
	if (cache != NULL && cache[0] != '\0') {
		snprintf(kdir, sizeof kdir, "%s/vm", cache);
	} else {
		if (al_config_load(&cfg, &err) < 0)
			return skip_with(err.msg);
		snprintf(kdir, sizeof kdir, "%s/vm", cfg.state_dir);
	}
	if (mkdtemp(tmpdir) == NULL)
		return -1;
	/* A state dir of the test's own: its pool is the btrfs below. */
	char st[400];
	snprintf(st, sizeof st, "%s/state", tmpdir);
	snprintf(pool, sizeof pool, "%s/pool", st);
	if (run("set -e; mkdir -p %s %s/run; ln -s %s %s/vm; "
		"truncate -s 6G %s/pool.img; mkfs.btrfs -q %s/pool.img "
		">/dev/null; mount -o loop %s/pool.img %s",
		pool, st, kdir, st, tmpdir, tmpdir, tmpdir, pool) != 0) {
		run("rm -rf %s", tmpdir);
		return skip_with("cannot make and mount a loop btrfs");
	}
	mounted = 1;
	setenv("AIRLOCK_STATE", st, 1);
	if (al_config_load(&cfg, &err) < 0 ||
	    al_vm_kernel_find(cfg.state_dir, &kernel, &err) < 0)
		return skip_with(err.msg);
	snprintf(tmpl, sizeof tmpl, "%s/tmpl", pool);
	snprintf(vmdir, sizeof vmdir, "%s/vm-tmpl", pool);
	if (run("set -e; btrfs -q subvolume create %s >/dev/null; r=%s; "
		"mkdir -p $r/bin $r/sbin $r/etc $r/root $r/tmp $r/dev $r/proc "
		"$r/sys; cp /bin/busybox $r/bin/; for a in sh cat ls echo "
		"test sleep grep kill dd head od sync mkdir rm cmp hostname "
		"wc true printf mount seq nproc; do ln -s busybox $r/bin/$a; done; "
		"cp %s $r/sbin/airlock-agent; "
		"echo root:x:0:0:root:/root:/bin/sh >$r/etc/passwd",
		tmpl, tmpl, agent) != 0)
		return -1;
	drv = al_driver_find("vm", &err);
	if (drv == NULL || drv->capture == NULL)
		return -1;
	int64_t t0 = al_now_ms();
	const char *tc = getenv("AIRLOCK_VM_TEMPLATE_CACHE");
	if (al_vm_template_build(tmpl, vmdir, &kernel, AL_VM_TCG, tc, NULL,
				 &err) < 0) {
		fprintf(stderr, "template build failed: %s\n", err.msg);
		return -1;
	}
	printf("# template ready in %lld ms\n", (long long)(al_now_ms() - t0));
	/* As the controller does: one sealed copy of the template's RAM
	 * for every machine of it. */
	memsrv = al_vmmem_serve(cfg.run_dir, cfg.pool_dir, &err);
	if (memsrv == NULL) {
		fprintf(stderr, "vm-mem server: %s\n", err.msg);
		return -1;
	}
	ready = 1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	al_vmmem_stop(memsrv);
	if (mounted) {
		run("umount -l %s", pool);
		run("rm -rf %s", tmpdir);
	}
	return 0;
}

/* ---- helpers ---- */

/* pool/<name>: a btrfs snapshot of from (the template's subvolume or a
 * sandbox's), as the shim makes a sandbox's root and the capture's. */
static void snap(const char *from, const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", pool, name);
	assert_int_equal(run("btrfs -q subvolume snapshot %s %s >/dev/null",
			     from, out),
			 0);
}

static void drop(const char *subvol)
{
	run("btrfs -q subvolume delete %s >/dev/null 2>&1", subvol);
}

static al_sandbox_spec spec_of(const char *id, const char *root,
			       const char *restore_dir)
{
	al_sandbox_spec s = {.id = id,
			     .rootfs = root,
			     .hostname = id,
			     .agent = "/sbin/airlock-agent",
			     .restore_dir = restore_dir};
	return s;
}

static void start_new_cpus(const char *id, const char *root,
			   uint32_t cpu_millis, al_driver_handle *h,
			   al_frame_reader *r)
{
	al_sandbox_spec s = spec_of(id, root, NULL);
	s.limits.cpu_millis = cpu_millis;
	al_err err = {0};
	if (drv->start(&s, h, &err) < 0)
		fail_msg("start %s: %s", id, err.msg);
	al_frame_reader_init(r);
	expect_hello(h->agent_fd, r);
}

static void start_new(const char *id, const char *root, al_driver_handle *h,
		      al_frame_reader *r)
{
	start_new_cpus(id, root, 0, h, r);
}

/* The shim's side of a suspend: the agent quiet (PAUSE answered), the
 * machine stopped, its memory captured into pool/<name>. */
static void capture(al_driver_handle *h, al_frame_reader *r, const char *name,
		    char *dir, size_t len, al_capture_stats *st)
{
	vm_request(h->agent_fd, r, AL_F_PAUSE, AL_REQ_ID_PAUSE);
	al_err err = {0};
	assert_int_equal(drv->pause(h, &err), 0);
	snprintf(dir, len, "%s/%s", pool, name);
	assert_int_equal(mkdir(dir, 0700), 0);
	if (drv->capture(h, dir, st, &err) < 0)
		fail_msg("capture: %s", err.msg);
}

static void stop(al_driver_handle *h, al_frame_reader *r)
{
	al_err err = {0};
	assert_int_equal(drv->stop(h, &err), 0);
	al_frame_reader_free(r);
}

/* The shim's side of a resume: start from the capture, RESUME the agent,
 * give it the sandbox's identity (adopt: clock, entropy, MAC, net).
 * Returns ms from the start to the agent's RESUME answer. */
static int64_t resume_cpus(const char *id, const char *root, const char *dir,
			   uint32_t cpu_millis, al_driver_handle *h,
			   al_frame_reader *r)
{
	al_sandbox_spec s = spec_of(id, root, dir);
	s.limits.cpu_millis = cpu_millis;
	al_err err = {0};
	int64_t t0 = al_now_ms();
	if (drv->start(&s, h, &err) < 0)
		fail_msg("resume %s from %s: %s", id, dir, err.msg);
	al_frame_reader_init(r);
	vm_request(h->agent_fd, r, AL_F_RESUME, AL_REQ_ID_RESUME);
	int64_t ms = al_now_ms() - t0;
	h->agent_in = r;
	if (drv->adopt(h, &s, &err) < 0)
		fail_msg("identity after resume: %s", err.msg);
	return ms;
}

static int64_t resume(const char *id, const char *root, const char *dir,
		      al_driver_handle *h, al_frame_reader *r)
{
	return resume_cpus(id, root, dir, 0, h, r);
}

static long long exec_num(al_driver_handle *h, al_frame_reader *r, uint32_t id,
			  const char *sh)
{
	char out[256];
	if (vm_exec(h->agent_fd, r, id, sh, out, sizeof out) != 0)
		fail_msg("%s failed: %s", sh, out);
	return atoll(out);
}

static void print_stats(const char *what, const al_capture_stats *st)
{
	printf("# %s: %llu dirty pages (%.1f MiB), %.1f MiB written; state "
	       "%.1f ms, scan %.1f ms, write %.1f ms\n",
	       what, (unsigned long long)st->dirty_pages,
	       (double)st->dirty_pages * 4096 / 1048576.0,
	       (double)st->bytes / 1048576.0, st->state_ms, st->scan_ms,
	       st->write_ms);
}

/* ---- tests ---- */

#define COUNTER                                                                \
	"printf 'i=0; while :; do i=$((i+1)); echo $i >/tmp/count; "           \
	"sleep 0.1; done\\n' >/root/counter.sh && "                            \
	"{ sh /root/counter.sh </dev/null >/dev/null 2>&1 & "                  \
	"echo $! >/tmp/counter.pid; } && echo $PPID"

/* Suspend and resume, six times in a row, each from the capture of the
 * machine the one before resumed: a counter process goes on counting
 * from where it was (same process, same count or more, never reset), its
 * agent is the same process (it saw no end of its channel), every file
 * written before each capture is there, and a capture of a resumed
 * machine writes only what changed since the capture before. */
static void test_suspend_resume_cycles(void **state)
{
	(void)state;
	NEED_VM();
	enum { CYCLES = 6 };
	char root[CYCLES + 1][480], dir[CYCLES + 1][480], name[32], cmd[600];
	al_capture_stats st[CYCLES + 1];
	al_driver_handle h;
	al_frame_reader r;
	snap(tmpl, "cyc-0", root[0], sizeof root[0]);
	start_new("cyc", root[0], &h, &r);
	uint32_t id = 1;
	long long agent = exec_num(&h, &r, id++, COUNTER);
	long long pid = exec_num(&h, &r, id++, "cat /tmp/counter.pid");
	assert_true(agent > 1 && pid > 1);
	assert_int_equal(vm_exec(h.agent_fd, &r, id++, "echo 0 >/root/f0", cmd,
				 sizeof cmd),
			 0);
	for (int k = 1; k <= CYCLES; k++) {
		/* Counting before the capture. */
		long long before = exec_num(&h, &r, id++,
					    "sleep 0.5; "
					    "cat /tmp/count");
		assert_true(before > 0);
		snprintf(name, sizeof name, "cap-%d", k);
		capture(&h, &r, name, dir[k], sizeof dir[k], &st[k]);
		snprintf(cmd, sizeof cmd, "capture %d", k);
		print_stats(cmd, &st[k]);
		struct stat sb;
		snprintf(cmd, sizeof cmd, "%s/mem", dir[k]);
		assert_int_equal(stat(cmd, &sb), 0);
		assert_int_equal(sb.st_mode & 07777, 0600);
		assert_int_equal(sb.st_uid, 0);
		assert_int_equal((uint64_t)sb.st_size, RAM);
		assert_true(st[k].dirty_pages > 0);
		assert_true(st[k].bytes <= RAM + (1u << 20));
		if (k > 1)
			/* Only what changed since the last capture. */
			assert_true(st[k].bytes < (16u << 20) &&
				    st[k].bytes < st[1].bytes);
		/* The disk as it is at the capture, then no machine. */
		snprintf(name, sizeof name, "cyc-%d", k);
		snap(root[k - 1], name, root[k], sizeof root[k]);
		stop(&h, &r);
		drop(root[k - 1]);
		int64_t ms = resume("cyc", root[k], dir[k], &h, &r);
		printf("# resume %d to the agent's RESUME answer: %lld ms\n", k,
		       (long long)ms);
		/* The previous capture may go: the next one reflinks the
		 * one this machine was resumed from. */
		if (k > 1)
			run("rm -rf %s", dir[k - 1]);
		assert_int_equal(exec_num(&h, &r, id++, "cat /tmp/counter.pid"),
				 pid);
		snprintf(cmd, sizeof cmd, "kill -0 %lld && cat /tmp/count",
			 pid);
		long long after = exec_num(&h, &r, id++, cmd);
		assert_true(after >= before);
		/* Not restarted: it counts on from the capture (given up
		 * to 20 s: a loaded host starves a TCG guest). */
		snprintf(cmd, sizeof cmd,
			 "for t in $(seq 100); do sleep 0.2; c=$(cat "
			 "/tmp/count); [ $c -gt %lld ] && break; done; echo $c",
			 after);
		long long later = exec_num(&h, &r, id++, cmd);
		if (later <= after)
			fail_msg("the counter stopped at %lld", after);
		assert_int_equal(exec_num(&h, &r, id++, "echo $PPID"), agent);
		printf("# cycle %d: count %lld before, %lld after, then "
		       "%lld\n",
		       k, before, after, later);
		/* Every file of every cycle before. */
		for (int j = 0; j < k; j++) {
			snprintf(cmd, sizeof cmd, "cat /root/f%d", j);
			assert_int_equal(exec_num(&h, &r, id++, cmd), j);
		}
		snprintf(cmd, sizeof cmd, "echo %d >/root/f%d", k, k);
		char out[64];
		assert_int_equal(vm_exec(h.agent_fd, &r, id++, cmd, out,
					 sizeof out),
				 0);
		assert_int_equal(vm_exec(h.agent_fd, &r, id++, "hostname", out,
					 sizeof out),
				 0);
		assert_string_equal(out, "cyc\n");
	}
	stop(&h, &r);
	drop(root[CYCLES]);
	run("rm -rf %s", dir[CYCLES]);
}

/* A rolling snapshot: captured, then the same machine goes on (cont,
 * RESUME) and is captured again, writing only what changed since; the
 * later capture resumes with everything of both. */
static void test_rolling_capture_goes_on(void **state)
{
	(void)state;
	NEED_VM();
	char root[480], root2[480], d1[480], d2[480], out[64];
	al_capture_stats s1, s2;
	al_driver_handle h;
	al_frame_reader r;
	al_err err = {0};
	snap(tmpl, "roll-0", root, sizeof root);
	start_new("roll", root, &h, &r);
	assert_int_equal(vm_exec(h.agent_fd, &r, 1, "echo one >/tmp/one", out,
				 sizeof out),
			 0);
	capture(&h, &r, "cap-roll-1", d1, sizeof d1, &s1);
	print_stats("rolling capture 1", &s1);
	assert_int_equal(drv->resume(&h, &err), 0);
	vm_request(h.agent_fd, &r, AL_F_RESUME, AL_REQ_ID_RESUME);
	assert_int_equal(vm_exec(h.agent_fd, &r, 2,
				 "echo two >/tmp/two && cat /tmp/one", out,
				 sizeof out),
			 0);
	assert_string_equal(out, "one\n");
	capture(&h, &r, "cap-roll-2", d2, sizeof d2, &s2);
	print_stats("rolling capture 2", &s2);
	assert_true(s2.bytes < s1.bytes);
	snap(root, "roll-1", root2, sizeof root2);
	stop(&h, &r);
	resume("roll", root2, d2, &h, &r);
	assert_int_equal(vm_exec(h.agent_fd, &r, 3, "cat /tmp/one /tmp/two",
				 out, sizeof out),
			 0);
	assert_string_equal(out, "one\ntwo\n");
	stop(&h, &r);
}

/* A fork: two sandboxes resumed from one capture at once, each with its
 * own id, hostname and entropy: both have the parent's memory and disk,
 * and what one writes the other does not see. */
static void test_fork_from_one_capture(void **state)
{
	(void)state;
	NEED_VM();
	char root[480], ra[480], rb[480], dir[480], out[128], oa[128], ob[128];
	al_capture_stats st;
	al_driver_handle h, a, b;
	al_frame_reader r, fa, fb;
	snap(tmpl, "fork-0", root, sizeof root);
	start_new("parent", root, &h, &r);
	assert_int_equal(vm_exec(h.agent_fd, &r, 1,
				 "echo mine >/tmp/parent && echo disk >/root/p",
				 out, sizeof out),
			 0);
	capture(&h, &r, "cap-fork", dir, sizeof dir, &st);
	snap(root, "fork-a", ra, sizeof ra);
	snap(root, "fork-b", rb, sizeof rb);
	stop(&h, &r);
	resume("child-a", ra, dir, &a, &fa);
	resume("child-b", rb, dir, &b, &fb);
	const char *look = "hostname; cat /tmp/parent /root/p; "
			   "head -c 16 /dev/urandom | od -An -tx1";
	assert_int_equal(vm_exec(a.agent_fd, &fa, 2, look, oa, sizeof oa), 0);
	assert_int_equal(vm_exec(b.agent_fd, &fb, 2, look, ob, sizeof ob), 0);
	assert_memory_equal(oa, "child-a\nmine\ndisk\n", 18);
	assert_memory_equal(ob, "child-b\nmine\ndisk\n", 18);
	/* Their random streams part after the identity's fresh entropy. */
	assert_string_not_equal(oa + 18, ob + 18);
	assert_int_equal(vm_exec(a.agent_fd, &fa, 3,
				 "echo a >/tmp/parent && echo a >/root/p", out,
				 sizeof out),
			 0);
	assert_int_equal(vm_exec(b.agent_fd, &fb, 3, "cat /tmp/parent /root/p",
				 out, sizeof out),
			 0);
	assert_string_equal(out, "mine\ndisk\n");
	stop(&a, &fa);
	stop(&b, &fb);
}

/* A machine of 2 vCPUs (its template's snapshot of that shape,
 * VMDIR/vcpus-2) resumes with both, for a sandbox of as many; one of
 * another count is refused. */
static void test_two_vcpus(void **state)
{
	(void)state;
	NEED_VM();
	if (al_config_host_cpus() < 2) {
		fprintf(stderr, "skipped: one CPU here, no 2-vCPU vm\n");
		skip();
	}
	char root[480], root2[480], dir[480];
	al_capture_stats st;
	al_driver_handle h;
	al_frame_reader r;
	snap(tmpl, "two-0", root, sizeof root);
	start_new_cpus("two", root, 2000, &h, &r);
	assert_int_equal(exec_num(&h, &r, 1, "echo 7 >/tmp/seven && nproc"), 2);
	capture(&h, &r, "cap-two", dir, sizeof dir, &st);
	snap(root, "two-1", root2, sizeof root2);
	stop(&h, &r);
	al_sandbox_spec one = spec_of("two", root2, dir);
	al_err err = {0};
	assert_int_equal(drv->start(&one, &h, &err), -1);
	assert_int_equal(err.code, AL_ESTATE);
	assert_non_null(strstr(err.msg, "2 vCPUs, the sandbox 1"));
	resume_cpus("two", root2, dir, 2000, &h, &r);
	assert_int_equal(exec_num(&h, &r, 2, "nproc"), 2);
	assert_int_equal(exec_num(&h, &r, 3, "cat /tmp/seven"), 7);
	stop(&h, &r);
}

/* Rewrite one line "key=..." of dir/meta to "key=value". */
static void meta_set(const char *dir, const char *key, const char *value)
{
	assert_int_equal(run("sed -i 's|^%s=.*|%s=%s|' %s/meta", key, key,
			     value, dir),
			 0);
}

static void expect_refused(const char *root, const char *dir, const char *what)
{
	al_sandbox_spec s = spec_of("inc", root, dir);
	al_driver_handle h;
	al_err err = {0};
	assert_int_equal(drv->start(&s, &h, &err), -1);
	printf("# refused: %s\n", err.msg);
	if (err.code != AL_ESTATE || strstr(err.msg, what) == NULL)
		fail_msg("expected AL_ESTATE naming \"%s\", got %s: %s", what,
			 al_code_name(err.code), err.msg);
	assert_int_equal(h.agent_fd, -1);
	assert_int_equal(h.init_pid, 0);
	/* The disk it would have resumed with is the caller's: kept. */
	char disk[400];
	snprintf(disk, sizeof disk, "%s/" AL_VM_DISK, root);
	assert_int_equal(access(disk, F_OK), 0);
}

/* A capture this host cannot resume as it is (another format, layout,
 * QEMU, accelerator or vCPU count; a template whose memory is gone or was
 * rebuilt; damaged files) is refused before anything runs, with
 * AL_ESTATE saying what differs, so that the caller can start the disk
 * cold; the same capture unchanged resumes. Also: a running machine is
 * not captured, and a capture never writes through what is in its
 * directory. */
static void test_incompatible_capture_refused(void **state)
{
	(void)state;
	NEED_VM();
	char root[480], root2[480], dir[480], d[480], out[64];
	al_capture_stats st;
	al_driver_handle h;
	al_frame_reader r;
	al_err err = {0};
	snap(tmpl, "inc-0", root, sizeof root);
	start_new("inc", root, &h, &r);
	/* Synced, as a suspend syncs the guest's disk before the capture:
	 * a cold start from that disk (below) must find it. */
	assert_int_equal(vm_exec(h.agent_fd, &r, 1,
				 "echo here >/root/mark && sync", out,
				 sizeof out),
			 0);

	/* Running: refused, nothing written. */
	snprintf(d, sizeof d, "%s/cap-running", pool);
	assert_int_equal(mkdir(d, 0700), 0);
	assert_int_equal(drv->capture(&h, d, &st, &err), -1);
	assert_int_equal(err.code, AL_ESTATE);
	assert_non_null(strstr(err.msg, "pause it first"));
	assert_int_equal(run("test -z \"$(ls -A %s)\"", d), 0);

	vm_request(h.agent_fd, &r, AL_F_PAUSE, AL_REQ_ID_PAUSE);
	assert_int_equal(drv->pause(&h, &err), 0);
	/* A directory with something in it (here a link out of it): not
	 * written, and the target untouched. */
	snprintf(d, sizeof d, "%s/cap-planted", pool);
	assert_int_equal(run("mkdir %s && echo victim >%s/victim && "
			     "ln -s %s/victim %s/mem",
			     d, tmpdir, tmpdir, d),
			 0);
	assert_int_equal(drv->capture(&h, d, &st, &err), -1);
	assert_int_equal(err.code, AL_EEXIST);
	assert_int_equal(run("test \"$(cat %s/victim)\" = victim && "
			     "test \"$(ls -A %s)\" = mem",
			     tmpdir, d),
			 0);
	/* A directory that is a link: refused too. */
	snprintf(d, sizeof d, "%s/cap-link", pool);
	assert_int_equal(symlink(tmpdir, d), 0);
	assert_int_equal(drv->capture(&h, d, &st, &err), -1);

	snprintf(dir, sizeof dir, "%s/cap-inc", pool);
	assert_int_equal(mkdir(dir, 0700), 0);
	if (drv->capture(&h, dir, &st, &err) < 0)
		fail_msg("capture: %s", err.msg);
	snap(root, "inc-1", root2, sizeof root2);
	stop(&h, &r);

	static const struct {
		const char *key, *value, *what;
	} edits[] = {
		{"format", "5", "vm format 5"},
		{"layout", "9", "layout is 9"},
		{"qemu", "6.0.0 elsewhere", "QEMU 6.0.0"},
		{"accel", "kvm", "taken under kvm"},
		{"vcpus", "2", "2 vCPUs"},
		{"base", "/elsewhere", "against the template snapshot"},
		{"base_mtime_ns", "1", "rebuilt since the capture"},
		{"dirty_pages", "1", "pages do not match"},
		{"ram", "x", "bad ram"},
	};
	for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
		snprintf(d, sizeof d, "%s/cap-edit-%zu", pool, i);
		assert_int_equal(run("cp -a --reflink=always %s %s", dir, d),
				 0);
		meta_set(d, edits[i].key, edits[i].value);
		expect_refused(root2, d, edits[i].what);
		run("rm -rf %s", d);
	}
	/* Damaged files. */
	snprintf(d, sizeof d, "%s/cap-damaged", pool);
	assert_int_equal(run("cp -a --reflink=always %s %s && "
			     "truncate -s 100 %s/pages",
			     dir, d, d),
			 0);
	expect_refused(root2, d, "pages is 100 bytes");
	assert_int_equal(run("rm -rf %s && cp -a --reflink=always %s %s && "
			     "echo garbage >%s/meta",
			     d, dir, d, d),
			 0);
	expect_refused(root2, d, "no key=value");
	run("rm -rf %s", d);
	/* The template's memory rebuilt (another file in its place), then
	 * gone. */
	assert_int_equal(run("cd %s && cp --reflink=always mem mem.orig && "
			     "cp --reflink=always mem mem.new && "
			     "mv mem.new mem",
			     vmdir),
			 0);
	expect_refused(root2, dir, "rebuilt since the capture");
	assert_int_equal(run("mv %s/mem %s/mem.new", vmdir, vmdir), 0);
	expect_refused(root2, dir, "no current snapshot");
	assert_int_equal(run("cd %s && rm mem.new && mv mem.orig mem", vmdir),
			 0);
	/* Still refused: mem.orig is a copy, not the file captured
	 * against. A capture is never resumed on other RAM than its own. */
	expect_refused(root2, dir, "rebuilt since the capture");

	/* What the caller does then: the sandbox's own disk, booted cold.
	 * Its files are there; its memory is not. */
	al_sandbox_spec s = spec_of("inc", root2, NULL);
	s.own_disk = 1;
	int64_t t0 = al_now_ms();
	if (drv->start(&s, &h, &err) < 0)
		fail_msg("cold start on the own disk: %s", err.msg);
	al_frame_reader_init(&r);
	expect_hello(h.agent_fd, &r);
	printf("# cold start on the sandbox's own disk: %lld ms\n",
	       (long long)(al_now_ms() - t0));
	assert_int_equal(vm_exec(h.agent_fd, &r, 1,
				 "cat /root/mark; hostname; ls /tmp | wc -l",
				 out, sizeof out),
			 0);
	assert_string_equal(out, "here\ninc\n0\n");
	stop(&h, &r);
	char disk[520];
	snprintf(disk, sizeof disk, "%s/" AL_VM_DISK, root2);
	assert_int_equal(access(disk, F_OK), 0);
}

/* QEMU's guest RAM is found only as the one private mapping of the
 * whole memfd; anything else in its maps (a second mapping, a part, a
 * shared one, a line forged by a file name) is refused, so the shim
 * reads and writes no other memory of QEMU's. */
static void test_find_ram_refuses_what_is_not_it(void **state)
{
	(void)state;
	const dev_t dev = makedev(0, 1);
	const uint64_t ram = 1u << 20;
	uint64_t start = 0;
	al_err err = {0};
	static const char one[] =
		"55d000000000-55d000001000 r-xp 00000000 fe:01 99 /usr/bin/q\n"
		"7f0000000000-7f0000100000 rw-p 00000000 00:01 1234 "
		"/memfd:airlock-template-ram (deleted)\n"
		"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n";
	assert_int_equal(al_vmcap_find_ram(one, strlen(one), dev, 1234, ram,
					   &start, &err),
			 0);
	assert_int_equal(start, 0x7f0000000000ull);
	static const char *const bad[] = {
		/* twice (also what a forged line in a name looks like) */
		"7f0000000000-7f0000100000 rw-p 00000000 00:01 1234 /m\n"
		"7f1000000000-7f1000100000 rw-p 00000000 00:01 1234 /m\n",
		/* a part of it, or bigger */
		"7f0000000000-7f0000080000 rw-p 00000000 00:01 1234 /m\n",
		"7f0000000000-7f0000200000 rw-p 00000000 00:01 1234 /m\n",
		/* from another offset, shared, not writable */
		"7f0000000000-7f0000100000 rw-p 00001000 00:01 1234 /m\n",
		"7f0000000000-7f0000100000 rw-s 00000000 00:01 1234 /m\n",
		"7f0000000000-7f0000100000 r--p 00000000 00:01 1234 /m\n",
		/* whole, plus a part elsewhere */
		"7f0000000000-7f0000100000 rw-p 00000000 00:01 1234 /m\n"
		"7f2000000000-7f2000001000 rw-p 00000000 00:01 1234 /m\n",
		/* not there, or malformed */
		"7f0000000000-7f0000100000 rw-p 00000000 00:01 1235 /m\n",
		"7f0000000000-7f0000100000 rw-p 00000000 00:01\n",
		"zz-7f0000100000 rw-p 00000000 00:01 1234 /m\n",
		"7f0000100000-7f0000000000 rw-p 00000000 00:01 1234 /m\n",
		"",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		err = (al_err){0};
		if (al_vmcap_find_ram(bad[i], strlen(bad[i]), dev, 1234, ram,
				      &start, &err) == 0)
			fail_msg("accepted: %s", bad[i]);
		assert_int_equal(err.code, AL_EPROTO);
	}
}

/* The scan on a live process (this one): exactly the written pages of a
 * private memfd mapping count, read-only touched ones do not; a second
 * mapping of the file, or a hole punched in the first, makes it refuse. */
static void test_dirty_scan(void **state)
{
	(void)state;
	const uint64_t ram = 1u << 20, pages = ram / 4096;
	int fd = memfd_create("vmcap-test", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)ram), 0);
	char fill[4096];
	memset(fill, 0x5a, sizeof fill);
	for (uint64_t i = 0; i < pages; i++)
		assert_int_equal(pwrite(fd, fill, sizeof fill,
					(off_t)(i * 4096)),
				 (ssize_t)sizeof fill);
	struct stat sb;
	assert_int_equal(fstat(fd, &sb), 0);
	volatile uint8_t *p = mmap(NULL, ram, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE, fd, 0);
	assert_true(p != MAP_FAILED);
	unsigned sum = 0;
	for (uint64_t i = 0; i < pages; i++)
		sum += p[i * 4096];
	assert_int_equal(sum, 0x5a * pages);
	p[3 * 4096] = 1;
	p[200 * 4096 + 17] = 2;
	uint8_t map[32] = {0};
	uint64_t start = 0;
	al_err err = {0};
	int self = al_vmcap_proc_open(getpid(), -1, &err);
	assert_true(self >= 0);
	if (al_vmcap_dirty_pages(self, sb.st_dev, sb.st_ino, ram, map, &start,
				 &err) < 0)
		fail_msg("scan: %s", err.msg);
	assert_int_equal(start, (uint64_t)(uintptr_t)p);
	for (uint64_t i = 0; i < pages; i++)
		assert_int_equal((map[i / 8] >> (i % 8)) & 1,
				 i == 3 || i == 200);
	void *again = mmap(NULL, ram, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(again != MAP_FAILED);
	assert_int_equal(al_vmcap_dirty_pages(self, sb.st_dev, sb.st_ino, ram,
					      map, &start, &err),
			 -1);
	assert_int_equal(err.code, AL_EPROTO);
	munmap(again, ram);
	assert_int_equal(munmap((void *)(p + 4096), 4096), 0);
	assert_int_equal(al_vmcap_dirty_pages(self, sb.st_dev, sb.st_ino, ram,
					      map, &start, &err),
			 -1);
	munmap((void *)p, ram);
	close(fd);
	close(self);
}

/* KiB of anonymous (private, written) pages in QEMU's guest RAM
 * mapping, from /proc/<pid>/smaps. */
static uint64_t ram_anon_kib(pid_t pid)
{
	char p[64], line[512];
	snprintf(p, sizeof p, "/proc/%d/smaps", (int)pid);
	FILE *f = fopen(p, "re");
	assert_non_null(f);
	int in_ram = 0;
	uint64_t kib = 0;
	int found = 0;
	while (fgets(line, sizeof line, f) != NULL) {
		unsigned long long v, lo, hi;
		if (sscanf(line, "%llx-%llx ", &lo, &hi) == 2)
			in_ram = strstr(line, " rw-p ") != NULL &&
				 strstr(line, "memfd:airlock-template-ram") !=
					 NULL;
		else if (in_ram &&
			 sscanf(line, "Anonymous: %llu kB", &v) == 1) {
			kib = v;
			found++;
		}
	}
	fclose(f);
	assert_int_equal(found, 1);
	return kib;
}

/* A guest that wrote 64 MiB, captured and resumed (its figures, beside
 * QEMU's migrate to a file, are bench/vmcapture's): the capture holds
 * every written page and writes at most its RAM, into files of exactly
 * its size; the resumed machine has the file, and only the saved pages
 * became its own (the rest of its RAM is still the template's, shared). */
static void test_capture_64mib(void **state)
{
	(void)state;
	NEED_VM();
	char root[480], root2[480], dir[480], mem[520], out[64];
	al_capture_stats st;
	al_driver_handle h;
	al_frame_reader r;
	snap(tmpl, "big-0", root, sizeof root);
	start_new("big", root, &h, &r);
	/* 64 MiB of fresh pages (tmpfs is guest RAM). */
	char dd[512];
	if (vm_exec(h.agent_fd, &r, 1,
		    "mkdir -p /fill && mount -t tmpfs -o size=80m fill /fill "
		    "&& dd if=/dev/urandom of=/fill/a bs=1M count=64 2>&1",
		    dd, sizeof dd) != 0)
		fail_msg("writing 64 MiB in the guest: %s", dd);
	capture(&h, &r, "cap-big", dir, sizeof dir, &st);
	assert_true(st.dirty_pages >= (64u << 20) / 4096);
	assert_true(st.bytes <= RAM + (1u << 20));
	struct stat sb;
	snprintf(mem, sizeof mem, "%s/mem", dir);
	assert_int_equal(stat(mem, &sb), 0);
	assert_int_equal((uint64_t)sb.st_size, RAM);
	snap(root, "big-1", root2, sizeof root2);
	stop(&h, &r);

	resume("big", root2, dir, &h, &r);
	assert_int_equal(vm_exec(h.agent_fd, &r, 2, "true", out, sizeof out),
			 0);
	uint64_t own = ram_anon_kib(h.init_pid);
	assert_true(own >= st.dirty_pages * 4 &&
		    own < st.dirty_pages * 4 + (32u << 10));
	assert_int_equal(vm_exec(h.agent_fd, &r, 3,
				 "test $(wc -c </fill/a) = 67108864", out,
				 sizeof out),
			 0);
	stop(&h, &r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find_ram_refuses_what_is_not_it),
		cmocka_unit_test(test_dirty_scan),
		cmocka_unit_test(test_suspend_resume_cycles),
		cmocka_unit_test(test_rolling_capture_goes_on),
		cmocka_unit_test(test_fork_from_one_capture),
		cmocka_unit_test(test_two_vcpus),
		cmocka_unit_test(test_capture_64mib),
		/* Last: it rebuilds the template's memory. */
		cmocka_unit_test(test_incompatible_capture_refused),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
