/* The sandbox lifecycle table: every (state, event) cell, the names, the
 * JSON view, id generation, and the shim's spec and ready report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/config.h"
#include "model/sandbox.h"

#define R (-1) /* rejected */

/* What the design says, written independently of sandbox.c's table. */
static const int expected[AL_ST_MAX][AL_EV_MAX] = {
	/*               READY          PAUSE         RESUME         SUSPEND          FAIL         DELETE */
	[AL_ST_CREATING] = {AL_ST_RUNNING, R, R, R, AL_ST_ERROR, AL_ST_DELETED},
	[AL_ST_RUNNING] = {R, AL_ST_PAUSED, R, AL_ST_SUSPENDED, AL_ST_ERROR,
			   AL_ST_DELETED},
	[AL_ST_PAUSED] = {R, R, AL_ST_RUNNING, AL_ST_SUSPENDED, AL_ST_ERROR,
			  AL_ST_DELETED},
	[AL_ST_SUSPENDED] = {R, R, AL_ST_RUNNING, R, R, AL_ST_DELETED},
	[AL_ST_ERROR] = {R, R, R, R, R, AL_ST_DELETED},
	[AL_ST_DELETED] = {R, R, R, R, R, R},
};

static void test_every_cell(void **state)
{
	(void)state;
	for (int s = 0; s < AL_ST_MAX; s++) {
		for (int e = 0; e < AL_EV_MAX; e++) {
			al_err err;
			al_err_clear(&err);
			int next = al_state_next((al_state)s, (al_event)e,
						 &err);
			if (next != expected[s][e])
				fail_msg("%s + %s: got %d, want %d",
					 al_state_name((al_state)s),
					 al_event_name((al_event)e), next,
					 expected[s][e]);
			if (next == R) {
				assert_int_equal(err.code, AL_ESTATE);
				assert_int_equal(al_code_http_status(err.code),
						 409);
				/* The message names the event and the state. */
				assert_non_null(strstr(
					err.msg, al_event_name((al_event)e)));
				assert_non_null(strstr(
					err.msg, al_state_name((al_state)s)));
			} else {
				assert_int_equal(err.code, AL_OK);
			}
		}
	}
}

static void test_out_of_range(void **state)
{
	(void)state;
	al_err err;
	assert_int_equal(al_state_next(AL_ST_MAX, AL_EV_READY, &err), -1);
	assert_int_equal(err.code, AL_EINTERNAL);
	assert_int_equal(al_state_next(AL_ST_RUNNING, AL_EV_MAX, &err), -1);
	assert_int_equal(err.code, AL_EINTERNAL);
	assert_int_equal(al_state_next((al_state)-1, AL_EV_READY, &err), -1);
}

static void test_names_round_trip(void **state)
{
	(void)state;
	static const char *const names[] = {"creating",	 "running", "paused",
					    "suspended", "error",   "deleted"};
	for (int s = 0; s < AL_ST_MAX; s++) {
		assert_string_equal(al_state_name((al_state)s), names[s]);
		assert_int_equal(al_state_from_name(names[s]), s);
	}
	assert_int_equal(al_state_from_name("Running"), -1);
	assert_int_equal(al_state_from_name(""), -1);
	assert_int_equal(al_state_from_name(NULL), -1);
	assert_string_equal(al_state_name(AL_ST_MAX), "unknown");
	assert_string_equal(al_event_name(AL_EV_DELETE), "delete");
	assert_string_equal(al_event_name(AL_EV_MAX), "unknown");
}

static void test_new_id(void **state)
{
	(void)state;
	char a[21], b[21];
	al_err err;
	assert_int_equal(al_sandbox_new_id(a, &err), 0);
	assert_int_equal(al_sandbox_new_id(b, &err), 0);
	assert_int_equal(strlen(a), 20);
	assert_true(al_id_valid(a));
	assert_string_not_equal(a, b);
	for (int i = 0; i < 20; i++)
		assert_true((a[i] >= 'a' && a[i] <= 'z') ||
			    (a[i] >= '0' && a[i] <= '9'));
}

static void test_to_json_never_env(void **state)
{
	(void)state;
	al_sandbox sb;
	memset(&sb, 0, sizeof sb);
	strcpy(sb.id, "abc");
	strcpy(sb.template_name, "minimal");
	strcpy(sb.driver, "ns");
	sb.state = AL_ST_RUNNING;
	strcpy(sb.created_at, "2026-01-01T00:00:00.000Z");
	strcpy(sb.expires_at, "2026-01-01T00:05:00.000Z");
	sb.limits.memory_bytes = 256ull << 20;
	sb.limits.cpu_millis = 500;
	sb.env = json_tokener_parse("{\"SECRET\":\"hunter2\"}");
	sb.metadata = json_tokener_parse("{\"owner\":\"me\"}");
	json_object *o = al_sandbox_to_json(&sb);
	const char *s = json_object_to_json_string(o);
	assert_null(strstr(s, "hunter2"));
	assert_null(strstr(s, "SECRET"));
	json_object *v;
	assert_true(json_object_object_get_ex(o, "state", &v));
	assert_string_equal(json_object_get_string(v), "running");
	assert_true(json_object_object_get_ex(o, "metadata", &v));
	assert_non_null(strstr(json_object_to_json_string(v), "owner"));
	assert_true(json_object_object_get_ex(o, "memory_mb", &v));
	assert_int_equal(json_object_get_int(v), 256);
	/* cpus as the client wrote it: a number, 0.5 exactly. */
	assert_true(json_object_object_get_ex(o, "cpus", &v));
	assert_true(json_object_is_type(v, json_type_double));
	assert_string_equal(al_json_compact(v), "0.5");
	assert_false(json_object_object_get_ex(o, "error", &v));
	json_object_put(o);
	al_sandbox_free_fields(&sb);
	assert_null(sb.env);
}

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
		cmocka_unit_test(test_every_cell),
		cmocka_unit_test(test_out_of_range),
		cmocka_unit_test(test_names_round_trip),
		cmocka_unit_test(test_new_id),
		cmocka_unit_test(test_to_json_never_env),
		cmocka_unit_test(test_spec_round_trip),
		cmocka_unit_test(test_spec_rejects),
		cmocka_unit_test(test_ready_report),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
