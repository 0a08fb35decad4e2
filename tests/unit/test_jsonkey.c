/* core/jsonkey: a member named twice in any object of a body from
 * outside is refused, by every parser that takes one (API bodies,
 * credential specs, settings, agent frames), comparing names as json-c
 * decodes them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/json.h"
#include "base/jsonkey.h"
#include "model/credential.h"
#include "model/project.h"
#include "proto/agentproto.h"
#include "sandbox/sandbox_req.h"

/* Refused by al_json_parse_object with a message holding want (and
 * "repeated"), or accepted when want is NULL. */
static void expect(const char *body, const char *want)
{
	al_err err = {0};
	json_object *o = al_json_parse_object(body, strlen(body), &err);
	if (want == NULL) {
		if (o == NULL)
			fail_msg("refused %s: %s", body, err.msg);
		json_object_put(o);
		return;
	}
	if (o != NULL)
		fail_msg("accepted %s", body);
	assert_int_equal(err.code, AL_EINVAL);
	if (strstr(err.msg, want) == NULL ||
	    strstr(err.msg, "repeated") == NULL)
		fail_msg("%s: message '%s' lacks '%s'", body, err.msg, want);
}

static void test_repeats_refused(void **state)
{
	(void)state;
	/* Issue 23: last wins in json-c, so this ran echo. */
	expect("{\"cmd\":[\"id\"],\"cmd\":[\"echo\",\"x\"]}", "member 'cmd'");
	expect("{\"a\":1,\"a\":1}", "member 'a'"); /* same value too */
	expect(" {\"a\":1, \"b\":2 ,\"a\" : 3} \n", "member 'a'");
	/* Nested: in env, two levels down, in an array's object. */
	expect("{\"env\":{\"A\":\"1\",\"B\":\"2\",\"A\":\"3\"}}",
	       "member 'A' is repeated in 'env'");
	expect("{\"network\":{\"dns\":{\"x\":1,\"x\":2}}}",
	       "member 'x' is repeated in 'dns'");
	expect("{\"allow\":[{\"h\":1},{\"h\":1,\"h\":2}]}",
	       "member 'h' is repeated in 'allow'");
	expect("{\"a\":[[{\"k\":1,\"k\":2}]]}",
	       "member 'k' is repeated in 'a'");
	/* Decoded names: an escape repeats its character. */
	expect("{\"\\u0063md\":[\"id\"],\"cmd\":[\"x\"]}", "member 'cmd'");
	expect("{\"cmd\":[\"id\"],\"c\\u006Dd\":[\"x\"]}", "member 'cmd'");
	expect("{\"a\\/b\":1,\"a/b\":2}", "a member name");
	/* Not tame: not echoed (a name may hold anything). */
	expect("{\"\\u00e9\":1,\"\xc3\xa9\":2}", "a member name is repeated");
	expect("{\"\\ud83d\\ude00\":1,\"\xf0\x9f\x98\x80\":2}",
	       "a member name is repeated");
	expect("{\"env\":{\"a b\":\"1\",\"a\\u0020b\":\"2\"}}",
	       "a member name is repeated in 'env'");
	/* The member after a nested object is still the outer object's. */
	expect("{\"a\":{\"b\":1},\"a\":{}}", "member 'a'");
	expect("{\"a\":{\"b\":{\"c\":[1,{\"d\":2}]}},\"e\":1,\"e\":2}",
	       "member 'e'");
}

static void test_distinct_accepted(void **state)
{
	(void)state;
	expect("{}", NULL);
	expect("", NULL);
	expect("{\"a\":{\"k\":1},\"b\":{\"k\":1},\"k\":[{\"k\":1},{\"k\":2}]}",
	       NULL);
	/* Names that only look alike, values that look like names. */
	expect("{\"a\":\"a\",\"A\":\"b\",\"b\":\"a\",\"a \":1}", NULL);
	expect("{\"s\":\"{\\\"s\\\":1,\\\"s\\\":2}\",\"t\":\"\\\\\"}", NULL);
	expect("{\"q\":\"\\\"\",\"r\":[\"\\\\\",\"}\",\"{\"],\"x\":1}", NULL);
	expect("{\"\\u00e9\":1,\"e\":2,\"\\u00c9\":3}", NULL);
	/* An escaped name with bytes that are not UTF-8, which a parse
	 * without UTF-8 checks takes (an agent frame the fuzzer found):
	 * compared, not refused as malformed. */
	static const char odd[] = "{\"X\xdf\xdf!\\u0019\xdf\":\"1\",\"X\":2}";
	static const char twice[] = "{\"X\xdf\\u0019\":1,\"X\xdf\\u0019\":2}";
	al_err err = {0};
	assert_int_equal(al_json_keys_unique(odd, strlen(odd), 0, &err), 0);
	assert_int_equal(al_json_keys_unique(twice, strlen(twice), 0, &err),
			 -1);
	assert_non_null(strstr(err.msg, "repeated"));
}

/* Where json-c reads two spellings as one name, so does the check. */
static void test_mirrors_json_c(void **state)
{
	(void)state;
	static const char *const one[] = {
		"{\"a\\u0000b\":1,\"a\":2}", /* json-c's names end at NUL */
		"{\"\\u0000\":1,\"\":2}",
	};
	for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
		json_object *o = json_tokener_parse(one[i]);
		assert_non_null(o);
		assert_int_equal(json_object_object_length(o), 1);
		json_object_put(o);
		al_err err = {0};
		assert_int_equal(al_json_keys_unique(one[i], strlen(one[i]), 0,
						     &err),
				 -1);
		assert_int_equal(err.code, AL_EINVAL);
	}
}

/* Every body parser goes through the check. */
static void test_every_parser(void **state)
{
	(void)state;
	al_err err = {0};
	al_create_req cr;
	const char *b = "{\"template\":\"minimal\",\"metadata\":{\"t\":\"a\","
			"\"t\":\"b\"}}";
	assert_int_equal(al_create_req_parse(b, strlen(b), 300, 86400, &cr,
					     &err),
			 -1);
	assert_non_null(strstr(err.msg, "'t' is repeated in 'metadata'"));

	al_exec_req er;
	b = "{\"cmd\":[\"id\"],\"cmd\":[\"echo\",\"x\"]}";
	assert_int_equal(al_exec_req_parse(b, strlen(b), &er, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	assert_non_null(strstr(err.msg, "'cmd'"));

	al_quota_update u;
	b = "{\"memory_mb\":1,\"memory_mb\":99999}";
	assert_int_equal(al_quota_update_parse(b, strlen(b), &u, &err), -1);
	assert_non_null(strstr(err.msg, "'memory_mb'"));

	al_cred_spec s;
	b = "{\"name\":\"n\",\"value\":\"v\",\"inject\":{\"hosts\":[\"a.test\"],"
	    "\"header\":\"X-A\",\"header\":\"Authorization\"}}";
	assert_int_equal(al_cred_spec_parse(b, strlen(b), 0, &s, &err), -1);
	assert_non_null(strstr(err.msg, "'header' is repeated in 'inject'"));
	b = "{\"value\":\"v\",\"value\":\"w\"}";
	assert_int_equal(al_cred_spec_parse(b, strlen(b), 1, &s, &err), -1);
	assert_non_null(strstr(err.msg, "'value'"));

	/* A hostile peer's frame (here an agent's ERROR). */
	al_err got;
	b = "{\"code\":\"not_found\",\"message\":\"x\",\"code\":\"internal\"}";
	assert_int_equal(al_error_unpack(b, strlen(b), &got, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	assert_non_null(strstr(err.msg, "'code'"));
	b = "{\"code\":\"not_found\",\"message\":\"x\"}";
	assert_int_equal(al_error_unpack(b, strlen(b), &got, &err), 0);
	assert_int_equal(got.code, AL_ENOENT);
}

/* Many members: a repeat at the end is found (a hash of names per
 * object, not a pairwise comparison). */
static void test_many_members(void **state)
{
	(void)state;
	enum { N = 60000 };
	size_t cap = (size_t)N * 16 + 64, w = 0;
	char *b = malloc(cap);
	assert_non_null(b);
	b[w++] = '{';
	for (int i = 0; i < N; i++)
		w += (size_t)snprintf(b + w, cap - w, "\"k%d\":%d,", i, i);
	int tail = snprintf(b + w, cap - w, "\"k%d\":0}", N / 2);
	al_err err = {0};
	assert_int_equal(al_json_keys_unique(b, w + (size_t)tail, 0, &err), -1);
	assert_non_null(strstr(err.msg, "'k30000'"));
	snprintf(b + w, cap - w, "\"k%d\":0}", N);
	assert_int_equal(al_json_keys_unique(b, strlen(b), 0, &err), 0);
	free(b);
}

/* Text that is not strict JSON is never read out of bounds. */
static void test_not_json(void **state)
{
	(void)state;
	static const char *const odd[] = {
		"{\"a", "{\"a\\",     "}}}",	       "]", "{\"a\":1", "[[[[",
		"\"\\", "{\"a\":1,}", "{'a':1,'a':2}",
	};
	for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
		al_err err = {0};
		(void)al_json_keys_unique(odd[i], strlen(odd[i]), 0, &err);
	}
	char deep[AL_JSONKEY_DEPTH_MAX + 2];
	memset(deep, '[', sizeof deep - 1);
	deep[sizeof deep - 1] = '\0';
	al_err err = {0};
	assert_int_equal(al_json_keys_unique(deep, strlen(deep), 0, &err), -1);
	assert_non_null(strstr(err.msg, "nested"));
}

static void test_tame(void **state)
{
	(void)state;
	assert_true(al_json_key_tame("cmd"));
	assert_true(al_json_key_tame("metadata.team-1_x"));
	assert_false(al_json_key_tame(""));
	assert_false(al_json_key_tame("a b"));
	assert_false(al_json_key_tame(
		"ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"aaaaaaaaaaaaaaaaaaaaaaa"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_repeats_refused),
		cmocka_unit_test(test_distinct_accepted),
		cmocka_unit_test(test_mirrors_json_c),
		cmocka_unit_test(test_every_parser),
		cmocka_unit_test(test_many_members),
		cmocka_unit_test(test_not_json),
		cmocka_unit_test(test_tame),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
