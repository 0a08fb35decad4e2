#include "base/config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/json.h"

#define MIB (1024ull * 1024ull)

static const char *env_lookup(const char *name)
{
	return getenv(name);
}

/* A configured path must be absolute, free of control characters and fit
 * our fixed buffers with room for the suffixes we append later. */
static int set_path(char *dst, const char *var, const char *value, al_err *err)
{
	size_t n = strlen(value);

	if (n == 0 || value[0] != '/')
		return al_err_set(err, AL_EINVAL, 0,
				  "%s must be an absolute path", var);
	if (n >= AL_PATH_MAX - 96)
		return al_err_set(err, AL_EINVAL, 0, "%s is too long", var);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f)
			return al_err_set(err, AL_EINVAL, 0,
					  "%s contains a control character",
					  var);
	memcpy(dst, value, n + 1);
	/* Trailing slashes would double up when we join paths. */
	while (n > 1 && dst[n - 1] == '/')
		dst[--n] = '\0';
	return 0;
}

/* Make a possibly relative directory absolute against the cwd; the
 * directory does not have to exist yet. */
static int absolutize(char *out, size_t outlen, const char *var,
		      const char *value, al_err *err)
{
	if (value[0] == '/') {
		if (snprintf(out, outlen, "%s", value) >= (int)outlen)
			return al_err_set(err, AL_EINVAL, 0, "%s is too long",
					  var);
		return 0;
	}
	char cwd[PATH_MAX];
	if (getcwd(cwd, sizeof cwd) == NULL)
		return al_err_sys(err, AL_ESYS, errno, "getcwd for %s", var);
	const char *rel = value;
	while (rel[0] == '.' && rel[1] == '/')
		rel += 2;
	if (strcmp(rel, ".") == 0)
		rel = "";
	int n = snprintf(out, outlen, "%s%s%s", cwd,
			 (rel[0] != '\0' && strcmp(cwd, "/") != 0) ? "/" : "",
			 rel);
	if (n < 0 || (size_t)n >= outlen)
		return al_err_set(err, AL_EINVAL, 0, "%s is too long", var);
	return 0;
}

static int parse_u64(const char *var, const char *value, uint64_t min,
		     uint64_t max, uint64_t *out, al_err *err)
{
	if (value[0] < '0' || value[0] > '9')
		return al_err_set(err, AL_EINVAL, 0,
				  "%s must be a decimal number", var);
	errno = 0;
	char *end = NULL;
	unsigned long long v = strtoull(value, &end, 10);
	if (errno != 0 || end == NULL || *end != '\0')
		return al_err_set(err, AL_EINVAL, 0,
				  "%s must be a decimal number", var);
	if (v < min || v > max)
		return al_err_set(err, AL_EINVAL, 0,
				  "%s must be between %llu and %llu", var,
				  (unsigned long long)min,
				  (unsigned long long)max);
	*out = v;
	return 0;
}

/* A number of CPUs, "2" or "0.25" (at most 3 decimals), in thousandths
 * within min..max. */
static int parse_millis(const char *var, const char *value, uint64_t min,
			uint64_t max, uint64_t *out, al_err *err)
{
	uint64_t v = 0;
	size_t i = 0, decimals = 0;
	int digits = 0, point = 0;
	for (; value[i] != '\0'; i++) {
		char c = value[i];
		if (c == '.' && !point && digits > 0) {
			point = 1;
			continue;
		}
		if (c < '0' || c > '9' || (point && ++decimals > 3) ||
		    v > UINT64_C(1) << 40)
			goto bad;
		v = v * 10 + (uint64_t)(c - '0');
		digits++;
	}
	if (digits == 0 || (point && decimals == 0))
		goto bad;
	for (; decimals < 3; decimals++)
		v *= 10;
	if (v < min || v > max) {
		char lo[AL_MILLIS_STRLEN], hi[AL_MILLIS_STRLEN];
		al_millis_format(min, lo);
		al_millis_format(max, hi);
		return al_err_set(err, AL_EINVAL, 0,
				  "%s must be between %s and %s", var, lo, hi);
	}
	*out = v;
	return 0;
bad:
	return al_err_set(err, AL_EINVAL, 0,
			  "%s must be a number of CPUs (e.g. 2 or 0.5, at "
			  "most 3 decimals)",
			  var);
}

uint32_t al_config_host_cpus(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
		return (uint32_t)CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (uint32_t)n : 1;
}

/* AIRLOCK_DEFAULT_CPUS, AIRLOCK_MAX_CPUS and AIRLOCK_QUOTA_CPUS. A cap
 * above the host's CPUs would cap nothing, and a default above the
 * maximum would make every create that names no "cpus" fail: both are
 * refused here, at start, rather than per request. */
static int load_cpus(al_config *cfg, const char *(*lookup)(const char *),
		     al_err *err)
{
	uint64_t host = (uint64_t)al_config_host_cpus() * 1000, n;
	const char *v;
	cfg->max_cpu_millis = (uint32_t)host;
	cfg->default_cpu_millis = 1000;
	v = lookup("AIRLOCK_MAX_CPUS");
	if (v != NULL && v[0] != '\0') {
		if (parse_millis("AIRLOCK_MAX_CPUS", v, AL_CPU_MILLIS_MIN,
				 AL_CPU_MILLIS_LIMIT, &n, err) < 0)
			return -1;
		if (n > host) {
			char h[AL_MILLIS_STRLEN];
			al_millis_format(host, h);
			return al_err_set(err, AL_EINVAL, 0,
					  "AIRLOCK_MAX_CPUS=%s is more than "
					  "the %s CPUs of this host",
					  v, h);
		}
		cfg->max_cpu_millis = (uint32_t)n;
	}
	v = lookup("AIRLOCK_DEFAULT_CPUS");
	if (v != NULL && v[0] != '\0') {
		if (parse_millis("AIRLOCK_DEFAULT_CPUS", v, AL_CPU_MILLIS_MIN,
				 AL_CPU_MILLIS_LIMIT, &n, err) < 0)
			return -1;
		cfg->default_cpu_millis = (uint32_t)n;
	}
	if (cfg->default_cpu_millis > cfg->max_cpu_millis) {
		char d[AL_MILLIS_STRLEN], m[AL_MILLIS_STRLEN];
		al_millis_format(cfg->default_cpu_millis, d);
		al_millis_format(cfg->max_cpu_millis, m);
		return al_err_set(err, AL_EINVAL, 0,
				  "AIRLOCK_DEFAULT_CPUS (%s) is more than "
				  "AIRLOCK_MAX_CPUS (%s)",
				  d, m);
	}
	v = lookup("AIRLOCK_QUOTA_CPUS");
	if (v != NULL && v[0] != '\0') {
		if (parse_millis("AIRLOCK_QUOTA_CPUS", v, 0, UINT64_C(1) << 40,
				 &n, err) < 0)
			return -1;
		cfg->quota.cpu_millis = n;
	}
	return 0;
}

static int dir_exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Directory of the running binary, for defaults that live next to the
 * build tree. Empty string when it cannot be found. */
static void exe_dir(char *out, size_t outlen)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);

	out[0] = '\0';
	if (n <= 0)
		return;
	buf[n] = '\0';
	char *slash = strrchr(buf, '/');
	if (slash == NULL || slash == buf)
		return;
	*slash = '\0';
	if ((size_t)(slash - buf) < outlen)
		memcpy(out, buf, (size_t)(slash - buf) + 1);
}

/* A directory shipped in the source tree: var when set, else <rel> of
 * the checkout the binary was built in (build/<prog> and
 * build-san/<prog> sit beside it), else the installed path. */
static int tree_dir(char out[AL_PATH_MAX], const char *(*lookup)(const char *),
		    const char *var, const char *bindir, const char *rel,
		    const char *installed, al_err *err)
{
	const char *v = lookup(var);
	if (v != NULL && v[0] != '\0')
		return set_path(out, var, v, err);
	char guess[AL_PATH_MAX + 16];
	char real[PATH_MAX];
	snprintf(guess, sizeof guess, "%s/../%s", bindir, rel);
	if (bindir[0] != '\0' && dir_exists(guess) &&
	    realpath(guess, real) != NULL && strlen(real) < 400)
		snprintf(out, AL_PATH_MAX, "%s", real);
	else
		snprintf(out, AL_PATH_MAX, "%s", installed);
	return 0;
}

/* Unsigned settings of the form VAR=N, each with its range. */
static const struct limit_var {
	const char *var;
	size_t offset;
	int u32; /* the field is a uint32_t, else a uint64_t */
	uint64_t min, max;
} limit_vars[] = {
	{"AIRLOCK_MAX_MEMORY_MB", offsetof(al_config, max_memory_mb), 0, 16,
	 1024 * 1024},
	{"AIRLOCK_MAX_PIDS", offsetof(al_config, max_pids), 1, 8, 4194304},
	{"AIRLOCK_MAX_CPU_SHARES", offsetof(al_config, max_cpu_shares), 1, 2,
	 262144},
	{"AIRLOCK_MAX_TIMEOUT", offsetof(al_config, max_timeout_s), 1, 1,
	 365 * 86400},
	{"AIRLOCK_EGRESS_LOG_RATE", offsetof(al_config, egress_log_rate), 1, 1,
	 10000},
	{"AIRLOCK_EGRESS_LOG_BURST", offsetof(al_config, egress_log_burst), 1,
	 1, 100000},
	{"AIRLOCK_QUOTA_SANDBOXES",
	 offsetof(al_config, quota.running_sandboxes), 0, 0, 1000000},
	{"AIRLOCK_QUOTA_MEMORY_MB", offsetof(al_config, quota.memory_mb), 0, 0,
	 1ull << 40},
	{"AIRLOCK_QUOTA_DISK_MB", offsetof(al_config, quota.disk_mb), 0, 0,
	 1ull << 40},
	{"AIRLOCK_QUOTA_BUILDS", offsetof(al_config, quota.concurrent_builds),
	 0, 0, 1000000},
	{"AIRLOCK_QUOTA_STREAMS", offsetof(al_config, quota.concurrent_streams),
	 0, 0, 100000},
	{"AIRLOCK_QUOTA_CREATES_PER_MINUTE",
	 offsetof(al_config, quota.creates_per_minute), 0, 0, 1000000},
	{"AIRLOCK_POOL_RESERVE_MB", offsetof(al_config, pool_reserve_mb), 0, 0,
	 1ull << 40},
	{"AIRLOCK_POOL_PROJECT_PCT", offsetof(al_config, pool_project_pct), 1,
	 1, 100},
	{"AIRLOCK_GW_HEAD_TIMEOUT_MS", offsetof(al_config, gw_head_timeout_ms),
	 1, 1, AL_GW_TIMEOUT_MS_MAX},
	{"AIRLOCK_GW_IDLE_TIMEOUT_MS", offsetof(al_config, gw_idle_timeout_ms),
	 1, 1, AL_GW_TIMEOUT_MS_MAX},
};

static int load_limits(al_config *cfg, const char *(*lookup)(const char *),
		       al_err *err)
{
	for (size_t i = 0; i < sizeof limit_vars / sizeof limit_vars[0]; i++) {
		const struct limit_var *l = &limit_vars[i];
		const char *v = lookup(l->var);
		uint64_t n;
		if (v == NULL || v[0] == '\0')
			continue;
		if (parse_u64(l->var, v, l->min, l->max, &n, err) < 0)
			return -1;
		char *field = (char *)cfg + l->offset;
		if (l->u32) {
			uint32_t n32 = (uint32_t)n;
			memcpy(field, &n32, sizeof n32);
		} else {
			memcpy(field, &n, sizeof n);
		}
	}
	if (cfg->default_timeout_s > cfg->max_timeout_s)
		cfg->default_timeout_s = cfg->max_timeout_s;
	/* A burst below the rate cuts the rate itself whenever decisions come
	 * in clumps (as they do: a batch of lookups, a page's requests). */
	if (cfg->egress_log_burst < cfg->egress_log_rate)
		return al_err_set(err, AL_EINVAL, 0,
				  "AIRLOCK_EGRESS_LOG_BURST (%u) must be at "
				  "least AIRLOCK_EGRESS_LOG_RATE (%u)",
				  cfg->egress_log_burst, cfg->egress_log_rate);
	return 0;
}

/* AIRLOCK_NET_POOL: checked here so that every program refuses a bad one
 * at start, and kept in one spelling for the gateways it is passed to. */
static int load_net_pool(al_config *cfg, const char *(*lookup)(const char *),
			 al_err *err)
{
	const char *v = lookup("AIRLOCK_NET_POOL");
	if (v == NULL || v[0] == '\0')
		v = AL_NET_POOL_DEFAULT;
	al_net_prefix pool;
	if (al_net_pool_parse(v, &pool, err) < 0) {
		al_err_wrap(err, "AIRLOCK_NET_POOL (an IPv4 prefix a.b.c.d/len "
				 "of at least a /30)");
		return -1;
	}
	al_net_prefix_format(&pool, cfg->net_pool);
	return 0;
}

int al_config_check_maxima(const al_config *cfg, uint64_t memory_mb,
			   uint32_t pids, uint32_t cpu_shares, uint32_t disk_mb,
			   al_err *err)
{
	if (memory_mb > cfg->max_memory_mb)
		return al_err_set(err, AL_EINVAL, 0,
				  "'memory_mb' is at most %llu on this host "
				  "(AIRLOCK_MAX_MEMORY_MB)",
				  (unsigned long long)cfg->max_memory_mb);
	if (pids > cfg->max_pids)
		return al_err_set(err, AL_EINVAL, 0,
				  "'pids' is at most %u on this host "
				  "(AIRLOCK_MAX_PIDS)",
				  cfg->max_pids);
	if (cpu_shares > cfg->max_cpu_shares)
		return al_err_set(err, AL_EINVAL, 0,
				  "'cpu_shares' is at most %u on this host "
				  "(AIRLOCK_MAX_CPU_SHARES)",
				  cfg->max_cpu_shares);
	if (disk_mb > cfg->max_disk_mb)
		return al_err_set(err, AL_EINVAL, 0,
				  "'disk_mb' is at most %u on this host "
				  "(AIRLOCK_MAX_DISK_MB)",
				  cfg->max_disk_mb);
	return 0;
}

int al_config_check_cpus(const al_config *cfg, uint32_t cpu_millis, al_err *err)
{
	if (cpu_millis <= cfg->max_cpu_millis)
		return 0;
	char m[AL_MILLIS_STRLEN];
	al_millis_format(cfg->max_cpu_millis, m);
	return al_err_set(
		err, AL_EINVAL, 0,
		"'cpus' is at most %s on this host (AIRLOCK_MAX_CPUS)", m);
}

static unsigned driver_bit(const char *name, size_t len)
{
	if (len == 2 && strncmp(name, "ns", 2) == 0)
		return AL_CONFIG_DRIVER_NS;
	if (len == 2 && strncmp(name, "vm", 2) == 0)
		return AL_CONFIG_DRIVER_VM;
	return 0;
}

/* "ns", "vm", "ns,vm" (either order, each once). */
static int parse_drivers(al_config *cfg, const char *v, al_err *err)
{
	if (strlen(v) >= sizeof cfg->drivers_setting)
		return al_err_set(err, AL_EINVAL, 0,
				  "AIRLOCK_DRIVERS must be ns, vm or ns,vm");
	unsigned set = 0;
	for (const char *p = v;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
		unsigned bit = driver_bit(p, len);
		if (bit == 0 || (set & bit) != 0)
			return al_err_set(err, AL_EINVAL, 0,
					  "AIRLOCK_DRIVERS must be ns, vm or "
					  "ns,vm");
		set |= bit;
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	cfg->drivers = set;
	snprintf(cfg->drivers_setting, sizeof cfg->drivers_setting, "%s", v);
	return 0;
}

int al_config_load_from(al_config *cfg, const char *(*lookup)(const char *),
			al_err *err)
{
	char tmp[AL_PATH_MAX];
	const char *v;
	uint64_t n;

	memset(cfg, 0, sizeof *cfg);

	v = lookup("AIRLOCK_STATE");
	if (v == NULL || v[0] == '\0')
		v = "var";
	if (absolutize(tmp, sizeof tmp, "AIRLOCK_STATE", v, err) < 0 ||
	    set_path(cfg->state_dir, "AIRLOCK_STATE", tmp, err) < 0)
		return -1;
	/* set_path left 96 bytes of room, so these cannot truncate. */
	if (snprintf(cfg->run_dir, sizeof cfg->run_dir, "%s/run",
		     cfg->state_dir) >= (int)sizeof cfg->run_dir ||
	    snprintf(cfg->pool_dir, sizeof cfg->pool_dir, "%s/pool",
		     cfg->state_dir) >= (int)sizeof cfg->pool_dir)
		return al_err_set(err, AL_EINVAL, 0, "AIRLOCK_STATE too long");

	v = lookup("AIRLOCK_DB");
	if (v != NULL && v[0] != '\0') {
		if (strlen(v) >= sizeof cfg->db_conninfo)
			return al_err_set(err, AL_EINVAL, 0,
					  "AIRLOCK_DB is too long");
		snprintf(cfg->db_conninfo, sizeof cfg->db_conninfo, "%s", v);
	} else {
		int w = snprintf(cfg->db_conninfo, sizeof cfg->db_conninfo,
				 "host=%s/pg dbname=airlock user=airlock",
				 cfg->run_dir);
		if (w < 0 || (size_t)w >= sizeof cfg->db_conninfo)
			return al_err_set(err, AL_EINVAL, 0,
					  "AIRLOCK_STATE is too long");
		/* A space in the path would split the conninfo keyword. */
		if (strchr(cfg->run_dir, ' ') != NULL ||
		    strchr(cfg->run_dir, '\'') != NULL)
			return al_err_set(err, AL_EINVAL, 0,
					  "AIRLOCK_STATE must not contain "
					  "spaces or quotes (set AIRLOCK_DB)");
	}

	char bindir[AL_PATH_MAX];
	exe_dir(bindir, sizeof bindir);

	if (tree_dir(cfg->sql_dir, lookup, "AIRLOCK_SQL_DIR", bindir,
		     "core/model/sql", "/usr/share/airlock/sql", err) < 0 ||
	    tree_dir(cfg->policies_dir, lookup, "AIRLOCK_POLICIES", bindir,
		     "policies", "/etc/airlock/policies", err) < 0)
		return -1;

	v = lookup("AIRLOCK_LIBEXEC");
	if (v != NULL && v[0] != '\0') {
		if (set_path(cfg->libexec_dir, "AIRLOCK_LIBEXEC", v, err) < 0)
			return -1;
	} else if (bindir[0] != '\0' && strlen(bindir) < 400) {
		snprintf(cfg->libexec_dir, sizeof cfg->libexec_dir, "%s",
			 bindir);
	} else {
		snprintf(cfg->libexec_dir, sizeof cfg->libexec_dir,
			 "/usr/libexec/airlock");
	}

	v = lookup("AIRLOCK_VM_TEMPLATE_CACHE");
	if (v != NULL && v[0] != '\0' &&
	    set_path(cfg->vm_template_cache, "AIRLOCK_VM_TEMPLATE_CACHE", v,
		     err) < 0)
		return -1;

	cfg->default_memory_bytes = 512 * MIB;
	cfg->default_pids = 512;
	cfg->default_cpu_shares = 1024;
	cfg->default_disk_mb = 4096;
	cfg->max_disk_mb = 65536;
	cfg->egress_retention_days = 30;
	cfg->egress_log_rate = AL_EGRESS_LOG_RATE_DEFAULT;
	cfg->egress_log_burst = AL_EGRESS_LOG_BURST_DEFAULT;
	cfg->audit_retention_days = 90;
	cfg->gw_head_timeout_ms = AL_GW_HEAD_TIMEOUT_MS_DEFAULT;
	cfg->gw_idle_timeout_ms = AL_GW_IDLE_TIMEOUT_MS_DEFAULT;
	cfg->pool_full_pct = 95;
	cfg->pool_reserve_mb =
		0; /* a tenth of the pool (core/pool/poolcap.h) */
	cfg->pool_project_pct = 50;
	cfg->default_timeout_s = 300;
	cfg->max_timeout_s = 86400;
	cfg->warm_pool = 2;
	cfg->warm_pool_vm = 2;
	cfg->warm_pool_max = 8;
	cfg->warm_pool_vm_max = 2;
	cfg->warm_pool_window_s = 30;
	cfg->default_driver[0] = '\0';
	cfg->max_memory_mb = 16384;
	cfg->max_pids = 65536;
	cfg->max_cpu_shares = 262144;
	cfg->quota = (al_quota){
		.running_sandboxes = 100,
		.memory_mb = 262144,
		.disk_mb = 1048576,
		.concurrent_builds = 4,
		.concurrent_streams = 64,
		.creates_per_minute = 600,
		.cpu_millis = 100000,
	};
	cfg->drivers = AL_CONFIG_DRIVER_NS | AL_CONFIG_DRIVER_VM;

	v = lookup("AIRLOCK_DEFAULT_MEMORY_MB");
	if (v != NULL && v[0] != '\0') {
		if (parse_u64("AIRLOCK_DEFAULT_MEMORY_MB", v, 16, 1024 * 1024,
			      &n, err) < 0)
			return -1;
		cfg->default_memory_bytes = n * MIB;
	}
	v = lookup("AIRLOCK_DEFAULT_PIDS");
	if (v != NULL && v[0] != '\0') {
		if (parse_u64("AIRLOCK_DEFAULT_PIDS", v, 8, 4194304, &n, err) <
		    0)
			return -1;
		cfg->default_pids = (uint32_t)n;
	}
	static const struct {
		const char *name;
		uint64_t lo, hi;
		size_t off;
	} pool_vars[] = {
		{"AIRLOCK_WARM_POOL", 0, 64, offsetof(al_config, warm_pool)},
		{"AIRLOCK_WARM_POOL_VM", 0, 64,
		 offsetof(al_config, warm_pool_vm)},
		{"AIRLOCK_WARM_POOL_MAX", 0, 64,
		 offsetof(al_config, warm_pool_max)},
		{"AIRLOCK_WARM_POOL_VM_MAX", 0, 64,
		 offsetof(al_config, warm_pool_vm_max)},
		{"AIRLOCK_WARM_POOL_WINDOW", 1, 3600,
		 offsetof(al_config, warm_pool_window_s)},
	};
	for (size_t i = 0; i < sizeof pool_vars / sizeof pool_vars[0]; i++) {
		v = lookup(pool_vars[i].name);
		if (v == NULL || v[0] == '\0')
			continue;
		if (parse_u64(pool_vars[i].name, v, pool_vars[i].lo,
			      pool_vars[i].hi, &n, err) < 0)
			return -1;
		*(uint32_t *)((char *)cfg + pool_vars[i].off) = (uint32_t)n;
	}
	/* A minimum above the default maximum raises the maximum. */
	if (cfg->warm_pool_max < cfg->warm_pool)
		cfg->warm_pool_max = cfg->warm_pool;
	if (cfg->warm_pool_vm_max < cfg->warm_pool_vm)
		cfg->warm_pool_vm_max = cfg->warm_pool_vm;
	v = lookup("AIRLOCK_DRIVERS");
	if (v != NULL && v[0] != '\0' && parse_drivers(cfg, v, err) < 0)
		return -1;
	v = lookup("AIRLOCK_DEFAULT_DRIVER");
	if (v != NULL && v[0] != '\0') {
		if (strcmp(v, "ns") != 0 && strcmp(v, "vm") != 0)
			return al_err_set(err, AL_EINVAL, 0,
					  "AIRLOCK_DEFAULT_DRIVER must be ns "
					  "or vm");
		if (!al_config_driver_enabled(cfg, v))
			return al_err_set(err, AL_EINVAL, 0,
					  "AIRLOCK_DEFAULT_DRIVER=%s is not "
					  "enabled by AIRLOCK_DRIVERS=%s",
					  v, cfg->drivers_setting);
		snprintf(cfg->default_driver, sizeof cfg->default_driver, "%s",
			 v);
	}
	v = lookup("AIRLOCK_MAX_DISK_MB");
	if (v != NULL && v[0] != '\0') {
		if (parse_u64("AIRLOCK_MAX_DISK_MB", v, AL_DISK_MB_MIN,
			      AL_DISK_MB_LIMIT, &n, err) < 0)
			return -1;
		cfg->max_disk_mb = (uint32_t)n;
	}
	v = lookup("AIRLOCK_DEFAULT_DISK_MB");
	if (v != NULL && v[0] != '\0') {
		if (parse_u64("AIRLOCK_DEFAULT_DISK_MB", v, AL_DISK_MB_MIN,
			      AL_DISK_MB_LIMIT, &n, err) < 0)
			return -1;
		cfg->default_disk_mb = (uint32_t)n;
	}
	/* A lowered maximum lowers the default with it. */
	if (cfg->default_disk_mb > cfg->max_disk_mb)
		cfg->default_disk_mb = cfg->max_disk_mb;
	v = lookup("AIRLOCK_POOL_FULL_PCT");
	if (v != NULL && v[0] != '\0') {
		if (parse_u64("AIRLOCK_POOL_FULL_PCT", v, 1, 100, &n, err) < 0)
			return -1;
		cfg->pool_full_pct = (uint32_t)n;
	}
	v = lookup("AIRLOCK_EGRESS_RETENTION_DAYS");
	if (v != NULL && v[0] != '\0') {
		if (parse_u64("AIRLOCK_EGRESS_RETENTION_DAYS", v, 1, 3650, &n,
			      err) < 0)
			return -1;
		cfg->egress_retention_days = (uint32_t)n;
	}
	v = lookup("AIRLOCK_AUDIT_RETENTION_DAYS");
	if (v != NULL && v[0] != '\0') {
		if (parse_u64("AIRLOCK_AUDIT_RETENTION_DAYS", v, 1, 3650, &n,
			      err) < 0)
			return -1;
		cfg->audit_retention_days = (uint32_t)n;
	}
	v = lookup("AIRLOCK_DEFAULT_CPU_SHARES");
	if (v != NULL && v[0] != '\0') {
		if (parse_u64("AIRLOCK_DEFAULT_CPU_SHARES", v, 2, 262144, &n,
			      err) < 0)
			return -1;
		cfg->default_cpu_shares = (uint32_t)n;
	}
	if (load_limits(cfg, lookup, err) < 0 ||
	    load_cpus(cfg, lookup, err) < 0 ||
	    load_net_pool(cfg, lookup, err) < 0)
		return -1;
	return 0;
}

int al_config_load(al_config *cfg, al_err *err)
{
	return al_config_load_from(cfg, env_lookup, err);
}

int al_config_driver_enabled(const al_config *cfg, const char *name)
{
	unsigned bit = name != NULL ? driver_bit(name, strlen(name)) : 0;
	return (cfg->drivers & bit) != 0;
}

int al_config_driver_check(const al_config *cfg, const char *name, al_err *err)
{
	if (al_config_driver_enabled(cfg, name))
		return 0;
	if (name == NULL || driver_bit(name, strlen(name)) == 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "unknown driver (ns or vm)");
	return al_err_set(err, AL_EDISABLED, 0,
			  "driver %s is disabled by AIRLOCK_DRIVERS=%s", name,
			  cfg->drivers_setting);
}

int al_id_valid(const char *id)
{
	if (id == NULL || id[0] == '\0' || id[0] == '-')
		return 0;
	size_t i;
	for (i = 0; id[i] != '\0'; i++) {
		if (i >= 63)
			return 0;
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-'))
			return 0;
	}
	return 1;
}

static int join_id(char *out, size_t outlen, const char *base, const char *mid,
		   const char *id, const char *suffix, al_err *err)
{
	if (!al_id_valid(id))
		return al_err_set(err, AL_EINVAL, 0, "invalid id");
	int n = snprintf(out, outlen, "%s/%s/%s%s", base, mid, id, suffix);
	if (n < 0 || (size_t)n >= outlen)
		return al_err_set(err, AL_EINVAL, 0, "path for %s too long",
				  id);
	return 0;
}

int al_config_sandbox_root(const al_config *cfg, const char *id, char *out,
			   size_t outlen, al_err *err)
{
	return join_id(out, outlen, cfg->pool_dir, "sandboxes", id, "", err);
}

int al_config_snapshot_dir(const al_config *cfg, const char *id, char *out,
			   size_t outlen, al_err *err)
{
	return join_id(out, outlen, cfg->pool_dir, "snapshots", id, "", err);
}

int al_config_template_root(const al_config *cfg, const char *name, char *out,
			    size_t outlen, al_err *err)
{
	return join_id(out, outlen, cfg->pool_dir, "templates", name, "", err);
}

int al_config_shim_socket(const al_config *cfg, const char *id, char *out,
			  size_t outlen, al_err *err)
{
	return join_id(out, outlen, cfg->run_dir, "sbx", id, ".sock", err);
}

int al_config_stream_socket(const al_config *cfg, const char *id, char *out,
			    size_t outlen, al_err *err)
{
	return join_id(out, outlen, cfg->run_dir, "stream", id, ".sock", err);
}

int al_driver_name_valid(const char *d)
{
	size_t n = d != NULL ? strlen(d) : 0;
	if (n == 0 || n > 15)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((d[i] >= 'a' && d[i] <= 'z') ||
		      (d[i] >= '0' && d[i] <= '9')))
			return 0;
	return 1;
}
