/* core/memshare: what of a sandbox's memory limit may outlive its
 * processes (tmpfs, SysV shm and message queues) leaves room for them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "host/memshare.h"

#define MIB (1ull << 20)

static void test_default_limit(void **state)
{
	(void)state;
	al_memshare m;
	al_memshare_of(512 * MIB, 4096, &m);
	assert_int_equal(m.shm_bytes, 256 * MIB);
	assert_int_equal(m.shm_inodes, 4096); /* one per 64 KiB */
	assert_int_equal(m.sysv_bytes, 128 * MIB);
	assert_int_equal(m.sysv_pages, 128 * MIB / 4096);
	assert_int_equal(m.msg_queues, 2048); /* 32 MiB of 16 KiB queues */
}

/* Whatever the limit, all stores filled leave at least 3/16 of it. */
static void test_room_left(void **state)
{
	(void)state;
	static const uint64_t limits[] = {16 * MIB, 17 * MIB + 4095, 64 * MIB,
					  1000 * MIB, 1024 * 1024 * MIB};
	for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
		al_memshare m;
		al_memshare_of(limits[i], 4096, &m);
		uint64_t held = m.shm_bytes + m.sysv_pages * 4096 +
				m.msg_queues * AL_MEMSHARE_MSGMNB;
		assert_true(held <= limits[i] - limits[i] / 16 * 3);
		assert_true(m.sysv_pages * 4096 <= m.sysv_bytes);
		assert_true(m.shm_bytes > 0 && m.sysv_pages > 0);
	}
}

/* The smallest limit still gets a usable /dev/shm and a queue. */
static void test_small_limit(void **state)
{
	(void)state;
	al_memshare m;
	al_memshare_of(16 * MIB, 4096, &m);
	assert_int_equal(m.shm_bytes, 8 * MIB);
	assert_int_equal(m.shm_inodes, 256);
	assert_int_equal(m.msg_queues, 64);
	al_memshare_of(1 * MIB, 65536, &m);
	assert_int_equal(m.shm_inodes, 256);
	assert_int_equal(m.sysv_pages, 4);
	assert_int_equal(m.msg_queues, 4);
	al_memshare_of(128 << 10, 4096, &m);
	assert_int_equal(m.msg_queues, 1); /* never 0 */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_limit),
		cmocka_unit_test(test_room_left),
		cmocka_unit_test(test_small_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
