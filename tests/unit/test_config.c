/* Configuration from the environment: defaults, overrides, rejections,
 * derived paths and id validation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/config.h"
#include "base/json.h"

#include "fake_env.h"

static int load(const char *const *env, al_config *cfg, al_err *err)
{
	fake_env = env;
	al_err_clear(err);
	return al_config_load_from(cfg, fake_env_lookup, err);
}

static void test_defaults(void **state)
{
	(void)state;
	al_config cfg;
	al_err err;
	static const char *const env[] = {NULL};
	assert_int_equal(load(env, &cfg, &err), 0);
	char cwd[1024];
	assert_non_null(getcwd(cwd, sizeof cwd));
	char want[1100];
	snprintf(want, sizeof want, "%s/var", cwd);
	assert_string_equal(cfg.state_dir, want);
	snprintf(want, sizeof want, "%s/var/run", cwd);
	assert_string_equal(cfg.run_dir, want);
	snprintf(want, sizeof want, "%s/var/pool", cwd);
	assert_string_equal(cfg.pool_dir, want);
	snprintf(want, sizeof want,
		 "host=%s/var/run/pg dbname=airlock user=airlock", cwd);
	assert_string_equal(cfg.db_conninfo, want);
	assert_int_equal(cfg.default_memory_bytes, 512ull << 20);
	assert_int_equal(cfg.default_pids, 512);
	assert_int_equal(cfg.default_cpu_shares, 1024);
	assert_int_equal(cfg.default_timeout_s, 300);
	assert_int_equal(cfg.max_timeout_s, 86400);
	assert_int_equal(cfg.default_disk_mb, 4096);
	assert_int_equal(cfg.max_disk_mb, 65536);
	assert_int_equal(cfg.pool_full_pct, 95);
	assert_int_equal(cfg.egress_log_rate, AL_EGRESS_LOG_RATE_DEFAULT);
	assert_int_equal(cfg.egress_log_burst, AL_EGRESS_LOG_BURST_DEFAULT);
	assert_string_equal(cfg.net_pool, AL_NET_POOL_DEFAULT);
	assert_int_equal(cfg.gw_head_timeout_ms, 30000);
	assert_int_equal(cfg.gw_idle_timeout_ms, 120000);
	assert_true(cfg.sql_dir[0] == '/');
	assert_true(cfg.policies_dir[0] == '/');
	assert_true(cfg.libexec_dir[0] == '/');
}

static void test_overrides(void **state)
{
	(void)state;
	al_config cfg;
	al_err err;
	/* clang-format off */
	static const char *const env[] = {
		"AIRLOCK_STATE", "/srv/al/",
		"AIRLOCK_DB", "host=/x dbname=y",
		"AIRLOCK_SQL_DIR", "/usr/share/al/sql",
		"AIRLOCK_POLICIES", "/etc/al/policies",
		"AIRLOCK_LIBEXEC", "/usr/lib/al",
		"AIRLOCK_DEFAULT_MEMORY_MB", "256",
		"AIRLOCK_DEFAULT_PIDS", "64",
		"AIRLOCK_DEFAULT_CPU_SHARES", "512",
		"AIRLOCK_DEFAULT_DISK_MB", "1024",
		"AIRLOCK_MAX_DISK_MB", "2048",
		"AIRLOCK_POOL_FULL_PCT", "80",
		NULL,
	};
	/* clang-format on */
	assert_int_equal(load(env, &cfg, &err), 0);
	assert_string_equal(cfg.state_dir, "/srv/al");
	assert_string_equal(cfg.run_dir, "/srv/al/run");
	assert_string_equal(cfg.pool_dir, "/srv/al/pool");
	assert_string_equal(cfg.db_conninfo, "host=/x dbname=y");
	assert_string_equal(cfg.sql_dir, "/usr/share/al/sql");
	assert_string_equal(cfg.policies_dir, "/etc/al/policies");
	assert_string_equal(cfg.libexec_dir, "/usr/lib/al");
	assert_int_equal(cfg.default_memory_bytes, 256ull << 20);
	assert_int_equal(cfg.default_pids, 64);
	assert_int_equal(cfg.default_cpu_shares, 512);
	assert_int_equal(cfg.default_disk_mb, 1024);
	assert_int_equal(cfg.max_disk_mb, 2048);
	assert_int_equal(cfg.pool_full_pct, 80);
}

/* A maximum below the default disk size lowers the default. */
static void test_disk_default_capped(void **state)
{
	(void)state;
	al_config cfg;
	al_err err;
	static const char *const env[] = {"AIRLOCK_MAX_DISK_MB", "512", NULL};
	assert_int_equal(load(env, &cfg, &err), 0);
	assert_int_equal(cfg.max_disk_mb, 512);
	assert_int_equal(cfg.default_disk_mb, 512);
}

static void test_warm_pool_bounds(void **state)
{
	(void)state;
	al_config cfg;
	al_err err;
	assert_int_equal(load(NULL, &cfg, &err), 0);
	assert_int_equal(cfg.warm_pool, 2);
	assert_int_equal(cfg.warm_pool_max, 8);
	assert_int_equal(cfg.warm_pool_vm, 2);
	assert_int_equal(cfg.warm_pool_vm_max, 2);
	assert_int_equal(cfg.warm_pool_window_s, 30);
	static const char *const env[] = {"AIRLOCK_WARM_POOL",
					  "1",
					  "AIRLOCK_WARM_POOL_MAX",
					  "12",
					  "AIRLOCK_WARM_POOL_VM_MAX",
					  "5",
					  "AIRLOCK_WARM_POOL_WINDOW",
					  "7",
					  NULL};
	assert_int_equal(load(env, &cfg, &err), 0);
	assert_int_equal(cfg.warm_pool, 1);
	assert_int_equal(cfg.warm_pool_max, 12);
	assert_int_equal(cfg.warm_pool_vm_max, 5);
	assert_int_equal(cfg.warm_pool_window_s, 7);
	/* A minimum above the maximum raises the maximum. */
	static const char *const high[] = {"AIRLOCK_WARM_POOL", "20",
					   "AIRLOCK_WARM_POOL_VM", "3", NULL};
	assert_int_equal(load(high, &cfg, &err), 0);
	assert_int_equal(cfg.warm_pool_max, 20);
	assert_int_equal(cfg.warm_pool_vm_max, 3);
}

static void test_cpus(void **state)
{
	(void)state;
	al_config cfg;
	al_err err;
	uint32_t host = al_config_host_cpus();
	assert_true(host >= 1);
	const char *none[] = {NULL};
	assert_int_equal(load(none, &cfg, &err), 0);
	assert_int_equal(cfg.default_cpu_millis, 1000);
	assert_int_equal(cfg.max_cpu_millis, host * 1000);
	assert_int_equal(cfg.quota.cpu_millis, 100000);

	const char *frac[] = {"AIRLOCK_DEFAULT_CPUS",
			      "0.25",
			      "AIRLOCK_MAX_CPUS",
			      "0.5",
			      "AIRLOCK_QUOTA_CPUS",
			      "1.5",
			      NULL};
	assert_int_equal(load(frac, &cfg, &err), 0);
	assert_int_equal(cfg.default_cpu_millis, 250);
	assert_int_equal(cfg.max_cpu_millis, 500);
	assert_int_equal(cfg.quota.cpu_millis, 1500);
	assert_int_equal(al_config_check_cpus(&cfg, 500, &err), 0);
	assert_int_equal(al_config_check_cpus(&cfg, 0, &err), 0);
	assert_int_equal(al_config_check_cpus(&cfg, 501, &err), -1);
	assert_string_equal(err.msg, "'cpus' is at most 0.5 on this host "
				     "(AIRLOCK_MAX_CPUS)");

	/* Settings that cannot work stop the program at start, naming
	 * what to change. */
	char over[32];
	snprintf(over, sizeof over, "%u", host + 1);
	const char *big[] = {"AIRLOCK_MAX_CPUS", over, NULL};
	assert_int_equal(load(big, &cfg, &err), -1);
	assert_non_null(strstr(err.msg, "AIRLOCK_MAX_CPUS"));
	assert_non_null(strstr(err.msg, "CPUs of this host"));
	const char *above[] = {"AIRLOCK_DEFAULT_CPUS", "1", "AIRLOCK_MAX_CPUS",
			       "0.5", NULL};
	assert_int_equal(load(above, &cfg, &err), -1);
	assert_string_equal(err.msg, "AIRLOCK_DEFAULT_CPUS (1) is more than "
				     "AIRLOCK_MAX_CPUS (0.5)");
	static const char *const bad[] = {"0",	"0.009", "1.0001", "x",	  ".5",
					  "1.", "-1",	 "1e3",	   "1,5", " 1"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		const char *env[] = {"AIRLOCK_DEFAULT_CPUS", bad[i], NULL};
		if (load(env, &cfg, &err) != -1)
			fail_msg("AIRLOCK_DEFAULT_CPUS=%s accepted", bad[i]);
		assert_int_equal(err.code, AL_EINVAL);
		assert_non_null(strstr(err.msg, "AIRLOCK_DEFAULT_CPUS"));
	}
	const char *q0[] = {"AIRLOCK_QUOTA_CPUS", "0", NULL};
	assert_int_equal(load(q0, &cfg, &err), 0);
	assert_int_equal(cfg.quota.cpu_millis, 0);

	char s[AL_MILLIS_STRLEN];
	al_millis_format(1500, s);
	assert_string_equal(s, "1.5");
	al_millis_format(10, s);
	assert_string_equal(s, "0.01");
	al_millis_format(7000, s);
	assert_string_equal(s, "7");
	al_millis_format(1001, s);
	assert_string_equal(s, "1.001");
}

static void expect_bad(const char *var, const char *value)
{
	al_config cfg;
	al_err err;
	const char *env[] = {var, value, NULL};
	if (load(env, &cfg, &err) != -1)
		fail_msg("%s=%s accepted", var, value);
	assert_int_equal(err.code, AL_EINVAL);
	/* The message names the variable so an operator can fix it. */
	assert_non_null(strstr(err.msg, var));
}

static void test_rejects(void **state)
{
	(void)state;
	expect_bad("AIRLOCK_DEFAULT_MEMORY_MB", "abc");
	expect_bad("AIRLOCK_DEFAULT_MEMORY_MB", "12x");
	expect_bad("AIRLOCK_DEFAULT_MEMORY_MB", "-5");
	expect_bad("AIRLOCK_DEFAULT_MEMORY_MB", "1");
	expect_bad("AIRLOCK_DEFAULT_MEMORY_MB", "99999999999999999999999");
	expect_bad("AIRLOCK_DEFAULT_PIDS", "0");
	expect_bad("AIRLOCK_DEFAULT_CPU_SHARES", "1");
	expect_bad("AIRLOCK_MAX_DISK_MB", "8");
	expect_bad("AIRLOCK_DEFAULT_DISK_MB", "x");
	expect_bad("AIRLOCK_POOL_FULL_PCT", "0");
	expect_bad("AIRLOCK_WARM_POOL_MAX", "65");
	expect_bad("AIRLOCK_WARM_POOL_WINDOW", "0");
	expect_bad("AIRLOCK_POOL_FULL_PCT", "101");
	expect_bad("AIRLOCK_SQL_DIR", "relative/sql");
	expect_bad("AIRLOCK_LIBEXEC", "/bad\npath");
	expect_bad("AIRLOCK_STATE", "/with space");
	expect_bad("AIRLOCK_EGRESS_LOG_RATE", "0");
	expect_bad("AIRLOCK_EGRESS_LOG_RATE", "10001");
	expect_bad("AIRLOCK_EGRESS_LOG_RATE", "5/s");
	expect_bad("AIRLOCK_EGRESS_LOG_BURST", "0");
	/* Below the rate (the default 50). */
	expect_bad("AIRLOCK_EGRESS_LOG_BURST", "49");

	char longp[AL_PATH_MAX + 10];
	memset(longp, 'a', sizeof longp - 1);
	longp[0] = '/';
	longp[sizeof longp - 1] = '\0';
	expect_bad("AIRLOCK_STATE", longp);
	expect_bad("AIRLOCK_LIBEXEC", longp);
}

static void test_egress_log_rate(void **state)
{
	(void)state;
	al_config cfg;
	al_err err;
	static const char *const env[] = {"AIRLOCK_EGRESS_LOG_RATE", "5",
					  "AIRLOCK_EGRESS_LOG_BURST", "5",
					  NULL};
	assert_int_equal(load(env, &cfg, &err), 0);
	assert_int_equal(cfg.egress_log_rate, 5);
	assert_int_equal(cfg.egress_log_burst, 5);
	static const char *const low[] = {"AIRLOCK_EGRESS_LOG_RATE", "600",
					  NULL};
	assert_int_equal(load(low, &cfg, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	assert_non_null(strstr(err.msg, "AIRLOCK_EGRESS_LOG_BURST (500) must "
					"be at least AIRLOCK_EGRESS_LOG_RATE"));
}

static void test_drivers(void **state)
{
	(void)state;
	al_config cfg;
	al_err err;
	static const char *const none[] = {NULL};
	assert_int_equal(load(none, &cfg, &err), 0);
	assert_true(al_config_driver_enabled(&cfg, "ns"));
	assert_true(al_config_driver_enabled(&cfg, "vm"));
	assert_false(al_config_driver_enabled(&cfg, "xen"));
	assert_int_equal(al_config_driver_check(&cfg, "vm", &err), 0);

	static const char *const ns[] = {"AIRLOCK_DRIVERS", "ns", NULL};
	assert_int_equal(load(ns, &cfg, &err), 0);
	assert_true(al_config_driver_enabled(&cfg, "ns"));
	assert_false(al_config_driver_enabled(&cfg, "vm"));
	al_err_clear(&err);
	assert_int_equal(al_config_driver_check(&cfg, "vm", &err), -1);
	assert_int_equal(err.code, AL_EDISABLED);
	assert_int_equal(al_code_http_status(err.code), 422);
	assert_string_equal(err.msg,
			    "driver vm is disabled by AIRLOCK_DRIVERS=ns");

	static const char *const both[] = {"AIRLOCK_DRIVERS", "vm,ns", NULL};
	assert_int_equal(load(both, &cfg, &err), 0);
	assert_true(al_config_driver_enabled(&cfg, "ns"));
	assert_true(al_config_driver_enabled(&cfg, "vm"));

	static const char *const vm_default[] = {"AIRLOCK_DRIVERS", "vm",
						 "AIRLOCK_DEFAULT_DRIVER", "vm",
						 NULL};
	assert_int_equal(load(vm_default, &cfg, &err), 0);
	assert_false(al_config_driver_enabled(&cfg, "ns"));
	assert_string_equal(cfg.default_driver, "vm");

	/* The default must be one the operator enabled. */
	static const char *const off_default[] = {"AIRLOCK_DRIVERS", "ns",
						  "AIRLOCK_DEFAULT_DRIVER",
						  "vm", NULL};
	assert_int_equal(load(off_default, &cfg, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	assert_string_equal(err.msg, "AIRLOCK_DEFAULT_DRIVER=vm is not "
				     "enabled by AIRLOCK_DRIVERS=ns");

	expect_bad("AIRLOCK_DRIVERS", "kvm");
	expect_bad("AIRLOCK_DRIVERS", "ns,");
	expect_bad("AIRLOCK_DRIVERS", ",ns");
	expect_bad("AIRLOCK_DRIVERS", "ns,ns");
	expect_bad("AIRLOCK_DRIVERS", "ns vm");
	expect_bad("AIRLOCK_DRIVERS", "NS");
	expect_bad("AIRLOCK_DRIVERS", "ns,vm,ns,vm,ns");
}

static void test_relative_state(void **state)
{
	(void)state;
	al_config cfg;
	al_err err;
	static const char *const env[] = {"AIRLOCK_STATE", "./st", NULL};
	assert_int_equal(load(env, &cfg, &err), 0);
	char cwd[1024], want[1100];
	assert_non_null(getcwd(cwd, sizeof cwd));
	snprintf(want, sizeof want, "%s/st", cwd);
	assert_string_equal(cfg.state_dir, want);
}

static void test_paths(void **state)
{
	(void)state;
	al_config cfg;
	al_err err;
	static const char *const env[] = {"AIRLOCK_STATE", "/s", NULL};
	char out[AL_PATH_MAX];
	assert_int_equal(load(env, &cfg, &err), 0);
	assert_int_equal(al_config_sandbox_root(&cfg, "abc", out, sizeof out,
						&err),
			 0);
	assert_string_equal(out, "/s/pool/sandboxes/abc");
	assert_int_equal(al_config_template_root(&cfg, "minimal", out,
						 sizeof out, &err),
			 0);
	assert_string_equal(out, "/s/pool/templates/minimal");
	assert_int_equal(al_config_shim_socket(&cfg, "abc", out, sizeof out,
					       &err),
			 0);
	assert_string_equal(out, "/s/run/sbx/abc.sock");
	/* Ids that could escape the directory never become paths. */
	assert_int_equal(al_config_sandbox_root(&cfg, "../x", out, sizeof out,
						&err),
			 -1);
	assert_int_equal(err.code, AL_EINVAL);
	assert_int_equal(al_config_shim_socket(&cfg, "a/b", out, sizeof out,
					       &err),
			 -1);
	char small[16];
	assert_int_equal(al_config_sandbox_root(&cfg, "abc", small,
						sizeof small, &err),
			 -1);
}

static void test_id_valid(void **state)
{
	(void)state;
	assert_true(al_id_valid("a"));
	assert_true(al_id_valid("abc-123"));
	assert_true(al_id_valid("0abc"));
	char id63[64];
	memset(id63, 'a', 63);
	id63[63] = '\0';
	assert_true(al_id_valid(id63));
	char id64[65];
	memset(id64, 'a', 64);
	id64[64] = '\0';
	assert_false(al_id_valid(id64));
	assert_false(al_id_valid(NULL));
	assert_false(al_id_valid(""));
	assert_false(al_id_valid("-abc"));
	assert_false(al_id_valid("ABC"));
	assert_false(al_id_valid("a_b"));
	assert_false(al_id_valid("a.b"));
	assert_false(al_id_valid(".."));
	assert_false(al_id_valid("a/b"));
	assert_false(al_id_valid("a b"));
}

static void test_limits_and_quotas(void **state)
{
	(void)state;
	al_config cfg;
	al_err err;
	static const char *const none[] = {NULL};
	assert_int_equal(load(none, &cfg, &err), 0);
	assert_int_equal(cfg.max_memory_mb, 16384);
	assert_int_equal(cfg.quota.running_sandboxes, 100);
	assert_int_equal(cfg.quota.creates_per_minute, 600);
	/* clang-format off */
	static const char *const env[] = {
		"AIRLOCK_MAX_MEMORY_MB", "2048",
		"AIRLOCK_MAX_PIDS", "1000",
		"AIRLOCK_MAX_CPU_SHARES", "4096",
		"AIRLOCK_MAX_TIMEOUT", "60",
		"AIRLOCK_QUOTA_SANDBOXES", "7",
		"AIRLOCK_QUOTA_MEMORY_MB", "0",
		"AIRLOCK_QUOTA_DISK_MB", "9000",
		"AIRLOCK_QUOTA_BUILDS", "1",
		"AIRLOCK_QUOTA_STREAMS", "3",
		"AIRLOCK_QUOTA_CREATES_PER_MINUTE", "30",
		NULL,
	};
	/* clang-format on */
	assert_int_equal(load(env, &cfg, &err), 0);
	assert_int_equal(cfg.max_memory_mb, 2048);
	assert_int_equal(cfg.max_pids, 1000);
	assert_int_equal(cfg.max_cpu_shares, 4096);
	assert_int_equal(cfg.max_timeout_s, 60);
	/* The default lifetime never exceeds the maximum. */
	assert_int_equal(cfg.default_timeout_s, 60);
	assert_int_equal(cfg.quota.running_sandboxes, 7);
	assert_int_equal(cfg.quota.memory_mb, 0);
	assert_int_equal(cfg.quota.disk_mb, 9000);
	assert_int_equal(cfg.quota.concurrent_builds, 1);
	assert_int_equal(cfg.quota.concurrent_streams, 3);
	assert_int_equal(cfg.quota.creates_per_minute, 30);

	assert_int_equal(al_config_check_maxima(&cfg, 2048, 1000, 4096, 0,
						&err),
			 0);
	assert_int_equal(al_config_check_maxima(&cfg, 0, 0, 0, 0, &err), 0);
	assert_int_equal(al_config_check_maxima(&cfg, 2049, 0, 0, 0, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	assert_non_null(strstr(err.msg, "2048"));
	assert_non_null(strstr(err.msg, "AIRLOCK_MAX_MEMORY_MB"));
	assert_int_equal(al_config_check_maxima(&cfg, 0, 1001, 0, 0, &err), -1);
	assert_non_null(strstr(err.msg, "AIRLOCK_MAX_PIDS"));
	assert_int_equal(al_config_check_maxima(&cfg, 0, 0, 4097, 0, &err), -1);
	assert_non_null(strstr(err.msg, "AIRLOCK_MAX_CPU_SHARES"));
	assert_int_equal(al_config_check_maxima(&cfg, 0, 0, 0, cfg.max_disk_mb,
						&err),
			 0);
	assert_int_equal(al_config_check_maxima(&cfg, 0, 0, 0,
						cfg.max_disk_mb + 1, &err),
			 -1);
	assert_non_null(strstr(err.msg, "AIRLOCK_MAX_DISK_MB"));

	expect_bad("AIRLOCK_MAX_MEMORY_MB", "8");
	expect_bad("AIRLOCK_MAX_TIMEOUT", "0");
	expect_bad("AIRLOCK_QUOTA_SANDBOXES", "-1");
	expect_bad("AIRLOCK_QUOTA_STREAMS", "many");
}

static void test_pool_settings(void **state)
{
	(void)state;
	al_config cfg;
	al_err err;
	static const char *const none[] = {NULL};
	assert_int_equal(load(none, &cfg, &err), 0);
	/* 0: a tenth of the pool (core/pool/poolcap.h); half of that per
	 * project. */
	assert_int_equal(cfg.pool_reserve_mb, 0);
	assert_int_equal(cfg.pool_project_pct, 50);
	static const char *const env[] = {"AIRLOCK_POOL_RESERVE_MB", "2048",
					  "AIRLOCK_POOL_PROJECT_PCT", "25",
					  NULL};
	assert_int_equal(load(env, &cfg, &err), 0);
	assert_int_equal(cfg.pool_reserve_mb, 2048);
	assert_int_equal(cfg.pool_project_pct, 25);
	expect_bad("AIRLOCK_POOL_PROJECT_PCT", "0");
	expect_bad("AIRLOCK_POOL_PROJECT_PCT", "101");
	expect_bad("AIRLOCK_POOL_RESERVE_MB", "-5");
	expect_bad("AIRLOCK_POOL_RESERVE_MB", "lots");
}

/* What every gateway is started with (core/net/gwlaunch): checked once
 * here, so that a bad value stops the programs rather than falling back
 * to a default in the gateways. */
static void test_gateway_settings(void **state)
{
	(void)state;
	al_config cfg;
	al_err err;
	static const char *const env[] = {"AIRLOCK_NET_POOL",
					  "10.77.0.0/16",
					  "AIRLOCK_GW_HEAD_TIMEOUT_MS",
					  "1500",
					  "AIRLOCK_GW_IDLE_TIMEOUT_MS",
					  "86400000",
					  NULL};
	assert_int_equal(load(env, &cfg, &err), 0);
	assert_string_equal(cfg.net_pool, "10.77.0.0/16");
	assert_int_equal(cfg.gw_head_timeout_ms, 1500);
	assert_int_equal(cfg.gw_idle_timeout_ms, 86400000);
	/* Empty is unset: the default. */
	static const char *const empty[] = {"AIRLOCK_NET_POOL", "", NULL};
	assert_int_equal(load(empty, &cfg, &err), 0);
	assert_string_equal(cfg.net_pool, "10.200.0.0/16");

	expect_bad("AIRLOCK_GW_HEAD_TIMEOUT_MS", "0");
	expect_bad("AIRLOCK_GW_HEAD_TIMEOUT_MS", "86400001");
	expect_bad("AIRLOCK_GW_HEAD_TIMEOUT_MS", "30s");
	expect_bad("AIRLOCK_GW_IDLE_TIMEOUT_MS", "-1");
	expect_bad("AIRLOCK_GW_IDLE_TIMEOUT_MS", "0x10");
	static const char *const pools[] = {
		"10.77.0.1/16", /* host bits */
		"10.77.0.0/31", /* smaller than one slot */
		"198.18.0.0/16", "127.0.0.0/24",  "169.254.0.0/16",
		"224.0.0.0/8",	 "0.0.0.0/0",	  "10.77.0.0",
		"fd00::/64",	 "10.77.0.0/16 ",
	};
	for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++)
		expect_bad("AIRLOCK_NET_POOL", pools[i]);
	/* The message says what is allowed and what is wrong. */
	static const char *const synth[] = {"AIRLOCK_NET_POOL", "198.18.0.0/16",
					    NULL};
	assert_int_equal(load(synth, &cfg, &err), -1);
	assert_non_null(strstr(err.msg, "a.b.c.d/len"));
	assert_non_null(strstr(err.msg, "overlaps 198.18.0.0/15"));
	static const char *const range[] = {"AIRLOCK_GW_IDLE_TIMEOUT_MS", "0",
					    NULL};
	assert_int_equal(load(range, &cfg, &err), -1);
	assert_string_equal(err.msg, "AIRLOCK_GW_IDLE_TIMEOUT_MS must be "
				     "between 1 and 86400000");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_overrides),
		cmocka_unit_test(test_disk_default_capped),
		cmocka_unit_test(test_warm_pool_bounds),
		cmocka_unit_test(test_rejects),
		cmocka_unit_test(test_egress_log_rate),
		cmocka_unit_test(test_drivers),
		cmocka_unit_test(test_relative_state),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_id_valid),
		cmocka_unit_test(test_limits_and_quotas),
		cmocka_unit_test(test_pool_settings),
		cmocka_unit_test(test_cpus),
		cmocka_unit_test(test_gateway_settings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
