/* core/hex: hex digits and the byte strings spelled with them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/hex.h"

static void test_digits_both_cases(void **state)
{
	(void)state;
	assert_int_equal(al_hex_digit('0'), 0);
	assert_int_equal(al_hex_digit('9'), 9);
	assert_int_equal(al_hex_digit('a'), 10);
	assert_int_equal(al_hex_digit('F'), 15);
	assert_int_equal(al_hex_digit('g'), -1);
	assert_int_equal(al_hex_digit('G'), -1);
	assert_int_equal(al_hex_digit('/'), -1);
	assert_int_equal(al_hex_digit(':'), -1);
	assert_int_equal(al_hex_digit('\0'), -1);
	assert_int_equal(al_hex_digit(0xff), -1);
}

static void test_decode(void **state)
{
	(void)state;
	uint8_t out[3] = {0};
	assert_int_equal(al_hex_decode("00fFa5", 3, out), 0);
	assert_int_equal(out[0], 0x00);
	assert_int_equal(out[1], 0xff);
	assert_int_equal(out[2], 0xa5);
}

static void test_decode_refuses_non_digits(void **state)
{
	(void)state;
	uint8_t out[2] = {7, 7};
	assert_int_equal(al_hex_decode("0x12", 2, out), -1);
	assert_int_equal(al_hex_decode("12 3", 2, out), -1);
	/* A short string stops at its NUL instead of reading past it. */
	assert_int_equal(al_hex_decode("1", 2, out), -1);
	assert_int_equal(al_hex_decode("", 1, out), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_digits_both_cases),
		cmocka_unit_test(test_decode),
		cmocka_unit_test(test_decode_refuses_non_digits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
