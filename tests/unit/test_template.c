/* core/template: where versions and builds live, and the names that
 * cannot become paths. The database side is exercised end to end by
 * tests/builder/test_builder.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "template.h"

static void cfg_init(al_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	snprintf(cfg->state_dir, sizeof cfg->state_dir, "/var/lib/airlock");
	snprintf(cfg->pool_dir, sizeof cfg->pool_dir, "/var/lib/airlock/pool");
}

static void test_version_paths(void **state)
{
	(void)state;
	al_config cfg;
	cfg_init(&cfg);
	char out[1024];
	al_err err = {0};
	assert_int_equal(al_template_version_dir(&cfg, "python", 3, out,
						 sizeof out, &err),
			 0);
	assert_string_equal(out,
			    "/var/lib/airlock/pool/template-versions/python/3");
	assert_int_equal(al_template_version_rootfs(&cfg, "python", 12, out,
						    sizeof out, &err),
			 0);
	assert_string_equal(
		out, "/var/lib/airlock/pool/template-versions/python/12/rootfs");
}

static void test_bad_names_refused(void **state)
{
	(void)state;
	al_config cfg;
	cfg_init(&cfg);
	char out[1024];
	static const char *const bad[] = {
		"", "..", "../x", "a/b", "-x", "UPPER", "a.b",
		"0123456789012345678901234567890123456789012345678901234567890123",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		al_err err = {0};
		assert_int_equal(al_template_version_dir(&cfg, bad[i], 1, out,
							 sizeof out, &err),
				 -1);
		assert_int_equal(err.code, AL_EINVAL);
		assert_int_equal(al_template_version_rootfs(&cfg, bad[i], 1,
							    out, sizeof out,
							    &err),
				 -1);
		assert_int_equal(al_build_dir(&cfg, bad[i], out, sizeof out,
					      &err),
				 -1);
	}
	al_err err = {0};
	assert_int_equal(al_template_version_dir(&cfg, NULL, 1, out,
						 sizeof out, &err),
			 -1);
}

static void test_bad_versions_refused(void **state)
{
	(void)state;
	al_config cfg;
	cfg_init(&cfg);
	char out[1024];
	al_err err = {0};
	assert_int_equal(al_template_version_dir(&cfg, "x", 0, out, sizeof out,
						 &err),
			 -1);
	assert_int_equal(al_template_version_dir(&cfg, "x", -1, out,
						 sizeof out, &err),
			 -1);
	assert_int_equal(err.code, AL_EINVAL);
}

static void test_too_small_buffer(void **state)
{
	(void)state;
	al_config cfg;
	cfg_init(&cfg);
	char out[32];
	al_err err = {0};
	assert_int_equal(al_template_version_rootfs(&cfg, "python", 1, out,
						    sizeof out, &err),
			 -1);
	assert_int_equal(err.code, AL_EINVAL);
	assert_int_equal(al_build_dir(&cfg, "b123", out, 8, &err), -1);
}

static void test_build_dir(void **state)
{
	(void)state;
	al_config cfg;
	cfg_init(&cfg);
	char out[1024];
	al_err err = {0};
	assert_int_equal(al_build_dir(&cfg, "b0a1", out, sizeof out, &err), 0);
	assert_string_equal(out, "/var/lib/airlock/builds/b0a1");
}

static void test_status_names(void **state)
{
	(void)state;
	assert_string_equal(al_build_status_name(AL_BUILD_QUEUED), "queued");
	assert_string_equal(al_build_status_name(AL_BUILD_RUNNING), "running");
	assert_string_equal(al_build_status_name(AL_BUILD_SUCCEEDED),
			    "succeeded");
	assert_string_equal(al_build_status_name(AL_BUILD_FAILED), "failed");
	assert_string_equal(al_build_status_name((al_build_status)99),
			    "unknown");
}

static void test_version_free_idempotent(void **state)
{
	(void)state;
	al_template_version tv;
	memset(&tv, 0, sizeof tv);
	tv.env = json_object_new_object();
	tv.start = json_object_new_array();
	al_template_version_free(&tv);
	assert_null(tv.env);
	assert_null(tv.start);
	al_template_version_free(&tv);
	al_template_version_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version_paths),
		cmocka_unit_test(test_bad_names_refused),
		cmocka_unit_test(test_bad_versions_refused),
		cmocka_unit_test(test_too_small_buffer),
		cmocka_unit_test(test_build_dir),
		cmocka_unit_test(test_status_names),
		cmocka_unit_test(test_version_free_idempotent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
