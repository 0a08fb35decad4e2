/* config: where things live and the defaults, from the environment.
 *
 *   AIRLOCK_STATE       state directory (default ./var)
 *   AIRLOCK_DB          libpq conninfo (default: the embedded cluster,
 *                       "host=$AIRLOCK_STATE/run/pg dbname=airlock user=airlock")
 *   AIRLOCK_SQL_DIR     migrations (default: core/sql next to the binary's
 *                       source tree, /usr/share/airlock/sql when installed)
 *   AIRLOCK_POLICIES    the operator's Lua policies, egress.lua and
 *                       others (default: policies/ of the checkout the
 *                       binary was built in, /etc/airlock/policies when
 *                       installed; core/policy.h)
 *   AIRLOCK_LIBEXEC     where airlock-shim and airlock-agent live
 *   AIRLOCK_DEFAULT_MEMORY_MB, AIRLOCK_DEFAULT_PIDS, AIRLOCK_DEFAULT_CPU_SHARES
 *   AIRLOCK_DEFAULT_CPUS  CPUs a sandbox may use when its create names no
 *                       "cpus" (default 1; fractions to 0.001, 0.01 at
 *                       the least; a CFS quota, core/cgroup.h)
 *   AIRLOCK_MAX_CPUS    the most "cpus" one create may ask for (default
 *                       and at most: this host's CPU count). A default
 *                       above it is refused at start. A vm runs on "cpus"
 *                       rounded up vCPUs (core/vm/shape.h).
 *   AIRLOCK_WARM_POOL   standby sandboxes kept ready per template at the
 *                       least (default 2, 0 = none: every create starts
 *                       cold)
 *   AIRLOCK_WARM_POOL_MAX  the most the ns pool of a template grows to
 *                       while creates come (default 8; never below
 *                       AIRLOCK_WARM_POOL)
 *   AIRLOCK_WARM_POOL_VM, AIRLOCK_WARM_POOL_VM_MAX  the same for the vm
 *                       driver (default 2 and 2; only while the vm
 *                       driver is usable)
 *   AIRLOCK_WARM_POOL_WINDOW  seconds of creates a pool is sized from
 *                       (default 30; core/warmpool.h)
 *   AIRLOCK_DEFAULT_DISK_MB  disk a sandbox may add to its template
 *                       (default 4096; capped at the maximum)
 *   AIRLOCK_MAX_DISK_MB the largest "disk_mb" a create may ask for, and
 *                       what one template build step may add (65536)
 *   AIRLOCK_EGRESS_RETENTION_DAYS  egress log rows older than this are
 *                       deleted by the controller (default 30, 1..3650)
 *   AIRLOCK_EGRESS_LOG_RATE, AIRLOCK_EGRESS_LOG_BURST  egress decisions
 *                       one sandbox's gateway logs per second (default
 *                       50, 1..10000) and at once after a quiet time
 *                       (default 500, 1..100000, at least the rate); the
 *                       rest are enforced but not logged, only counted
 *                       (core/egress.h)
 *   AIRLOCK_AUDIT_RETENTION_DAYS  credential audit rows older than this
 *                       are deleted by the controller (default 90,
 *                       1..3650)
 *   AIRLOCK_POOL_FULL_PCT  pool use (percent) from which creates and
 *                       template builds answer 507 (default 95)
 *   AIRLOCK_POOL_RESERVE_MB  pool space sandboxes can never take, kept
 *                       for templates, builds and the host (default 0:
 *                       a tenth of the pool; core/poolcap.h)
 *   AIRLOCK_POOL_PROJECT_PCT  the most of what sandboxes may write that
 *                       one project's sandboxes may write together
 *                       (default 50, 1..100; never above its disk quota)
 *   AIRLOCK_DRIVERS     the drivers the operator allows: "ns", "vm" or
 *                       "ns,vm" (default: both, each where this host can
 *                       run it). A disabled driver gets no creates and
 *                       no standbys.
 *   AIRLOCK_DEFAULT_DRIVER  ns | vm for creates that name no driver;
 *                       must be enabled by AIRLOCK_DRIVERS. Unset: vm
 *                       where KVM works and vm is usable, else ns
 *                       (decided by airlock-fcgi, which knows the host);
 *                       ns only where it is enabled.
 *   AIRLOCK_MAX_MEMORY_MB, AIRLOCK_MAX_PIDS, AIRLOCK_MAX_CPU_SHARES,
 *   AIRLOCK_MAX_TIMEOUT  the most one create may ask for
 *   AIRLOCK_QUOTA_SANDBOXES, AIRLOCK_QUOTA_MEMORY_MB, AIRLOCK_QUOTA_DISK_MB,
 *   AIRLOCK_QUOTA_BUILDS, AIRLOCK_QUOTA_STREAMS,
 *   AIRLOCK_QUOTA_CREATES_PER_MINUTE, AIRLOCK_QUOTA_CPUS  a project's
 *                       quotas unless an admin set its own (core/project.h;
 *                       CPUS: the "cpus" of its live sandboxes together,
 *                       default 100, fractions to 0.001)
 *
 * Every path is validated (absolute after resolution, bounded length). */
#ifndef AL_CONFIG_H
#define AL_CONFIG_H

#include <stdint.h>

#include "err.h"

#define AL_PATH_MAX 512
/* Bounds of any sandbox disk limit, in MiB: below the minimum a sandbox
 * cannot even write its logs; the upper one is 16 TiB. */
#define AL_DISK_MB_MIN 16
#define AL_DISK_MB_LIMIT (16u << 20)
/* Bounds of a sandbox's "cpus", in thousandths of a CPU: the kernel's
 * smallest CFS quota is 1 ms of each 100 ms period (0.01 CPU); the
 * upper one is beyond any host. */
#define AL_CPU_MILLIS_MIN 10
#define AL_CPU_MILLIS_LIMIT (1024u * 1000u)
/* Egress decisions logged per sandbox (AIRLOCK_EGRESS_LOG_*). */
#define AL_EGRESS_LOG_RATE_DEFAULT 50
#define AL_EGRESS_LOG_BURST_DEFAULT 500

/* A project's quotas (core/project.h); in al_config, the defaults. */
typedef struct al_quota {
	uint64_t running_sandboxes; /* creating, running or paused */
	uint64_t memory_mb;	    /* their memory limits together */
	uint64_t disk_mb;
	uint64_t concurrent_builds;  /* queued or running */
	uint64_t concurrent_streams; /* open exec event streams */
	uint64_t creates_per_minute;
	uint64_t cpu_millis; /* their "cpus" together, thousandths */
} al_quota;

typedef struct al_config {
	char state_dir[AL_PATH_MAX];   /* absolute */
	char run_dir[AL_PATH_MAX];     /* state/run: sockets, pids */
	char pool_dir[AL_PATH_MAX];    /* state/pool: btrfs */
	char db_conninfo[AL_PATH_MAX]; /* libpq */
	char sql_dir[AL_PATH_MAX];
	char policies_dir[AL_PATH_MAX]; /* the .lua policies (core/policy.h) */
	char libexec_dir[AL_PATH_MAX];	/* airlock-shim, airlock-agent */
	/* AIRLOCK_VM_TEMPLATE_CACHE: built VM template snapshots kept across
	 * state dirs (vm/tmplcache.h); "" = none. */
	char vm_template_cache[AL_PATH_MAX];
	uint64_t default_memory_bytes; /* per sandbox */
	uint32_t default_pids;
	uint32_t default_cpu_shares; /* cgroup v1 cpu.shares scale (1024) */
	uint32_t default_disk_mb;    /* new data a sandbox may write */
	uint32_t max_disk_mb;
	uint32_t pool_full_pct;	   /* creates and builds stop at this use */
	uint64_t pool_reserve_mb;  /* kept from sandboxes; 0 = a tenth */
	uint32_t pool_project_pct; /* one project's most of their share */
	uint32_t egress_retention_days; /* egress_log rows kept */
	uint32_t egress_log_rate;	/* decisions logged a second */
	uint32_t egress_log_burst;	/* and at once */
	uint32_t audit_retention_days;	/* audit_log rows kept */
	uint32_t default_timeout_s;	/* sandbox lifetime */
	uint32_t max_timeout_s;
	uint64_t max_memory_mb; /* per create request */
	uint32_t max_pids;
	uint32_t max_cpu_shares;
	uint32_t default_cpu_millis; /* "cpus" in thousandths of a CPU */
	uint32_t max_cpu_millis;
	al_quota quota;		     /* of a project without its own */
	uint32_t warm_pool;	     /* ns standbys per template */
	uint32_t warm_pool_vm;	     /* vm standbys per template */
	uint32_t warm_pool_max;	     /* ns pool's bound under load */
	uint32_t warm_pool_vm_max;   /* vm pool's bound under load */
	uint32_t warm_pool_window_s; /* creates counted for the size */
	char default_driver[8];	  /* "ns", "vm" or "" (decide from the host) */
	unsigned drivers;	  /* AL_CONFIG_DRIVER_* the operator allows */
	char drivers_setting[16]; /* AIRLOCK_DRIVERS as given, "" if unset */
} al_config;

#define AL_CONFIG_DRIVER_NS 1u
#define AL_CONFIG_DRIVER_VM 2u

/* Fill cfg from the environment; -1 with AL_EINVAL naming the variable
 * when a value is malformed. */
int al_config_load(al_config *cfg, al_err *err);
/* Same but from a getenv-like lookup (for tests). */
int al_config_load_from(al_config *cfg, const char *(*lookup)(const char *),
			al_err *err);

/* The request's limits (0 = not asked) against the operator's maxima:
 * -1 with AL_EINVAL naming the field and its maximum. */
int al_config_check_maxima(const al_config *cfg, uint64_t memory_mb,
			   uint32_t pids, uint32_t cpu_shares, uint32_t disk_mb,
			   al_err *err);

/* A create's "cpus" (thousandths; 0 = not asked) against
 * AIRLOCK_MAX_CPUS: -1 with AL_EINVAL naming the maximum. */
int al_config_check_cpus(const al_config *cfg, uint32_t cpu_millis,
			 al_err *err);
/* A number of CPUs in thousandths as the API writes it ("0.5", "2",
 * "1.25") into out. */
#define AL_MILLIS_STRLEN 24
void al_millis_format(uint64_t millis, char out[AL_MILLIS_STRLEN]);
/* CPUs this process may run on (its affinity mask), at least 1. */
uint32_t al_config_host_cpus(void);

/* 1 if the operator allows driver name (AIRLOCK_DRIVERS). */
int al_config_driver_enabled(const al_config *cfg, const char *name);
/* 0 if driver name is enabled, else -1 with AL_EDISABLED naming the
 * setting that disabled it. */
int al_config_driver_check(const al_config *cfg, const char *name, al_err *err);

/* Paths derived from the config; -1 if they would not fit. */
int al_config_sandbox_root(const al_config *cfg, const char *id, char *out,
			   size_t outlen,
			   al_err *err); /* pool/sandboxes/<id> */
int al_config_template_root(const al_config *cfg, const char *name, char *out,
			    size_t outlen,
			    al_err *err); /* pool/templates/<name> */
int al_config_shim_socket(const al_config *cfg, const char *id, char *out,
			  size_t outlen, al_err *err); /* run/sbx/<id>.sock */
/* run/stream/<id>.sock: where the shim serves its streams to nginx. */
int al_config_stream_socket(const al_config *cfg, const char *id, char *out,
			    size_t outlen, al_err *err);

/* run/pool/<template>.<driver>.<slot>.sock: a warm pool standby's
 * socket. driver is a driver name ([a-z0-9]+). */
int al_config_standby_socket(const al_config *cfg, const char *tmpl,
			     const char *driver, const char *slot, char *out,
			     size_t outlen, al_err *err);

/* A sandbox or template id is 1..63 chars of [a-z0-9-], not starting
 * with '-'. Everything that builds a path from an id checks this first. */
int al_id_valid(const char *id);

#endif
