/* core/machine_end and the cgroup's OOM count it reads: a machine the
 * OOM killer ended is reported as out of memory with the limit. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "host/cgroup.h"
#include "sandbox/machine_end.h"

#define MIB (1ull << 20)
/* Wait statuses as waitpid gives them. */
#define KILLED(sig) (sig)
#define EXITED(rc) ((rc) << 8)

static void test_parse_v1(void **state)
{
	(void)state;
	uint64_t n = 99;
	assert_int_equal(al_cgroup_oom_kills_parse("oom_kill_disable 0\n"
						   "under_oom 0\n"
						   "oom_kill 3\n",
						   &n),
			 0);
	assert_int_equal(n, 3);
}

static void test_parse_v2(void **state)
{
	(void)state;
	uint64_t n = 99;
	assert_int_equal(al_cgroup_oom_kills_parse("low 0\nhigh 0\nmax 12\n"
						   "oom 2\noom_kill 1\n"
						   "oom_group_kill 0\n",
						   &n),
			 0);
	assert_int_equal(n, 1);
	/* Last line without a newline. */
	assert_int_equal(al_cgroup_oom_kills_parse("oom 2\noom_kill 7", &n), 0);
	assert_int_equal(n, 7);
}

static void test_parse_missing(void **state)
{
	(void)state;
	uint64_t n = 99;
	/* oom_kill_disable and oom_group_kill are other counters. */
	assert_int_equal(al_cgroup_oom_kills_parse("oom_kill_disable 0\n"
						   "under_oom 0\n",
						   &n),
			 -1);
	assert_int_equal(al_cgroup_oom_kills_parse("oom_group_kill 4\n", &n),
			 -1);
	assert_int_equal(al_cgroup_oom_kills_parse("oom_kill x\n", &n), -1);
	assert_int_equal(al_cgroup_oom_kills_parse("oom_kill 5x\n", &n), -1);
	assert_int_equal(al_cgroup_oom_kills_parse("", &n), -1);
	assert_int_equal(n, 99);
}

static void test_oom_reason(void **state)
{
	(void)state;
	char out[256];
	al_cgroup_memory mem = {.limit_bytes = 512 * MIB, .oom_kills = 2};
	al_machine_end_reason("init", KILLED(SIGKILL), &mem, 512 * MIB, out,
			      sizeof out);
	assert_string_equal(out, "out of memory: the sandbox's memory limit "
				 "is 512 MiB; the kernel's OOM killer ended "
				 "its init");
	/* No limit from the owner: the cgroup's. */
	al_machine_end_reason("init", KILLED(SIGKILL), &mem, 0, out,
			      sizeof out);
	assert_non_null(strstr(out, "memory limit is 512 MiB;"));
}

/* A vm's cgroup holds the guest's RAM and QEMU's own. */
static void test_oom_reason_vm(void **state)
{
	(void)state;
	char out[256];
	al_cgroup_memory mem = {.limit_bytes = 768 * MIB, .oom_kills = 1};
	al_machine_end_reason("virtual machine (QEMU)", KILLED(SIGKILL), &mem,
			      256 * MIB, out, sizeof out);
	assert_string_equal(out, "out of memory: the sandbox's memory limit "
				 "is 256 MiB (768 MiB with the machine's "
				 "own); the kernel's OOM killer ended its "
				 "virtual machine (QEMU)");
}

/* Without an OOM kill, or by another signal, or unreadable counts: the
 * plain end. */
static void test_other_ends(void **state)
{
	(void)state;
	char out[256];
	al_cgroup_memory none = {.limit_bytes = 512 * MIB, .oom_kills = 0};
	al_cgroup_memory some = {.limit_bytes = 512 * MIB, .oom_kills = 1};
	al_machine_end_reason("init", KILLED(SIGKILL), &none, 0, out,
			      sizeof out);
	assert_string_equal(out, "the sandbox's init was killed by signal 9");
	al_machine_end_reason("init", KILLED(SIGKILL), NULL, 0, out,
			      sizeof out);
	assert_string_equal(out, "the sandbox's init was killed by signal 9");
	al_machine_end_reason("init", KILLED(SIGSEGV), &some, 0, out,
			      sizeof out);
	assert_string_equal(out, "the sandbox's init was killed by signal 11");
	al_machine_end_reason("virtual machine (QEMU)", EXITED(1), &some, 0,
			      out, sizeof out);
	assert_string_equal(out, "the sandbox's virtual machine (QEMU) "
				 "exited with 1");
}

/* Unlimited cgroup, no owner limit: no number to give. */
static void test_oom_no_limit(void **state)
{
	(void)state;
	char out[256];
	al_cgroup_memory mem = {.limit_bytes = 0, .oom_kills = 1};
	al_machine_end_reason("init", KILLED(SIGKILL), &mem, 0, out,
			      sizeof out);
	assert_string_equal(out, "out of memory: the kernel's OOM killer "
				 "ended the sandbox's init");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_v1),
		cmocka_unit_test(test_parse_v2),
		cmocka_unit_test(test_parse_missing),
		cmocka_unit_test(test_oom_reason),
		cmocka_unit_test(test_oom_reason_vm),
		cmocka_unit_test(test_other_ends),
		cmocka_unit_test(test_oom_no_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
