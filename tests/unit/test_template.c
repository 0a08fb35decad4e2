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

#include "model/build.h"
#include "model/template.h"
#include "sandbox/poolbounds.h"
#include "template/builddir.h"

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
		out,
		"/var/lib/airlock/pool/template-versions/python/12/rootfs");
}

static void test_bad_names_refused(void **state)
{
	(void)state;
	al_config cfg;
	cfg_init(&cfg);
	char out[1024];
	static const char *const bad[] = {
		"",
		"..",
		"../x",
		"a/b",
		"-x",
		"UPPER",
		"a.b",
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
		assert_int_equal(al_builddir_path(&cfg, bad[i], out, sizeof out,
						  &err),
				 -1);
	}
	al_err err = {0};
	assert_int_equal(al_template_version_dir(&cfg, NULL, 1, out, sizeof out,
						 &err),
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
	assert_int_equal(al_template_version_dir(&cfg, "x", -1, out, sizeof out,
						 &err),
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
	assert_int_equal(al_builddir_path(&cfg, "b123", out, 8, &err), -1);
}

static void test_build_dir(void **state)
{
	(void)state;
	al_config cfg;
	cfg_init(&cfg);
	char out[1024];
	al_err err = {0};
	assert_int_equal(al_builddir_path(&cfg, "b0a1", out, sizeof out, &err),
			 0);
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

/* A template's own bounds win where set; unset ones follow the
 * operator's; a pool that is off by default stays off unless the
 * template names a max; max never below min; a disabled driver none. */
static void test_pool_bounds(void **state)
{
	(void)state;
	al_config cfg;
	cfg_init(&cfg);
	cfg.drivers = AL_CONFIG_DRIVER_NS | AL_CONFIG_DRIVER_VM;
	cfg.warm_pool = 2;
	cfg.warm_pool_max = 8;
	cfg.warm_pool_vm = 0;
	cfg.warm_pool_vm_max = 2;
	uint32_t min, max;
	int dflt[AL_POOL_NBOUNDS] = {-1, -1, -1, -1};
	al_poolbounds_in_effect(&cfg, dflt, "ns", &min, &max);
	assert_int_equal(min, 2);
	assert_int_equal(max, 8);
	al_poolbounds_in_effect(&cfg, dflt, "vm", &min, &max);
	assert_int_equal(min, 0);
	assert_int_equal(max, 0);

	int own[AL_POOL_NBOUNDS] = {5, -1, -1, 3};
	al_poolbounds_in_effect(&cfg, own, "ns", &min, &max);
	assert_int_equal(min, 5);
	assert_int_equal(max, 8);
	al_poolbounds_in_effect(&cfg, own, "vm", &min, &max);
	assert_int_equal(min, 0);
	assert_int_equal(max, 3);

	int low[AL_POOL_NBOUNDS] = {6, 4, -1, -1};
	al_poolbounds_in_effect(&cfg, low, "ns", &min, &max);
	assert_int_equal(min, 6);
	assert_int_equal(max, 6);

	cfg.drivers = AL_CONFIG_DRIVER_VM;
	al_poolbounds_in_effect(&cfg, own, "ns", &min, &max);
	assert_int_equal(min, 0);
	assert_int_equal(max, 0);
}

static void test_pool_parse(void **state)
{
	(void)state;
	al_json_setting u[AL_POOL_NBOUNDS];
	al_err err;
	const char *ok = "{\"ns_min\":3,\"vm_max\":null}";
	assert_int_equal(al_poolbounds_parse(ok, strlen(ok), u, &err), 0);
	assert_true(u[AL_POOL_NS_MIN].set && !u[AL_POOL_NS_MIN].is_null);
	assert_int_equal(u[AL_POOL_NS_MIN].value, 3);
	assert_true(u[AL_POOL_VM_MAX].set && u[AL_POOL_VM_MAX].is_null);
	assert_false(u[AL_POOL_NS_MAX].set || u[AL_POOL_VM_MIN].set);
	static const char *const bad[] = {
		"{}",
		"{\"ns_min\":65}",
		"{\"ns_min\":-1}",
		"{\"ns_min\":1.5}",
		"{\"pool\":1}",
		"[1]",
		"{\"ns_max\":\"2\"}",
		"{",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(al_poolbounds_parse(bad[i], strlen(bad[i]), u,
						     &err),
				 -1);
		assert_int_equal(err.code, AL_EINVAL);
	}
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
		cmocka_unit_test(test_pool_bounds),
		cmocka_unit_test(test_pool_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
