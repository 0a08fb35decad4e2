/* warmpool: the pool's target follows the recent creates between its
 * bounds; a tick starts or retires the difference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sandbox/warmpool.h"

static void test_target_is_recent_creates_within_bounds(void **state)
{
	(void)state;
	/* Idle: the minimum. */
	assert_int_equal(al_warmpool_target(2, 8, 0), 2);
	assert_int_equal(al_warmpool_target(2, 8, 1), 2);
	/* Some creates: as many as came. */
	assert_int_equal(al_warmpool_target(2, 8, 5), 5);
	/* A burst: the maximum. */
	assert_int_equal(al_warmpool_target(2, 8, 200), 8);
	assert_int_equal(al_warmpool_target(2, 8, UINT32_MAX), 8);
	/* Pool off stays off whatever the rate is, unless a maximum asks
	 * for growth. */
	assert_int_equal(al_warmpool_target(0, 0, 50), 0);
	assert_int_equal(al_warmpool_target(0, 4, 0), 0);
	assert_int_equal(al_warmpool_target(0, 4, 3), 3);
}

static void test_max_below_min_is_min(void **state)
{
	(void)state;
	assert_int_equal(al_warmpool_target(4, 1, 0), 4);
	assert_int_equal(al_warmpool_target(4, 1, 100), 4);
}

static void test_cap_holds_growth_when_memory_is_short(void **state)
{
	(void)state;
	assert_int_equal(al_warmpool_cap(2, 8, 20000, 24000), 8);
	assert_int_equal(al_warmpool_cap(2, 8, 4800, 24000), 8);
	assert_int_equal(al_warmpool_cap(2, 8, 4799, 24000), 2);
	assert_int_equal(al_warmpool_cap(2, 8, 0, 24000), 2);
	/* /proc/meminfo unreadable: no cap. */
	assert_int_equal(al_warmpool_cap(2, 8, 0, 0), 8);
}

static void test_plan_starts_missing_in_one_tick(void **state)
{
	(void)state;
	uint32_t start = 99, retire = 99;
	al_warmpool_plan(0, 6, 0, &start, &retire);
	assert_int_equal(start, 6);
	assert_int_equal(retire, 0);
	al_warmpool_plan(1, 6, 4, &start, &retire);
	assert_int_equal(start, 4);
	assert_int_equal(retire, 0);
	al_warmpool_plan(6, 6, 4, &start, &retire);
	assert_int_equal(start, 0);
	assert_int_equal(retire, 0);
}

static void test_plan_retires_extras(void **state)
{
	(void)state;
	uint32_t start = 99, retire = 99;
	al_warmpool_plan(8, 2, 4, &start, &retire);
	assert_int_equal(start, 0);
	assert_int_equal(retire, 6);
	al_warmpool_plan(3, 0, 0, &start, &retire);
	assert_int_equal(start, 0);
	assert_int_equal(retire, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_target_is_recent_creates_within_bounds),
		cmocka_unit_test(test_max_below_min_is_min),
		cmocka_unit_test(test_cap_holds_growth_when_memory_is_short),
		cmocka_unit_test(test_plan_starts_missing_in_one_tick),
		cmocka_unit_test(test_plan_retires_extras),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
