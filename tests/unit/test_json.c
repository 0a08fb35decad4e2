/* Request-body validation: what each malformed or out-of-bounds body
 * gets, and the UTF-8 / base64 helpers behind exec output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/json.h"
#include "sandbox/sandbox_req.h"

static int create(const char *body, al_create_req *req, al_err *err)
{
	al_err_clear(err);
	return al_create_req_parse(body, strlen(body), 300, 86400, req, err);
}

static void expect_create_bad(const char *body, al_code code,
			      const char *msg_part)
{
	al_create_req req;
	al_err err;
	if (create(body, &req, &err) != -1)
		fail_msg("accepted: %s", body);
	assert_int_equal(err.code, code);
	if (msg_part != NULL && strstr(err.msg, msg_part) == NULL)
		fail_msg("%s: message '%s' lacks '%s'", body, err.msg,
			 msg_part);
	assert_null(req.root);
}

static void test_create_ok(void **state)
{
	(void)state;
	al_create_req req;
	al_err err;
	assert_int_equal(create("{\"template\":\"minimal\",\"timeout\":60,"
				"\"env\":{\"A_1\":\"x\"},\"metadata\":{\"k\":"
				"\"v\"},\"memory_mb\":128,\"pids\":100,"
				"\"cpu_shares\":512,\"disk_mb\":64}",
				&req, &err),
			 0);
	assert_string_equal(req.template_name, "minimal");
	assert_int_equal(req.timeout_s, 60);
	assert_int_equal(req.memory_mb, 128);
	assert_int_equal(req.pids, 100);
	assert_int_equal(req.cpu_shares, 512);
	assert_int_equal(req.disk_mb, 64);
	assert_int_equal(json_object_object_length(req.env), 1);
	assert_int_equal(json_object_object_length(req.metadata), 1);
	assert_null(req.driver);
	al_create_req_free(&req);
	assert_int_equal(create("{\"driver\":\"vm\"}", &req, &err), 0);
	assert_string_equal(req.driver, "vm");
	al_create_req_free(&req);
	assert_int_equal(create("{\"driver\":\"ns\",\"template\":\"x\"}", &req,
				&err),
			 0);
	assert_string_equal(req.driver, "ns");
	al_create_req_free(&req);
	assert_null(req.project);
	assert_int_equal(create("{\"project\":\"team-a\"}", &req, &err), 0);
	assert_string_equal(req.project, "team-a");
	al_create_req_free(&req);
	expect_create_bad("{\"project\":\"Team A\"}", AL_EINVAL, "project");
	expect_create_bad("{\"project\":7}", AL_EINVAL, "project");
	/* null means "not given": the host's default driver. */
	assert_int_equal(create("{\"driver\":null}", &req, &err), 0);
	assert_null(req.driver);
	al_create_req_free(&req);
}

/* "cpus": a number of CPUs to the thousandth, 0.01 at the least. */
static void test_create_cpus(void **state)
{
	(void)state;
	al_create_req req;
	al_err err;
	static const struct {
		const char *body;
		uint32_t millis;
	} ok[] = {
		{"{\"cpus\":0.5}", 500},
		{"{\"cpus\":2}", 2000},
		{"{\"cpus\":1.25}", 1250},
		{"{\"cpus\":0.01}", 10},
		{"{\"cpus\":0.1}", 100},
		{"{\"cpus\":0.3}", 300},
		{"{\"cpus\":1.0}", 1000},
		{"{\"cpus\":5e-1}", 500},
		{"{\"cpus\":1024}", 1024000},
		{"{\"cpus\":null}", 0},
		{"{}", 0},
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		if (create(ok[i].body, &req, &err) != 0)
			fail_msg("refused %s: %s", ok[i].body, err.msg);
		assert_int_equal(req.cpu_millis, ok[i].millis);
		al_create_req_free(&req);
	}
	expect_create_bad("{\"cpus\":0}", AL_EINVAL,
			  "'cpus' must be between 0.01 and 1024");
	expect_create_bad("{\"cpus\":0.009}", AL_EINVAL, "'cpus'");
	expect_create_bad("{\"cpus\":-1}", AL_EINVAL, "'cpus'");
	expect_create_bad("{\"cpus\":1025}", AL_EINVAL, "'cpus'");
	expect_create_bad("{\"cpus\":0.0015}", AL_EINVAL, "3 decimals");
	expect_create_bad("{\"cpus\":\"1\"}", AL_EINVAL, "'cpus'");
	expect_create_bad("{\"cpus\":true}", AL_EINVAL, "'cpus'");
	expect_create_bad("{\"cpus\":1e300}", AL_EINVAL, "'cpus'");
	expect_create_bad("{\"cpus\":99999999999999999999999}", AL_EINVAL,
			  "'cpus'");
	/* What the API answers is what was asked, never 0.50000001. */
	json_object *o = al_json_new_millis(500);
	assert_string_equal(json_object_to_json_string(o), "0.5");
	json_object_put(o);
	o = al_json_new_millis(1250);
	assert_string_equal(json_object_to_json_string(o), "1.25");
	json_object_put(o);
	o = al_json_new_millis(3000);
	assert_string_equal(json_object_to_json_string(o), "3");
	assert_true(json_object_is_type(o, json_type_int));
	json_object_put(o);
}

static void test_create_defaults(void **state)
{
	(void)state;
	al_create_req req;
	al_err err;
	assert_int_equal(create("", &req, &err), 0);
	assert_string_equal(req.template_name, "minimal");
	assert_int_equal(req.timeout_s, 300);
	assert_null(req.env);
	assert_int_equal(req.memory_mb, 0);
	al_create_req_free(&req);
	assert_int_equal(create("  {}  \n", &req, &err), 0);
	al_create_req_free(&req);
	/* null means "not given". */
	assert_int_equal(create("{\"timeout\":null,\"env\":null}", &req, &err),
			 0);
	assert_int_equal(req.timeout_s, 300);
	al_create_req_free(&req);
}

static void test_create_rejects(void **state)
{
	(void)state;
	expect_create_bad("{", AL_EINVAL, "malformed JSON");
	expect_create_bad("{\"a\":1,}", AL_EINVAL, "malformed JSON");
	expect_create_bad("{'template':'x'}", AL_EINVAL, "malformed JSON");
	expect_create_bad("{} {}", AL_EINVAL, "malformed JSON");
	expect_create_bad("{}x", AL_EINVAL, "malformed JSON");
	expect_create_bad("[]", AL_EINVAL, "object");
	expect_create_bad("\"x\"", AL_EINVAL, "object");
	expect_create_bad("{\"template\":\"\xff\"}", AL_EINVAL,
			  "malformed JSON");
	expect_create_bad("{\"timeout\":0}", AL_EINVAL, "'timeout'");
	expect_create_bad("{\"timeout\":86401}", AL_EINVAL, "'timeout'");
	expect_create_bad("{\"timeout\":-1}", AL_EINVAL, "'timeout'");
	expect_create_bad("{\"timeout\":1.5}", AL_EINVAL, "integer");
	expect_create_bad("{\"timeout\":\"60\"}", AL_EINVAL, "integer");
	expect_create_bad("{\"timeout\":true}", AL_EINVAL, "integer");
	expect_create_bad("{\"timeout\":99999999999999999999999}", AL_EINVAL,
			  "'timeout'");
	expect_create_bad("{\"template\":5}", AL_EINVAL, "'template'");
	expect_create_bad("{\"template\":\"\"}", AL_EINVAL, "'template'");
	expect_create_bad("{\"env\":[]}", AL_EINVAL, "'env'");
	expect_create_bad("{\"env\":{\"A\":1}}", AL_EINVAL, "'env'");
	expect_create_bad("{\"env\":{\"1A\":\"x\"}}", AL_EINVAL, "'env'");
	expect_create_bad("{\"env\":{\"A=B\":\"x\"}}", AL_EINVAL, "'env'");
	expect_create_bad("{\"env\":{\"A\":\"x\\u0000y\"}}", AL_EINVAL, "NUL");
	expect_create_bad("{\"metadata\":{\"k\":{}}}", AL_EINVAL, "'metadata'");
	expect_create_bad("{\"metadata\":\"x\"}", AL_EINVAL, "'metadata'");
	expect_create_bad("{\"memory_mb\":1}", AL_EINVAL, "'memory_mb'");
	expect_create_bad("{\"pids\":0}", AL_EINVAL, "'pids'");
	expect_create_bad("{\"cpu_shares\":1}", AL_EINVAL, "'cpu_shares'");
	expect_create_bad("{\"disk_mb\":15}", AL_EINVAL, "'disk_mb'");
	expect_create_bad("{\"disk_mb\":\"64\"}", AL_EINVAL, "'disk_mb'");
	expect_create_bad("{\"disk_mb\":99999999999}", AL_EINVAL, "'disk_mb'");
	expect_create_bad("{\"templat\":\"minimal\"}", AL_EINVAL,
			  "unknown field 'templat'");
	expect_create_bad("{\"driver\":\"kvm\"}", AL_EINVAL, "'driver'");
	expect_create_bad("{\"driver\":\"\"}", AL_EINVAL, "'driver'");
	expect_create_bad("{\"driver\":\"VM\"}", AL_EINVAL, "'driver'");
	expect_create_bad("{\"driver\":\"vm\\u0000\"}", AL_EINVAL, NULL);
	expect_create_bad("{\"driver\":1}", AL_EINVAL, "'driver'");
	expect_create_bad("{\"driver\":[\"vm\"]}", AL_EINVAL, "'driver'");
}

static void test_secrets_not_echoed(void **state)
{
	(void)state;
	al_create_req req;
	al_err err;
	/* A rejected env value must not appear in the message. */
	char body[40000];
	strcpy(body, "{\"env\":{\"TOKEN\":\"");
	size_t n = strlen(body);
	memset(body + n, 's', 33000);
	strcpy(body + n + 33000, "\"}}");
	assert_int_equal(create(body, &req, &err), -1);
	assert_null(strstr(err.msg, "sss"));
	assert_int_equal(create("{\"env\":{\"X\":\"hunter2\",\"Y\":3}}", &req,
				&err),
			 -1);
	assert_null(strstr(err.msg, "hunter2"));
	/* Unknown field names with odd characters are not echoed either. */
	assert_int_equal(create("{\"secret value\":1}", &req, &err), -1);
	assert_null(strstr(err.msg, "secret"));
}

static void test_limits(void **state)
{
	(void)state;
	al_create_req req;
	al_err err;
	/* Too many metadata entries. */
	char body[8192] = "{\"metadata\":{";
	for (int i = 0; i < 65; i++) {
		char e[32];
		snprintf(e, sizeof e, "%s\"k%d\":\"v\"", i ? "," : "", i);
		strcat(body, e);
	}
	strcat(body, "}}");
	assert_int_equal(create(body, &req, &err), -1);
	assert_non_null(strstr(err.msg, "entries"));

	/* Over the body limit: 413, even if it would parse. */
	size_t big = AL_JSON_BODY_MAX + 1;
	char *b = malloc(big + 1);
	memset(b, ' ', big);
	b[0] = '{';
	b[big - 1] = '}';
	b[big] = '\0';
	al_err_clear(&err);
	assert_int_equal(al_create_req_parse(b, big, 300, 86400, &req, &err),
			 -1);
	assert_int_equal(err.code, AL_ETOOBIG);
	assert_int_equal(al_code_http_status(err.code), 413);
	free(b);

	/* Nesting deeper than AL_JSON_DEPTH_MAX is malformed, not a crash. */
	char deep[256] = "{\"metadata\":";
	for (int i = 0; i < 40; i++)
		strcat(deep, "[");
	for (int i = 0; i < 40; i++)
		strcat(deep, "]");
	strcat(deep, "}");
	assert_int_equal(create(deep, &req, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);

	/* Objects and arrays are bounded (json-c's ~800 bytes an object):
	 * 4096 in all pass, one more is 413; brackets in strings do not
	 * count. */
	size_t cap = 16 * AL_JSON_CONTAINERS_MAX + 64;
	char *many = malloc(cap);
	assert_non_null(many);
	for (int extra = 0; extra <= 1; extra++) {
		size_t w = (size_t)snprintf(many, cap, "{\"metadata\":[");
		for (unsigned i = 0;
		     i < AL_JSON_CONTAINERS_MAX - 2 + (unsigned)extra; i++)
			w += (size_t)snprintf(many + w, cap - w, "%s{}",
					      i > 0 ? "," : "");
		snprintf(many + w, cap - w, "]}");
		json_object *o = al_json_parse_object(many, strlen(many), &err);
		if (extra == 0) {
			assert_non_null(o);
			json_object_put(o);
		} else {
			assert_null(o);
			assert_int_equal(err.code, AL_ETOOBIG);
			assert_non_null(strstr(err.msg, "objects and arrays"));
		}
	}
	size_t w = (size_t)snprintf(many, cap, "{\"s\":\"\\\"");
	memset(many + w, '{', 2 * AL_JSON_CONTAINERS_MAX);
	snprintf(many + w + 2 * AL_JSON_CONTAINERS_MAX, 8, "[\"}");
	json_object *o = al_json_parse_object(many, strlen(many), &err);
	assert_non_null(o);
	json_object_put(o);
	free(many);

	/* An embedded NUL byte in the body. */
	static const char nul[] = "{\"template\":\"minimal\"}\0junk";
	assert_int_equal(al_create_req_parse(nul, sizeof nul - 1, 300, 86400,
					     &req, &err),
			 -1);
	assert_int_equal(err.code, AL_EINVAL);
}

static int exec_parse(const char *body, al_exec_req *req, al_err *err)
{
	al_err_clear(err);
	return al_exec_req_parse(body, strlen(body), req, err);
}

static void test_exec(void **state)
{
	(void)state;
	al_exec_req req;
	al_err err;
	assert_int_equal(exec_parse("{\"cmd\":[\"sh\",\"-c\",\"echo hi\"]}",
				    &req, &err),
			 0);
	assert_int_equal(json_object_array_length(req.cmd), 3);
	/* No cwd or user: the template's WORKDIR and USER apply. */
	assert_string_equal(req.cwd, "");
	assert_null(req.user);
	assert_null(req.stdin_data);
	assert_int_equal(req.timeout_s, AL_EXEC_TIMEOUT_DEFAULT);
	/* Background processes live until the sandbox ends by default. */
	assert_int_equal(req.kill_on_exit, 0);
	al_exec_req_free(&req);
	assert_int_equal(exec_parse("{\"cmd\":[\"ls\"],\"kill_on_exit\":true}",
				    &req, &err),
			 0);
	assert_int_equal(req.kill_on_exit, 1);
	al_exec_req_free(&req);

	assert_int_equal(
		exec_parse("{\"cmd\":[\"cat\"],\"cwd\":\"//tmp/./x/\","
			   "\"stdin\":\"a\\u0000b\",\"timeout\":5,"
			   "\"env\":{\"K\":\"v\"},\"user\":\"nobody:nogroup\"}",
			   &req, &err),
		0);
	assert_string_equal(req.cwd, "/tmp/x");
	assert_string_equal(req.user, "nobody:nogroup");
	assert_int_equal(req.stdin_len, 3);
	assert_memory_equal(req.stdin_data, "a\0b", 3);
	assert_int_equal(req.timeout_s, 5);
	assert_int_equal(json_object_object_length(req.env), 1);
	al_exec_req_free(&req);

	static const struct {
		const char *body;
		al_code code;
	} bad[] = {
		{"{}", AL_EINVAL},
		{"{\"cmd\":[]}", AL_EINVAL},
		{"{\"cmd\":\"ls\"}", AL_EINVAL},
		{"{\"cmd\":[1]}", AL_EINVAL},
		{"{\"cmd\":[\"\"]}", AL_EINVAL},
		{"{\"cmd\":[\"a\\u0000b\"]}", AL_EINVAL},
		{"{\"cmd\":[\"ls\"],\"cwd\":\"tmp\"}", AL_EPATH},
		{"{\"cmd\":[\"ls\"],\"cwd\":\"/a/../b\"}", AL_EPATH},
		{"{\"cmd\":[\"ls\"],\"cwd\":3}", AL_EINVAL},
		{"{\"cmd\":[\"ls\"],\"timeout\":0}", AL_EINVAL},
		{"{\"cmd\":[\"ls\"],\"timeout\":86401}", AL_EINVAL},
		{"{\"cmd\":[\"ls\"],\"stdin\":[]}", AL_EINVAL},
		{"{\"cmd\":[\"ls\"],\"env\":{\"A\":null}}", AL_EINVAL},
		{"{\"cmd\":[\"ls\"],\"shell\":true}", AL_EINVAL},
		{"{\"cmd\":[\"ls\"],\"user\":\"\"}", AL_EINVAL},
		{"{\"cmd\":[\"ls\"],\"user\":\"a:b:c\"}", AL_EINVAL},
		{"{\"cmd\":[\"ls\"],\"user\":\"a b\"}", AL_EINVAL},
		{"{\"cmd\":[\"ls\"],\"user\":7}", AL_EINVAL},
		{"{\"cmd\":[\"ls\"],\"kill_on_exit\":1}", AL_EINVAL},
		{"{\"cmd\":[\"ls\"],\"kill_on_exit\":\"true\"}", AL_EINVAL},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (exec_parse(bad[i].body, &req, &err) != -1)
			fail_msg("accepted: %s", bad[i].body);
		if (err.code != bad[i].code)
			fail_msg("%s: code %s, want %s", bad[i].body,
				 al_code_name(err.code),
				 al_code_name(bad[i].code));
	}
}

static void test_utf8(void **state)
{
	(void)state;
	int bad;
	assert_true(al_utf8_valid("", 0));
	assert_true(al_utf8_valid("hi\n", 3));
	assert_true(al_utf8_valid("\xc3\xa9", 2));
	assert_true(al_utf8_valid("\xe2\x82\xac", 3));
	assert_true(al_utf8_valid("\xf0\x9f\x98\x80", 4));
	assert_false(al_utf8_valid("\xff", 1));
	assert_false(al_utf8_valid("\xc0\xaf", 2));	    /* overlong '/' */
	assert_false(al_utf8_valid("\xe0\x80\xaf", 3));	    /* overlong */
	assert_false(al_utf8_valid("\xed\xa0\x80", 3));	    /* surrogate */
	assert_false(al_utf8_valid("\xf4\x90\x80\x80", 4)); /* > 10FFFF */
	assert_false(al_utf8_valid("\xc3", 1));		    /* truncated */
	assert_false(al_utf8_valid("\x80", 1));

	/* A split character is held back, not declared invalid. */
	assert_int_equal(al_utf8_complete_prefix("ab\xe2\x82", 4, &bad), 2);
	assert_false(bad);
	assert_int_equal(al_utf8_complete_prefix("ab\xf0", 3, &bad), 2);
	assert_false(bad);
	assert_int_equal(al_utf8_complete_prefix("ab\xe2\x82\xac", 5, &bad), 5);
	assert_false(bad);
	al_utf8_complete_prefix("a\xffz", 3, &bad);
	assert_true(bad);
	al_utf8_complete_prefix("a\xe2(", 3, &bad);
	assert_true(bad);
}

static void test_base64(void **state)
{
	(void)state;
	static const struct {
		const char *in, *out;
	} v[] = {
		{"", ""},
		{"f", "Zg=="},
		{"fo", "Zm8="},
		{"foo", "Zm9v"},
		{"foob", "Zm9vYg=="},
		{"fooba", "Zm9vYmE="},
		{"foobar", "Zm9vYmFy"},
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		char *b = al_base64_encode(v[i].in, strlen(v[i].in));
		assert_non_null(b);
		assert_string_equal(b, v[i].out);
		free(b);
	}
	char *b = al_base64_encode("\xff\x00\x80", 3);
	assert_string_equal(b, "/wCA");
	free(b);
}

static void test_check_fields(void **state)
{
	(void)state;
	al_err err;
	static const char *const allowed[] = {"a", "b", NULL};
	json_object *o = json_tokener_parse("{\"a\":1,\"b\":2}");
	assert_int_equal(al_json_check_fields(o, allowed, &err), 0);
	json_object_put(o);
	o = json_tokener_parse("{\"a\":1,\"c\":2}");
	assert_int_equal(al_json_check_fields(o, allowed, &err), -1);
	assert_non_null(strstr(err.msg, "'c'"));
	json_object_put(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_ok),
		cmocka_unit_test(test_create_cpus),
		cmocka_unit_test(test_create_defaults),
		cmocka_unit_test(test_create_rejects),
		cmocka_unit_test(test_secrets_not_echoed),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_exec),
		cmocka_unit_test(test_utf8),
		cmocka_unit_test(test_base64),
		cmocka_unit_test(test_check_fields),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
