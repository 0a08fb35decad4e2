/* jsonw: what it writes parses (json-c) back to the same values, with
 * quotes, backslashes and control bytes escaped; printable fields are
 * cut and their other bytes become '?'; an object too long for its
 * buffer fails instead of being cut. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "base/jsonw.h"

static const char *str_of(json_object *o, const char *k)
{
	json_object *v;
	assert_true(json_object_object_get_ex(o, k, &v));
	return json_object_get_string(v);
}

static void test_values_parse_back(void **state)
{
	(void)state;
	char buf[512];
	al_jsonw w;
	al_jsonw_start(&w, buf, sizeof buf);
	al_jsonw_str(&w, "s", "a\"b\\c\x01\n\x1f/\xc3\xa9");
	al_jsonw_printable(&w, "p", "GET \"/x\"\t\x7f\xc3\xa9", 64);
	al_jsonw_printable(&w, "cut", "abcdef", 4);
	al_jsonw_int(&w, "i", -42);
	al_jsonw_bool(&w, "t", true);
	al_jsonw_bool(&w, "f", false);
	al_jsonw_null(&w, "n");
	al_jsonw_str(&w, "e", "");
	long n = al_jsonw_end(&w);
	assert_true(n > 0);
	assert_int_equal((size_t)n, strlen(buf));
	json_object *o = json_tokener_parse(buf);
	assert_non_null(o);
	assert_string_equal(str_of(o, "s"), "a\"b\\c\x01\n\x1f/\xc3\xa9");
	assert_string_equal(str_of(o, "p"), "GET \"/x\"????");
	assert_string_equal(str_of(o, "cut"), "abc");
	assert_string_equal(str_of(o, "i"), "-42");
	assert_string_equal(str_of(o, "t"), "true");
	assert_string_equal(str_of(o, "f"), "false");
	json_object *v;
	assert_true(json_object_object_get_ex(o, "n", &v));
	assert_null(v);
	assert_string_equal(str_of(o, "e"), "");
	assert_int_equal(json_object_object_length(o), 8);
	json_object_put(o);
	/* Control bytes come out as \u escapes, nothing raw. */
	for (long i = 0; i < n; i++)
		assert_true((unsigned char)buf[i] >= 0x20);
}

/* Every byte value: a string keeps each one (escaped where JSON asks),
 * a printable one turns each outside 0x20..0x7e into '?'. */
static void test_every_byte(void **state)
{
	(void)state;
	char in[256], want[256], buf[2048];
	for (int c = 1; c < 256; c++) {
		in[c - 1] = (char)c;
		want[c - 1] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	in[255] = want[255] = '\0';
	al_jsonw w;
	al_jsonw_start(&w, buf, sizeof buf);
	al_jsonw_str(&w, "s", in);
	al_jsonw_printable(&w, "p", in, sizeof in);
	assert_true(al_jsonw_end(&w) > 0);
	json_object *o = json_tokener_parse(buf);
	assert_non_null(o);
	assert_string_equal(str_of(o, "s"), in);
	assert_string_equal(str_of(o, "p"), want);
	json_object_put(o);
}

static void test_empty_object(void **state)
{
	(void)state;
	char buf[3];
	al_jsonw w;
	al_jsonw_start(&w, buf, sizeof buf);
	assert_int_equal(al_jsonw_end(&w), 2);
	assert_string_equal(buf, "{}");
}

/* Integers at their edges read back as snprintf writes them. */
static void test_integers_exact(void **state)
{
	(void)state;
	static const long long v[] = {
		0,	 7,	   -7,	      10,	 -10,	       99,
		1000000, -1234567, LLONG_MAX, LLONG_MIN, LLONG_MIN + 1};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		char buf[64], want[64];
		al_jsonw w;
		al_jsonw_start(&w, buf, sizeof buf);
		al_jsonw_int(&w, "i", v[i]);
		assert_true(al_jsonw_end(&w) > 0);
		snprintf(want, sizeof want, "{\"i\":%lld}", v[i]);
		assert_string_equal(buf, want);
		json_object *o = json_tokener_parse(buf), *x;
		assert_non_null(o);
		assert_true(json_object_object_get_ex(o, "i", &x));
		assert_true(json_object_get_int64(x) == v[i]);
		json_object_put(o);
	}
}

static void test_too_long_fails_whole(void **state)
{
	(void)state;
	char buf[32];
	al_jsonw w;
	al_jsonw_start(&w, buf, sizeof buf);
	al_jsonw_str(&w, "a", "0123456789");
	al_jsonw_str(&w, "b", "0123456789");
	assert_int_equal(al_jsonw_end(&w), -1);
	/* Exactly full: 31 bytes and the NUL. */
	al_jsonw_start(&w, buf, sizeof buf);
	al_jsonw_str(&w, "a", "01234567890123456789012");
	assert_int_equal(al_jsonw_end(&w), 31);
	assert_int_equal(strlen(buf), 31);
	al_jsonw_start(&w, buf, sizeof buf);
	al_jsonw_str(&w, "a", "012345678901234567890123");
	assert_int_equal(al_jsonw_end(&w), -1);
	/* An escape that does not fit fails too. */
	al_jsonw_start(&w, buf, sizeof buf);
	al_jsonw_str(&w, "a", "0123456789012345678901\x01");
	assert_int_equal(al_jsonw_end(&w), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values_parse_back),
		cmocka_unit_test(test_every_byte),
		cmocka_unit_test(test_empty_object),
		cmocka_unit_test(test_integers_exact),
		cmocka_unit_test(test_too_long_fails_whole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
