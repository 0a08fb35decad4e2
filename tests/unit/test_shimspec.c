/* The shim's spec and ready report (core/sandbox/shimspec.h): a spec
 * round-trips with and without boot, every malformed field is refused,
 * and the ready report accepts only a pid and a known accelerator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/json.h"
#include "model/sandbox.h"
#include "model/template.h"
#include "sandbox/shimspec.h"

static const char cold_spec[] =
	"{\"id\":\"abc123\",\"template\":\"minimal\",\"template_version\":3,"
	"\"driver\":\"ns\",\"limits\":{\"memory_bytes\":268435456,"
	"\"pids\":256,\"cpu_shares\":1024,\"cpu_millis\":500,"
	"\"disk_bytes\":4294967296,"
	"\"pool_group\":7,\"pool_group_bytes\":8589934592},"
	"\"env\":{\"SECRET\":\"s3\"},\"boot\":{\"env\":{\"PATH\":\"/bin\"},"
	"\"workdir\":\"/work\",\"user\":\"app\",\"start\":[\"sleep\",\"9\"],"
	"\"ready\":[\"true\"]},\"project\":\"team-a\","
	"\"metadata\":{\"k\":\"v\"},\"network\":{\"mode\":\"open\","
	"\"deny\":[\"Bad.Example.\"]}}";

static void test_spec_round_trip(void **state)
{
	(void)state;
	al_sandbox sb;
	al_template_version tv;
	int boot = 0;
	al_err err = {0};
	assert_int_equal(al_shim_spec_unpack(cold_spec, sizeof cold_spec - 1,
					     &sb, &tv, &boot, &err),
			 0);
	assert_string_equal(sb.id, "abc123");
	assert_string_equal(sb.template_name, "minimal");
	assert_int_equal(sb.template_version, 3);
	assert_string_equal(sb.driver, "ns");
	assert_int_equal(sb.limits.memory_bytes, 268435456);
	assert_int_equal(sb.limits.pids_max, 256);
	assert_int_equal(sb.limits.cpu_shares, 1024);
	assert_int_equal(sb.limits.cpu_millis, 500);
	assert_int_equal(sb.limits.disk_bytes, 4294967296ull);
	assert_int_equal(sb.limits.pool_group, 7);
	assert_int_equal(sb.limits.pool_group_bytes, 8589934592ull);
	assert_true(boot);
	assert_string_equal(tv.workdir, "/work");
	assert_string_equal(tv.user, "app");
	assert_int_equal(json_object_array_length(tv.start), 2);
	assert_int_equal(json_object_array_length(tv.ready), 1);
	/* What the gateway is told of the sandbox; the network canonical. */
	assert_string_equal(sb.project, "team-a");
	assert_non_null(strstr(al_json_compact(sb.metadata), "\"k\""));
	assert_string_equal(al_json_compact(sb.network),
			    "{\"mode\":\"open\",\"allow\":[],"
			    "\"deny\":[\"bad.example\"]}");
	/* A claim carries no boot: the standby has it. */
	char *claim = al_shim_spec_pack(&sb, NULL, &err);
	assert_non_null(claim);
	assert_null(strstr(claim, "boot"));
	al_sandbox again;
	al_template_version tv2;
	assert_int_equal(al_shim_spec_unpack(claim, strlen(claim), &again, &tv2,
					     &boot, &err),
			 0);
	assert_false(boot);
	assert_true(json_object_equal(again.env, sb.env));
	assert_true(json_object_equal(again.network, sb.network));
	assert_true(json_object_equal(again.metadata, sb.metadata));
	assert_string_equal(again.project, sb.project);
	assert_memory_equal(&again.limits, &sb.limits, sizeof sb.limits);
	free(claim);
	al_sandbox_free_fields(&again);
	al_template_version_free(&tv2);
	al_sandbox_free_fields(&sb);
	al_template_version_free(&tv);

	/* A standby's: no id, no limits. */
	static const char standby[] = "{\"template\":\"minimal\","
				      "\"template_version\":1,"
				      "\"driver\":\"vm\"}";
	assert_int_equal(al_shim_spec_unpack(standby, sizeof standby - 1, &sb,
					     &tv, &boot, &err),
			 0);
	assert_string_equal(sb.id, "");
	assert_int_equal(sb.limits.disk_bytes, 0);
	al_sandbox_free_fields(&sb);
}

static void test_spec_rejects(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"",
		"[]",
		"{\"template\":\"minimal\"}", /* no driver */
		"{\"template\":\"../x\",\"driver\":\"ns\"}",
		"{\"id\":\"A B\",\"template\":\"minimal\",\"driver\":\"ns\"}",
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"state\":1}",
		"{\"template\":\"minimal\",\"driver\":\"ns\","
		"\"template_version\":-1}",
		/* limits: all five, each at least 1 and in range */
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"limits\":"
		"{\"memory_bytes\":1,\"pids\":1,\"cpu_shares\":1}}",
		/* no CPU cap: refused, never run uncapped */
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"limits\":"
		"{\"memory_bytes\":1,\"pids\":1,\"cpu_shares\":1,"
		"\"disk_bytes\":1}}",
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"limits\":"
		"{\"memory_bytes\":1,\"pids\":1,\"cpu_shares\":1,"
		"\"cpu_millis\":9,\"disk_bytes\":1}}",
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"limits\":"
		"{\"memory_bytes\":1,\"pids\":1,\"cpu_shares\":1,"
		"\"cpu_millis\":0.5,\"disk_bytes\":1}}",
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"limits\":"
		"{\"memory_bytes\":0,\"pids\":1,\"cpu_shares\":1,"
		"\"disk_bytes\":1}}",
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"limits\":"
		"{\"memory_bytes\":1,\"pids\":99999999,\"cpu_shares\":1,"
		"\"disk_bytes\":1}}",
		/* the pool group comes with its cap */
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"limits\":"
		"{\"memory_bytes\":1,\"pids\":1,\"cpu_shares\":1,"
		"\"disk_bytes\":1,\"pool_group\":3}}",
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"limits\":"
		"{\"memory_bytes\":1,\"pids\":1,\"cpu_shares\":1,"
		"\"disk_bytes\":1,\"pool_group\":0,\"pool_group_bytes\":1}}",
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"env\":"
		"{\"A\":1}}",
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"env\":"
		"{\"A=B\":\"1\"}}",
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"boot\":"
		"{\"workdir\":\"rel\"}}",
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"boot\":"
		"{\"start\":[]}}",
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"boot\":"
		"{\"start\":[1]}}",
		"{\"template\":\"minimal\",\"driver\":\"ns\"} x",
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"network\":"
		"{\"allow\":[]}}",
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"network\":"
		"{\"mode\":\"open\",\"allow\":[\"a..b\"]}}",
		"{\"template\":\"minimal\",\"driver\":\"ns\",\"project\":"
		"\"A B\"}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		al_sandbox sb;
		al_template_version tv;
		int boot = 1;
		al_err err = {0};
		if (al_shim_spec_unpack(bad[i], strlen(bad[i]), &sb, &tv, &boot,
					&err) == 0)
			fail_msg("accepted: %s", bad[i]);
		assert_int_not_equal(err.code, AL_OK);
		assert_null(sb.env);
		assert_null(tv.env);
		assert_false(boot);
	}
}

static void test_ready_report(void **state)
{
	(void)state;
	al_shim_ready r = {.pid = 4242}, got;
	snprintf(r.accel, sizeof r.accel, "tcg");
	al_err err = {0};
	char *s = al_shim_ready_pack(&r, &err);
	assert_non_null(s);
	assert_int_equal(al_shim_ready_unpack(s, strlen(s), &got, &err), 0);
	assert_int_equal(got.pid, 4242);
	assert_string_equal(got.accel, "tcg");
	free(s);
	static const char *const bad[] = {
		"{}",
		"{\"pid\":0,\"accel\":\"\"}",
		"{\"pid\":1,\"accel\":\"xen\"}",
		"{\"pid\":1}",
		"{\"pid\":1,\"accel\":\"\",\"x\":1}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		assert_int_equal(al_shim_ready_unpack(bad[i], strlen(bad[i]),
						      &got, &err),
				 -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spec_round_trip),
		cmocka_unit_test(test_spec_rejects),
		cmocka_unit_test(test_ready_report),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
