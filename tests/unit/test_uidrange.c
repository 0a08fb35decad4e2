/* uidrange: slots of a small pool in a private lock directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/uidrange.h"

static char dir[] = "/tmp/al-uidrange-XXXXXX";
static al_uidrange_pool pool = {
	.base = 5000,
	.size = 10,
	.slots = 3,
	.what = "test ranges",
};

static int setup(void **state)
{
	(void)state;
	if (mkdtemp(dir) == NULL)
		return -1;
	pool.dir = dir;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_slots_are_disjoint_and_run_out(void **state)
{
	(void)state;
	al_err err = {0};
	al_uidrange r[4];
	int seen = 0;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(al_uidrange_take(&pool, "x", &r[i], &err), 0);
		assert_true(r[i].base >= 5000 && r[i].base <= 5020);
		assert_int_equal((r[i].base - 5000) % 10, 0);
		int bit = 1 << ((r[i].base - 5000) / 10);
		assert_false(seen & bit);
		seen |= bit;
	}
	assert_int_equal(al_uidrange_take(&pool, "x", &r[3], &err), -1);
	assert_int_equal(err.code, AL_EUNAVAIL);
	assert_non_null(strstr(err.msg, "all 3 test ranges are in use"));
	assert_int_equal(r[3].lock_fd, -1);
	/* Dropped, a slot is there again, and only that one. */
	uid_t freed = r[1].base;
	al_uidrange_drop(&r[1]);
	al_uidrange_drop(&r[1]); /* twice is harmless */
	assert_int_equal(r[1].lock_fd, -1);
	assert_int_equal(al_uidrange_take(&pool, "y", &r[1], &err), 0);
	assert_int_equal(r[1].base, freed);
	for (int i = 0; i < 3; i++)
		al_uidrange_drop(&r[i]);
	al_uidrange_drop(NULL);
}

/* A slot a live process holds is never handed out; it is free as soon as
 * the holder dies, with no clean-up. */
static void test_held_by_a_process_until_it_dies(void **state)
{
	(void)state;
	al_err err = {0};
	int ready[2], go[2];
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(go), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		al_uidrange mine;
		char c;
		if (al_uidrange_take(&pool, "held", &mine, &err) < 0)
			_exit(1);
		(void)!write(ready[1], &mine.base, sizeof mine.base);
		(void)!read(go[0], &c, 1);
		_exit(0); /* dies holding it */
	}
	uid_t held;
	assert_int_equal(read(ready[0], &held, sizeof held), sizeof held);
	al_uidrange r[3];
	for (int i = 0; i < 2; i++) {
		assert_int_equal(al_uidrange_take(&pool, "held", &r[i], &err),
				 0);
		assert_int_not_equal(r[i].base, held);
	}
	assert_int_equal(al_uidrange_take(&pool, "held", &r[2], &err), -1);
	assert_int_equal(write(go[1], "x", 1), 1);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(al_uidrange_take(&pool, "held", &r[2], &err), 0);
	assert_int_equal(r[2].base, held);
	for (int i = 0; i < 3; i++)
		al_uidrange_drop(&r[i]);
}

/* A lock directory others could write to is refused, not trusted. */
static void test_unsafe_directory_refused(void **state)
{
	(void)state;
	al_err err = {0};
	al_uidrange r;
	assert_int_equal(chmod(dir, 0777), 0);
	assert_int_equal(al_uidrange_take(&pool, "x", &r, &err), -1);
	assert_int_equal(err.code, AL_EPERM);
	assert_int_equal(r.lock_fd, -1);
	assert_int_equal(chmod(dir, 0700), 0);
}

/* The two pools lie apart. */
static void test_pools_are_apart(void **state)
{
	(void)state;
	uint64_t vm_end = (uint64_t)al_uidrange_vm.base +
			  (uint64_t)al_uidrange_vm.size * al_uidrange_vm.slots;
	uint64_t ns_end = (uint64_t)al_uidrange_ns.base +
			  (uint64_t)al_uidrange_ns.size * al_uidrange_ns.slots;
	assert_true(vm_end <= al_uidrange_ns.base ||
		    ns_end <= al_uidrange_vm.base);
	assert_true(ns_end <= 0x7FFE0000u); /* systemd's foreign range */
	assert_int_equal(al_uidrange_ns.size, 65536);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slots_are_disjoint_and_run_out),
		cmocka_unit_test(test_held_by_a_process_until_it_dies),
		cmocka_unit_test(test_unsafe_directory_refused),
		cmocka_unit_test(test_pools_are_apart),
	};
	return cmocka_run_group_tests_name("uidrange", tests, setup, teardown);
}
