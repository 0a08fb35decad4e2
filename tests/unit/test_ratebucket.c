/* The token bucket (core/base/ratebucket.h) shared by the credential rate
 * limits and the mint service: a full start, refill over time, the wait
 * it names, no credit for a clock that went back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/ratebucket.h"

static void test_burst_then_refill(void **state)
{
	(void)state;
	al_ratebucket b = {0};
	int64_t wait = 0, t = 1000;
	/* 3 requests per 60 s: a burst of 3, then one every 20 s. */
	double burst = 3, rate = 3.0 / 60;
	for (int i = 0; i < 3; i++)
		assert_int_equal(al_ratebucket_take(&b, burst, rate, t, &wait),
				 1);
	assert_int_equal(al_ratebucket_take(&b, burst, rate, t, &wait), 0);
	assert_true(wait > 19000 && wait <= 20001);
	assert_int_equal(al_ratebucket_take(&b, burst, rate, t + 10000, &wait),
			 0);
	assert_true(wait > 9000 && wait <= 10001);
	assert_int_equal(al_ratebucket_take(&b, burst, rate, t + 20001, &wait),
			 1);
	assert_int_equal(al_ratebucket_take(&b, burst, rate, t + 20001, &wait),
			 0);
	/* Long idle: back to the burst, never above. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(al_ratebucket_take(&b, burst, rate,
						    t + 10000000, &wait),
				 1);
	assert_int_equal(al_ratebucket_take(&b, burst, rate, t + 10000000,
					    &wait),
			 0);
}

static void test_clock_back(void **state)
{
	(void)state;
	al_ratebucket b = {0};
	assert_int_equal(al_ratebucket_take(&b, 1, 1, 5000, NULL), 1);
	assert_int_equal(al_ratebucket_take(&b, 1, 1, 5000, NULL), 0);
	/* An earlier time gives nothing back. */
	assert_int_equal(al_ratebucket_take(&b, 1, 1, 1000, NULL), 0);
	assert_int_equal(al_ratebucket_take(&b, 1, 1, 2001, NULL), 0);
	assert_int_equal(al_ratebucket_take(&b, 1, 1, 6001, NULL), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst_then_refill),
		cmocka_unit_test(test_clock_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
