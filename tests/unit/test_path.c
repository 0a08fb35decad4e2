/* API path validation: what gets a 422 and what the agent is sent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/path.h"

static void expect_norm(const char *in, const char *want)
{
	char out[AL_API_PATH_MAX + 2];
	al_err err;
	al_err_clear(&err);
	if (al_path_normalize(in, out, sizeof out, &err) != 0)
		fail_msg("'%s' rejected: %s", in, err.msg);
	assert_string_equal(out, want);
	assert_int_equal(al_path_check(in, &err), 0);
}

static void expect_reject(const char *in, const char *msg_part)
{
	char out[AL_API_PATH_MAX + 2];
	al_err err;
	al_err_clear(&err);
	assert_int_equal(al_path_normalize(in, out, sizeof out, &err), -1);
	assert_int_equal(err.code, AL_EPATH);
	assert_int_equal(al_code_http_status(err.code), 422);
	if (strstr(err.msg, msg_part) == NULL)
		fail_msg("'%s': message '%s' lacks '%s'", in ? in : "(null)",
			 err.msg, msg_part);
	assert_int_equal(al_path_check(in, &err), -1);
}

static void test_normalises(void **state)
{
	(void)state;
	expect_norm("/", "/");
	expect_norm("//", "/");
	expect_norm("/tmp", "/tmp");
	expect_norm("/tmp/", "/tmp");
	expect_norm("//tmp///a//b/", "/tmp/a/b");
	expect_norm("/./tmp/./a/.", "/tmp/a");
	expect_norm("/a/...", "/a/...");
	expect_norm("/a/..b/c..", "/a/..b/c..");
	expect_norm("/.hidden", "/.hidden");
	expect_norm("/ü/ß", "/ü/ß");
	expect_norm("/with space", "/with space");
}

static void test_rejects(void **state)
{
	(void)state;
	expect_reject(NULL, "empty");
	expect_reject("", "empty");
	expect_reject("tmp/a", "absolute");
	expect_reject("./a", "absolute");
	expect_reject("/..", "'..'");
	expect_reject("/a/../b", "'..'");
	expect_reject("/a/..", "'..'");
	expect_reject("/a/b/../../../etc/passwd", "'..'");
	expect_reject("//..//", "'..'");
	expect_reject("/a\nb", "control");
	expect_reject("/a\tb", "control");
	expect_reject("/a\x7f", "control");
	expect_reject("/a\x01", "control");
}

static void test_length(void **state)
{
	(void)state;
	char *p = malloc(AL_API_PATH_MAX + 2);
	memset(p, 'a', AL_API_PATH_MAX + 1);
	p[0] = '/';
	p[AL_API_PATH_MAX] = '\0'; /* exactly 4096 bytes: fine */
	al_err err;
	assert_int_equal(al_path_check(p, &err), 0);
	p[AL_API_PATH_MAX] = 'a';
	p[AL_API_PATH_MAX + 1] = '\0'; /* 4097 */
	assert_int_equal(al_path_check(p, &err), -1);
	assert_int_equal(err.code, AL_EPATH);
	free(p);
}

static void test_small_buffer(void **state)
{
	(void)state;
	char out[8];
	al_err err;
	assert_int_equal(al_path_normalize("/abc/def", out, sizeof out, &err),
			 -1);
	assert_int_equal(err.code, AL_EPATH);
	assert_int_equal(al_path_normalize("/abc/de", out, sizeof out, &err),
			 0);
	assert_string_equal(out, "/abc/de");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_normalises),
		cmocka_unit_test(test_rejects),
		cmocka_unit_test(test_length),
		cmocka_unit_test(test_small_buffer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
