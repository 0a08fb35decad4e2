/* The sandbox lifecycle table: every (state, event) cell, the names, the
 * JSON view and id generation. The shim's spec and ready report are
 * test_shimspec.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/config.h"
#include "base/json.h"
#include "model/sandbox.h"
#include "model/sandbox_state.h"

#define R (-1) /* rejected */

/* What the design says, written independently of sandbox_state.c's table. */
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_cell),
		cmocka_unit_test(test_out_of_range),
		cmocka_unit_test(test_names_round_trip),
		cmocka_unit_test(test_new_id),
		cmocka_unit_test(test_to_json_never_env),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
