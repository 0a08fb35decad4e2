/* core/query: what a client's query string turns into. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/query.h"

static void test_decodes_pairs(void **state)
{
	(void)state;
	al_query q;
	al_err err = {0};
	assert_int_equal(al_query_parse("path=%2Fa%20b%2Fc+d&list=1&&flag", &q,
					&err),
			 0);
	assert_int_equal(q.n, 3);
	assert_string_equal(al_query_get(&q, "path"), "/a b/c d");
	assert_string_equal(al_query_get(&q, "list"), "1");
	assert_string_equal(al_query_get(&q, "flag"), "");
	assert_null(al_query_get(&q, "missing"));
	al_query_free(&q);
	assert_int_equal(q.n, 0);
}

static void test_empty(void **state)
{
	(void)state;
	al_query q;
	assert_int_equal(al_query_parse(NULL, &q, NULL), 0);
	assert_int_equal(q.n, 0);
	assert_int_equal(al_query_parse("", &q, NULL), 0);
	assert_int_equal(q.n, 0);
}

static void test_refuses_malformed(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"path=%00",   /* would smuggle a NUL past C strings */
		"path=%zz",   /* not hex */
		"path=abc%4", /* cut escape */
		"a=1&b=%",    /* bare percent */
		"%00=x",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		al_query q;
		al_err err = {0};
		assert_int_equal(al_query_parse(bad[i], &q, &err), -1);
		assert_int_equal(err.code, AL_EINVAL);
		assert_int_equal(q.n, 0);
	}
}

static void test_limits(void **state)
{
	(void)state;
	char qs[AL_QUERY_MAX + 2];
	memset(qs, 'a', sizeof qs - 1);
	qs[sizeof qs - 1] = '\0';
	al_query q;
	al_err err = {0};
	assert_int_equal(al_query_parse(qs, &q, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);

	/* One parameter more than kept is refused, not silently dropped. */
	char many[AL_QPARAMS_MAX * 4 + 8] = "";
	for (int i = 0; i <= AL_QPARAMS_MAX; i++)
		strcat(many, "k=v&");
	assert_int_equal(al_query_parse(many, &q, &err), -1);
	assert_int_equal(q.n, 0);
}

/* One reading of each parameter: a layer in front that keeps the first
 * of two and we the last (or the other way) would see another request. */
static void test_refuses_repeats(void **state)
{
	(void)state;
	static const struct {
		const char *qs, *msg;
	} bad[] = {
		{"path=/a&path=/b", "'path'"},
		{"path=/a&list=1&path=/a", "'path'"}, /* same value too */
		{"path=/a&pa%74h=/b", "'path'"},      /* decoded alike */
		{"pa+th=1&pa%20th=2", "a query parameter"},
		{"flag&flag", "'flag'"},
		{"=1&=2", "a query parameter"},
		{"metadata.team=a&metadata.team=b", "'metadata.team'"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		al_query q;
		al_err err = {0};
		if (al_query_parse(bad[i].qs, &q, &err) != -1)
			fail_msg("accepted %s", bad[i].qs);
		assert_int_equal(err.code, AL_EINVAL);
		assert_int_equal(q.n, 0);
		if (strstr(err.msg, bad[i].msg) == NULL ||
		    strstr(err.msg, "repeated") == NULL)
			fail_msg("%s: '%s'", bad[i].qs, err.msg);
	}
	/* Keys that differ only in case or after decoding are two. */
	al_query q;
	al_err err = {0};
	assert_int_equal(al_query_parse("path=1&Path=2&pat%68s=3", &q, &err),
			 0);
	assert_int_equal(q.n, 3);
	assert_string_equal(al_query_get(&q, "paths"), "3");
	al_query_free(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decodes_pairs),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_refuses_malformed),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_refuses_repeats),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
