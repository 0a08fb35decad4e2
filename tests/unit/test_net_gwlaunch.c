/* net/gwlaunch: the environment every gateway is started with
 * (al_gateway_env_fill), the one a shim, a builder and the test and
 * bench harnesses all pass: the starter's checked settings, the
 * upstream ones as the starter has them, nothing else. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net/gwlaunch.h"

static const char *const *fake_env;

static const char *lookup(const char *name)
{
	for (size_t i = 0; fake_env[i] != NULL; i += 2)
		if (strcmp(fake_env[i], name) == 0)
			return fake_env[i + 1];
	return NULL;
}

/* The value of name in env, or NULL. */
static const char *value_of(char *const *env, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; env[i] != NULL; i++)
		if (strncmp(env[i], name, n) == 0 && env[i][n] == '=')
			return env[i] + n + 1;
	return NULL;
}

static size_t count(char *const *env)
{
	size_t n = 0;
	while (env[n] != NULL)
		n++;
	return n;
}

static void test_env_carries_the_checked_settings(void **state)
{
	(void)state;
	static const char *const env[] = {"AIRLOCK_STATE",
					  "/srv/airlock",
					  "AIRLOCK_POLICIES",
					  "/etc/airlock/policies",
					  "AIRLOCK_NET_POOL",
					  "10.77.0.0/16",
					  "AIRLOCK_GW_HEAD_TIMEOUT_MS",
					  "1500",
					  "AIRLOCK_GW_IDLE_TIMEOUT_MS",
					  "2500",
					  "AIRLOCK_EGRESS_LOG_RATE",
					  "7",
					  NULL};
	fake_env = env;
	al_config cfg;
	al_err err;
	assert_int_equal(al_config_load_from(&cfg, lookup, &err), 0);
	assert_int_equal(setenv("AIRLOCK_UPSTREAM_DNS", "10.9.0.2:53", 1), 0);
	unsetenv("AIRLOCK_UPSTREAM_HOSTS");
	unsetenv("AIRLOCK_UPSTREAM_CA");
	unsetenv("AIRLOCK_UPSTREAM_ALLOW_CIDRS");
	assert_int_equal(setenv("AIRLOCK_DB", "host=/elsewhere", 1), 0);

	static al_gateway_env ge;
	al_gateway_env_fill(&ge, &cfg);
	assert_string_equal(value_of(ge.env, "AIRLOCK_STATE"), "/srv/airlock");
	assert_string_equal(value_of(ge.env, "AIRLOCK_POLICIES"),
			    "/etc/airlock/policies");
	assert_string_equal(value_of(ge.env, "AIRLOCK_NET_POOL"),
			    "10.77.0.0/16");
	assert_string_equal(value_of(ge.env, "AIRLOCK_GW_HEAD_TIMEOUT_MS"),
			    "1500");
	assert_string_equal(value_of(ge.env, "AIRLOCK_GW_IDLE_TIMEOUT_MS"),
			    "2500");
	assert_string_equal(value_of(ge.env, "AIRLOCK_EGRESS_LOG_RATE"), "7");
	assert_string_equal(value_of(ge.env, "AIRLOCK_EGRESS_LOG_BURST"),
			    "500");
	assert_string_equal(value_of(ge.env, "AIRLOCK_UPSTREAM_DNS"),
			    "10.9.0.2:53");
	/* Unset upstream settings stay unset; nothing else is passed. */
	assert_null(value_of(ge.env, "AIRLOCK_UPSTREAM_HOSTS"));
	assert_null(value_of(ge.env, "AIRLOCK_DB"));
	assert_int_equal(count(ge.env), 8);
}

static void test_env_has_the_defaults_resolved(void **state)
{
	(void)state;
	static const char *const env[] = {"AIRLOCK_STATE", "/srv/a", NULL};
	fake_env = env;
	al_config cfg;
	al_err err;
	assert_int_equal(al_config_load_from(&cfg, lookup, &err), 0);
	static al_gateway_env ge;
	al_gateway_env_fill(&ge, &cfg);
	/* A gateway without AIRLOCK_NET_POOL does not start: the default
	 * pool is passed as such. */
	assert_string_equal(value_of(ge.env, "AIRLOCK_NET_POOL"),
			    AL_NET_POOL_DEFAULT);
	assert_string_equal(value_of(ge.env, "AIRLOCK_GW_HEAD_TIMEOUT_MS"),
			    "30000");
	assert_string_equal(value_of(ge.env, "AIRLOCK_GW_IDLE_TIMEOUT_MS"),
			    "120000");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env_carries_the_checked_settings),
		cmocka_unit_test(test_env_has_the_defaults_resolved),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
