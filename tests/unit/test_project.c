/* Tenancy logic that needs no database: quota verdicts and their
 * messages, the quota update body, roles and who may see or change a
 * template. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "model/project.h"
#include "model/template.h"

static void test_quota_check(void **state)
{
	(void)state;
	al_err err;
	size_t field = 99;
	al_quota limit = {.running_sandboxes = 50,
			  .memory_mb = 4096,
			  .disk_mb = 100,
			  .concurrent_builds = 2,
			  .concurrent_streams = 1,
			  .creates_per_minute = 10};
	al_quota used = {.running_sandboxes = 49,
			 .memory_mb = 3584,
			 .creates_per_minute = 3};
	al_quota asked = {.running_sandboxes = 1,
			  .memory_mb = 512,
			  .creates_per_minute = 1};
	assert_int_equal(al_quota_check(&limit, &used, &asked, &field, &err),
			 0);
	assert_int_equal(field, 99);

	used.running_sandboxes = 50;
	assert_int_equal(al_quota_check(&limit, &used, &asked, &field, &err),
			 -1);
	assert_int_equal(err.code, AL_EQUOTA);
	assert_string_equal(err.msg, "running sandboxes: 50 of 50");
	assert_int_equal(field, 0);

	used.running_sandboxes = 1;
	asked.memory_mb = 513;
	assert_int_equal(al_quota_check(&limit, &used, &asked, &field, &err),
			 -1);
	assert_string_equal(err.msg,
			    "memory: 3584 of 4096 MiB in use, 513 MiB asked");
	assert_int_equal(field, 1);

	/* Fields not asked for are not checked, whatever they hold. */
	asked.memory_mb = 0;
	used.disk_mb = 1000;
	assert_int_equal(al_quota_check(&limit, &used, &asked, NULL, &err), 0);

	used.creates_per_minute = 10;
	assert_int_equal(al_quota_check(&limit, &used, &asked, &field, &err),
			 -1);
	assert_string_equal(err.msg, "creates per minute: 10 of 10");
	assert_int_equal(field, 5);

	/* A limit lowered below what is in use; huge values cannot wrap. */
	al_quota big = {.memory_mb = UINT64_MAX};
	al_quota small = {.memory_mb = 10};
	al_quota none = {0};
	assert_int_equal(al_quota_check(&small, &big, &small, NULL, &err), -1);
	assert_int_equal(al_quota_check(&small, &none, &big, NULL, &err), -1);
	assert_int_equal(al_quota_check(&big, &small, &small, NULL, &err), 0);
}

static void test_quota_fields(void **state)
{
	(void)state;
	al_quota q = {.running_sandboxes = 1,
		      .memory_mb = 2,
		      .disk_mb = 3,
		      .concurrent_builds = 4,
		      .concurrent_streams = 5,
		      .creates_per_minute = 6,
		      .cpu_millis = 7};
	for (size_t i = 0; i < AL_QUOTA_NFIELDS; i++)
		assert_int_equal(al_quota_value(&q, i), i + 1);
	assert_string_equal(al_quota_fields[0].name, "running_sandboxes");
	assert_string_equal(al_quota_fields[5].name, "creates_per_minute");
	assert_string_equal(al_quota_fields[6].name, "cpus");
	assert_true(al_quota_fields[6].milli);
}

static void test_quota_cpus(void **state)
{
	(void)state;
	al_err err;
	size_t field = 0;
	al_quota limit = {.running_sandboxes = 10,
			  .creates_per_minute = 10,
			  .cpu_millis = 2000};
	al_quota used = {.running_sandboxes = 2, .cpu_millis = 1500};
	al_quota half = {.running_sandboxes = 1,
			 .creates_per_minute = 1,
			 .cpu_millis = 500};
	al_quota one = half;
	one.cpu_millis = 1000;
	assert_int_equal(al_quota_check(&limit, &used, &half, NULL, &err), 0);
	assert_int_equal(al_quota_check(&limit, &used, &one, &field, &err), -1);
	assert_int_equal(err.code, AL_EQUOTA);
	assert_int_equal(field, 6);
	assert_string_equal(err.msg, "cpus: 1.5 of 2 in use, 1 asked");
}

static int parse(const char *s, al_quota_update *u, al_err *err)
{
	return al_quota_update_parse(s, strlen(s), u, err);
}

static void test_quota_update_parse(void **state)
{
	(void)state;
	al_quota_update u;
	al_err err;
	assert_int_equal(parse("{\"memory_mb\":1024,\"running_sandboxes\":null,"
			       "\"creates_per_minute\":0}",
			       &u, &err),
			 0);
	assert_true(u.set[1] && !u.is_null[1]);
	assert_int_equal(u.value.memory_mb, 1024);
	assert_true(u.set[0] && u.is_null[0]);
	assert_true(u.set[5] && !u.is_null[5]);
	assert_int_equal(u.value.creates_per_minute, 0);
	assert_false(u.set[2] || u.set[3] || u.set[4] || u.set[6]);

	/* cpus: a number of CPUs, to the thousandth. */
	assert_int_equal(parse("{\"cpus\":2.5}", &u, &err), 0);
	assert_true(u.set[6] && !u.is_null[6]);
	assert_int_equal(u.value.cpu_millis, 2500);
	assert_int_equal(parse("{\"cpus\":4}", &u, &err), 0);
	assert_int_equal(u.value.cpu_millis, 4000);
	assert_int_equal(parse("{\"cpus\":0.001}", &u, &err), 0);
	assert_int_equal(u.value.cpu_millis, 1);
	assert_int_equal(parse("{\"cpus\":null}", &u, &err), 0);
	assert_true(u.set[6] && u.is_null[6]);

	static const char *const bad[] = {
		"{}",
		"{\"memory_mb\":-1}",
		"{\"memory_mb\":\"5\"}",
		"{\"memory_mb\":1.5}",
		"{\"memory_mb\":99999999999999999999}",
		"{\"cpu\":1}",
		"{\"cpus\":0.0005}",
		"{\"cpus\":-1}",
		"{\"cpus\":\"2\"}",
		"{\"cpus\":1e300}",
		"[1]",
		"{\"memory_mb\":1",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (parse(bad[i], &u, &err) != -1)
			fail_msg("accepted %s", bad[i]);
		assert_int_equal(err.code, AL_EINVAL);
	}
}

static void test_roles(void **state)
{
	(void)state;
	assert_int_equal(al_role_from_name("admin"), AL_ROLE_ADMIN);
	assert_int_equal(al_role_from_name("member"), AL_ROLE_MEMBER);
	assert_int_equal(al_role_from_name("Admin"), -1);
	assert_int_equal(al_role_from_name(""), -1);
	assert_int_equal(al_role_from_name(NULL), -1);
	assert_string_equal(al_role_name(AL_ROLE_ADMIN), "admin");
	assert_string_equal(al_role_name(AL_ROLE_MEMBER), "member");
}

static void test_template_may(void **state)
{
	(void)state;
	al_identity admin = {.key_id = 1,
			     .project = "default",
			     .role = AL_ROLE_ADMIN};
	al_identity a = {.key_id = 2, .project = "a", .role = AL_ROLE_MEMBER};
	al_identity b = {.key_id = 3, .project = "b", .role = AL_ROLE_MEMBER};
	al_template_owner pub = {.project = "default", .public = 1};
	al_template_owner own_a = {.project = "a", .public = 0};
	/* Public: every project sees it, only admins change it. */
	assert_true(al_template_may(&pub, &a, 0));
	assert_false(al_template_may(&pub, &a, 1));
	assert_true(al_template_may(&pub, &admin, 1));
	/* A project's own: its members and admins only. */
	assert_true(al_template_may(&own_a, &a, 0));
	assert_true(al_template_may(&own_a, &a, 1));
	assert_false(al_template_may(&own_a, &b, 0));
	assert_false(al_template_may(&own_a, &b, 1));
	assert_true(al_template_may(&own_a, &admin, 1));
	/* A member of default sees a public template of default but may not
	 * change it. */
	al_identity d = {.key_id = 4,
			 .project = "default",
			 .role = AL_ROLE_MEMBER};
	assert_false(al_template_may(&pub, &d, 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quota_check),
		cmocka_unit_test(test_quota_fields),
		cmocka_unit_test(test_quota_cpus),
		cmocka_unit_test(test_quota_update_parse),
		cmocka_unit_test(test_roles),
		cmocka_unit_test(test_template_may),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
