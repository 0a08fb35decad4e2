/* config: where things live and the defaults, from the environment
 * (AIRLOCK_*, loaded by al_config_load). Every setting, its default,
 * range and meaning is in docs/operations.md, "Configuration", the
 * one table (tests/integration/test_config_doc.py checks it against
 * the code); add a row there when you add one here.
 *
 * Every path is validated (absolute after resolution, bounded length). */
#ifndef AL_CONFIG_H
#define AL_CONFIG_H

#include <stdint.h>

#include "base/addr.h"
#include "base/err.h"

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

/* A gateway's timeouts (AIRLOCK_GW_HEAD_TIMEOUT_MS: a TLS handshake and
 * each request head must be complete within; AIRLOCK_GW_IDLE_TIMEOUT_MS:
 * no byte either way for this long closes a connection), 1 ms..1 day. */
#define AL_GW_HEAD_TIMEOUT_MS_DEFAULT 30000
#define AL_GW_IDLE_TIMEOUT_MS_DEFAULT 120000
#define AL_GW_TIMEOUT_MS_MAX 86400000

/* A project's quotas (core/model/project.h); in al_config, the defaults. */
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
	char policies_dir
		[AL_PATH_MAX]; /* the .lua policies (core/policy/policy.h) */
	char libexec_dir[AL_PATH_MAX]; /* airlock-shim, airlock-agent */
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
	/* AIRLOCK_NET_POOL as al_net_prefix_format writes it, checked by
	 * al_net_pool_parse: the slots' prefix, which no gateway dials. */
	char net_pool[AL_NET_PREFIX_STRLEN];
	uint32_t gw_head_timeout_ms; /* AL_GW_HEAD_TIMEOUT_MS_DEFAULT */
	uint32_t gw_idle_timeout_ms; /* AL_GW_IDLE_TIMEOUT_MS_DEFAULT */
	uint32_t default_timeout_s;  /* sandbox lifetime */
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
/* pool/snapshots/<id>: a committed snapshot's directory (its unfinished
 * one is pool/snapshots/.<id>.tmp). */
int al_config_snapshot_dir(const al_config *cfg, const char *id, char *out,
			   size_t outlen, al_err *err);
int al_config_template_root(const al_config *cfg, const char *name, char *out,
			    size_t outlen,
			    al_err *err); /* pool/templates/<name> */
int al_config_shim_socket(const al_config *cfg, const char *id, char *out,
			  size_t outlen, al_err *err); /* run/sbx/<id>.sock */
/* run/stream/<id>.sock: where the shim serves its streams to nginx. */
int al_config_stream_socket(const al_config *cfg, const char *id, char *out,
			    size_t outlen, al_err *err);

/* A sandbox or template id is 1..63 chars of [a-z0-9-], not starting
 * with '-'. Everything that builds a path from an id checks this first. */
int al_id_valid(const char *id);
/* A driver name is 1..15 chars of [a-z0-9]: it goes into socket names
 * between dots (core/sandbox/standby.h). */
int al_driver_name_valid(const char *name);

#endif
