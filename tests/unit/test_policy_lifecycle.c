/* policy lifecycle(sandbox): the shipped file answers the defaults, a
 * policy decides per sandbox, a bad value gets its default, a failing
 * call decides nothing, and a file whose answer is not a table does not
 * load. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "policy/policy.h"

static al_lifecycle_req req(const char *driver, const char *team)
{
	static al_policy_kv meta[1];
	meta[0] = (al_policy_kv){"team", team};
	return (al_lifecycle_req){.sandbox = "sb1",
				  .template_name = "node",
				  .project = "ci",
				  .driver = driver,
				  .state = "running",
				  .metadata = meta,
				  .n_metadata = 1};
}

static al_policy *open_src(const char *src)
{
	al_err err;
	return al_policy_open_source("test.lua", src, strlen(src),
				     &al_policy_lifecycle_kind, NULL, &err);
}

static void assert_defaults(const al_lifecycle_decision *d)
{
	assert_int_equal(d->idle_action, AL_IDLE_SUSPEND);
	assert_int_equal(d->idle_after, AL_LIFECYCLE_IDLE_AFTER_DEFAULT);
	assert_int_equal(d->snapshot_every, AL_LIFECYCLE_EVERY_DEFAULT);
	assert_int_equal(d->snapshot_keep, AL_LIFECYCLE_KEEP_DEFAULT);
}

static void test_shipped_policy_answers_the_defaults(void **state)
{
	(void)state;
	al_err err;
	al_policy *p = al_policy_open("policies/lifecycle.lua",
				      &al_policy_lifecycle_kind, NULL, &err);
	assert_non_null(p);
	al_lifecycle_req r = req("vm", "x");
	al_lifecycle_decision d;
	assert_int_equal(al_policy_lifecycle(p, &r, &d), 0);
	assert_defaults(&d);
	assert_int_equal(d.idle_after, 6 * 3600);
	assert_int_equal(d.snapshot_every, 3600);
	assert_int_equal(d.snapshot_keep, 7 * 86400);
	al_policy_close(p);
}

static void test_decides_per_sandbox(void **state)
{
	(void)state;
	al_policy *p = open_src(
		"function lifecycle(sb)\n"
		"  if sb.metadata.team == 'ml' and sb.driver == 'ns' and\n"
		"     sb.project == 'ci' and sb.template == 'node' and\n"
		"     sb.state == 'running' and sb.id == 'sb1' then\n"
		"    return { idle = { after = 30, action = 'delete' },\n"
		"             snapshots = { every = 0, keep = 0 } }\n"
		"  end\n"
		"  if sb.metadata.team == 'none' then\n"
		"    return { idle = { action = 'none' } }\n"
		"  end\n"
		"  return nil\n"
		"end\n");
	assert_non_null(p);
	al_lifecycle_decision d;
	al_lifecycle_req r = req("ns", "ml");
	assert_int_equal(al_policy_lifecycle(p, &r, &d), 0);
	assert_int_equal(d.idle_action, AL_IDLE_DELETE);
	assert_int_equal(d.idle_after, 30);
	assert_int_equal(d.snapshot_every, 0);
	assert_int_equal(d.snapshot_keep, 0);
	r = req("ns", "none");
	assert_int_equal(al_policy_lifecycle(p, &r, &d), 0);
	assert_int_equal(d.idle_action, AL_IDLE_NONE);
	assert_int_equal(d.idle_after, AL_LIFECYCLE_IDLE_AFTER_DEFAULT);
	assert_int_equal(d.snapshot_every, AL_LIFECYCLE_EVERY_DEFAULT);
	r = req("vm", "ml"); /* nil: every default */
	assert_int_equal(al_policy_lifecycle(p, &r, &d), 0);
	assert_defaults(&d);
	al_policy_close(p);
}

static void test_bad_values_get_their_defaults(void **state)
{
	(void)state;
	static const char *const answers[] = {
		"{ idle = { after = 0, action = 'explode' } }",
		"{ idle = { after = -5 }, snapshots = { every = 'often' } }",
		"{ idle = { after = 1/0, action = 3 } }",
		"{ idle = { after = 0/0 }, snapshots = { keep = -1 } }",
		"{ snapshots = { every = 1e300, keep = {} } }",
		"{ idle = 'soon', snapshots = 42 }",
		"setmetatable({}, { __index = function() error('x') end })",
		"{ idle = setmetatable({}, { __index = function()"
		" return 5 end }) }",
	};
	for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
		char src[512];
		snprintf(src, sizeof src,
			 "function lifecycle(sb) return %s end\n", answers[i]);
		al_policy *p = open_src(src);
		assert_non_null(p);
		al_lifecycle_req r = req("ns", "x");
		al_lifecycle_decision d;
		assert_int_equal(al_policy_lifecycle(p, &r, &d), 0);
		assert_defaults(&d);
		al_policy_close(p);
	}
}

static void test_a_failing_call_decides_nothing(void **state)
{
	(void)state;
	al_policy *p = open_src("function lifecycle(sb)\n"
				"  if sb.metadata.team == 'err' then\n"
				"    error('no') end\n"
				"  if sb.metadata.team == 'loop' then\n"
				"    while true do end end\n"
				"  if sb.metadata.team == 'two' then\n"
				"    return {}, {} end\n"
				"  return { idle = { after = 10 } }\n"
				"end\n");
	assert_non_null(p);
	const char *bad[] = {"err", "loop", "two"};
	for (int i = 0; i < 3; i++) {
		al_lifecycle_req r = req("ns", bad[i]);
		al_lifecycle_decision d;
		assert_int_equal(al_policy_lifecycle(p, &r, &d), -1);
		assert_int_equal(d.idle_action, AL_IDLE_NONE);
		assert_int_equal(d.snapshot_every, 0);
		assert_int_equal(d.snapshot_keep, 0); /* nothing pruned */
	}
	al_policy_stat st;
	al_policy_status(p, &st);
	assert_int_equal(st.failures, 3);
	/* It still answers afterwards. */
	al_lifecycle_req r = req("ns", "x");
	al_lifecycle_decision d;
	assert_int_equal(al_policy_lifecycle(p, &r, &d), 0);
	assert_int_equal(d.idle_after, 10);
	/* A request without its fields is refused before the policy. */
	r.state = NULL;
	assert_int_equal(al_policy_lifecycle(p, &r, &d), -1);
	al_policy_close(p);
}

static void test_a_bad_file_does_not_load(void **state)
{
	(void)state;
	assert_null(open_src("function egress(req) return allow() end\n"));
	assert_null(open_src("function lifecycle(sb) return 42 end\n"));
	assert_null(open_src("function lifecycle(sb) error('x') end\n"));
	assert_null(open_src("function lifecycle(sb) return {\n"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shipped_policy_answers_the_defaults),
		cmocka_unit_test(test_decides_per_sandbox),
		cmocka_unit_test(test_bad_values_get_their_defaults),
		cmocka_unit_test(test_a_failing_call_decides_nothing),
		cmocka_unit_test(test_a_bad_file_does_not_load),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
