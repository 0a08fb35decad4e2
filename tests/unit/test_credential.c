/* The credential bodies and names that need no database: what a create
 * and a rotate accept, the defaults, what they refuse (without echoing
 * the value), and the environment variable of a name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "model/credential.h"

static int parse(const char *body, int rotate, al_cred_spec *s, al_err *err)
{
	return al_cred_spec_parse(body, strlen(body), rotate, s, err);
}

static void test_create_full(void **st)
{
	(void)st;
	al_cred_spec s;
	al_err err;
	assert_int_equal(
		parse("{\"name\":\"git_hub-2\",\"value\":\"ghp_abc\","
		      "\"scope\":{\"template\":\"node\"},\"inject\":{\"hosts\":"
		      "[\"API.GitHub.com.\",\"*.github.com\"],\"header\":"
		      "\"Authorization\",\"format\":\"Bearer {value}\"},"
		      "\"rate_limit\":{\"requests\":100,\"per_seconds\":60}}",
		      0, &s, &err),
		0);
	assert_string_equal(s.c.name, "git_hub-2");
	assert_int_equal(s.c.scope, AL_CRED_TEMPLATE);
	assert_string_equal(s.scope_value, "node");
	assert_int_equal(s.c.nhosts, 2);
	assert_string_equal(s.c.hosts[0], "api.github.com");
	assert_string_equal(s.c.hosts[1], "*.github.com");
	assert_string_equal(s.c.header, "Authorization");
	assert_string_equal(s.c.format, "Bearer {value}");
	assert_int_equal(s.c.rate_requests, 100);
	assert_int_equal(s.c.rate_per_seconds, 60);
	assert_int_equal(s.value_len, 7);
	assert_string_equal(s.value, "ghp_abc");
	al_cred_spec_free(&s);
	assert_null(s.value);
}

static void test_defaults_and_scopes(void **st)
{
	(void)st;
	al_cred_spec s;
	al_err err;
	assert_int_equal(parse("{\"name\":\"a\",\"value\":\"v\",\"inject\":"
			       "{\"hosts\":[\"x.test\"]}}",
			       0, &s, &err),
			 0);
	assert_int_equal(s.c.scope, AL_CRED_PROJECT);
	assert_string_equal(s.c.header, "");
	assert_string_equal(s.c.format, "{value}");
	assert_int_equal(s.c.rate_requests, 0);
	al_cred_spec_free(&s);
	assert_int_equal(parse("{\"name\":\"a\",\"value\":\"v\",\"scope\":"
			       "{\"metadata\":{\"team\":\"x\"}},\"inject\":"
			       "{\"hosts\":[\"x.test\"]}}",
			       0, &s, &err),
			 0);
	assert_int_equal(s.c.scope, AL_CRED_METADATA);
	assert_non_null(s.scope_metadata);
	al_cred_spec_free(&s);
	assert_int_equal(parse("{\"name\":\"a\",\"value\":\"v\",\"scope\":"
			       "{\"global\":true},\"inject\":"
			       "{\"hosts\":[\"x.test\"]}}",
			       0, &s, &err),
			 0);
	assert_int_equal(s.c.scope, AL_CRED_GLOBAL);
	al_cred_spec_free(&s);
	/* A global credential is no project's. */
	assert_int_equal(parse("{\"name\":\"a\",\"value\":\"v\",\"scope\":"
			       "{\"global\":true},\"project\":\"p\",\"inject\":"
			       "{\"hosts\":[\"x.test\"]}}",
			       0, &s, &err),
			 -1);
}

static void test_rotate(void **st)
{
	(void)st;
	al_cred_spec s;
	al_err err;
	assert_int_equal(parse("{\"value\":\"new\"}", 1, &s, &err), 0);
	assert_int_equal(s.has_inject, 0);
	assert_int_equal(s.has_rate, 0);
	al_cred_spec_free(&s);
	assert_int_equal(parse("{\"value\":\"new\",\"rate_limit\":null}", 1, &s,
			       &err),
			 0);
	assert_int_equal(s.has_rate, 1);
	assert_int_equal(s.c.rate_requests, 0);
	al_cred_spec_free(&s);
	/* The name and scope are the row's: not in a rotation. */
	assert_int_equal(parse("{\"value\":\"v\",\"name\":\"b\"}", 1, &s, &err),
			 -1);
	assert_int_equal(err.code, AL_EINVAL);
	assert_int_equal(parse("{\"inject\":{\"hosts\":[\"x.test\"]}}", 1, &s,
			       &err),
			 -1);
}

static void test_refused_without_the_value(void **st)
{
	(void)st;
	static const char *const bad[] = {
		"{\"name\":\"UP\",\"value\":\"SECRETVAL\",\"inject\":{\"hosts\":"
		"[\"x.test\"]}}",
		"{\"name\":\"a\",\"value\":\"SECRETVAL\\r\\nX: y\",\"inject\":"
		"{\"hosts\":[\"x.test\"]}}",
		"{\"name\":\"a\",\"value\":\"SECRETVAL\\u0000\",\"inject\":"
		"{\"hosts\":[\"x.test\"]}}",
		"{\"name\":\"a\",\"value\":\"SECRETVAL\",\"inject\":{\"hosts\":"
		"[\"*\"]}}",
		"{\"name\":\"a\",\"value\":\"SECRETVAL\",\"inject\":{\"hosts\":"
		"[]}}",
		"{\"name\":\"a\",\"value\":\"SECRETVAL\"}",
		"{\"name\":\"a\",\"value\":\"SECRETVAL\",\"inject\":{\"hosts\":"
		"[\"x.test\"],\"header\":\"Content-Length\"}}",
		"{\"name\":\"a\",\"value\":\"SECRETVAL\",\"inject\":{\"hosts\":"
		"[\"x.test\"],\"header\":\"X:Y\"}}",
		"{\"name\":\"a\",\"value\":\"SECRETVAL\",\"inject\":{\"hosts\":"
		"[\"x.test\"],\"format\":\"Bearer\"}}",
		"{\"name\":\"a\",\"value\":\"SECRETVAL\",\"inject\":{\"hosts\":"
		"[\"x.test\"],\"format\":\"{value}\\n\"}}",
		"{\"name\":\"a\",\"value\":\"SECRETVAL\",\"inject\":{\"hosts\":"
		"[\"x.test\"]},\"rate_limit\":{\"requests\":1}}",
		"{\"name\":\"a\",\"value\":\"SECRETVAL\",\"inject\":{\"hosts\":"
		"[\"x.test\"]},\"scope\":{\"metadata\":{}}}",
		"{\"name\":\"a\",\"value\":\"SECRETVAL\",\"inject\":{\"hosts\":"
		"[\"x.test\"]},\"scope\":{\"project\":true,\"global\":true}}",
		"{\"name\":\"a\",\"value\":\"\",\"inject\":{\"hosts\":"
		"[\"x.test\"]}}",
		"[\"SECRETVAL\"]",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		al_cred_spec s;
		al_err err;
		assert_int_equal(parse(bad[i], 0, &s, &err), -1);
		assert_int_equal(err.code, AL_EINVAL);
		assert_null(strstr(err.msg, "SECRETVAL"));
		assert_null(s.value);
	}
}

static void test_env_name_and_scopes(void **st)
{
	(void)st;
	char out[AL_CRED_ENV_MAX];
	al_credential_env_name("github", out);
	assert_string_equal(out, "AIRLOCK_CRED_GITHUB");
	al_credential_env_name("my-api_key2", out);
	assert_string_equal(out, "AIRLOCK_CRED_MY_API_KEY2");
	char longname[AL_CRED_NAME_MAX + 1];
	memset(longname, 'a', AL_CRED_NAME_MAX);
	longname[AL_CRED_NAME_MAX] = '\0';
	al_credential_env_name(longname, out);
	assert_int_equal(strlen(out), 13 + AL_CRED_NAME_MAX);
	for (int k = AL_CRED_GLOBAL; k <= AL_CRED_SANDBOX; k++)
		assert_int_equal(al_cred_scope_from_name(al_cred_scope_name(k)),
				 k);
	assert_int_equal(al_cred_scope_from_name("galaxy"), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_full),
		cmocka_unit_test(test_defaults_and_scopes),
		cmocka_unit_test(test_rotate),
		cmocka_unit_test(test_refused_without_the_value),
		cmocka_unit_test(test_env_name_and_scopes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
