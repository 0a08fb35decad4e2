/* cgroup: one leaf cgroup per sandbox, with memory, pids and cpu limits
 * and a freezer, on cgroup v1 (one hierarchy per controller under
 * /sys/fs/cgroup/<ctrl>) or v2 (the unified hierarchy at /sys/fs/cgroup).
 * The version is detected once per process; a v2 hierarchy mounted beside
 * v1 controllers (the "hybrid" /sys/fs/cgroup/unified) is ignored because
 * it holds no controllers. */
#ifndef AL_CGROUP_H
#define AL_CGROUP_H

#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"

/* Parent of every sandbox's leaf, under each controller. */
#define AL_CGROUP_PARENT "airlock"

typedef struct al_cgroup_limits {
	uint64_t memory_bytes; /* hard limit, no swap on top */
	uint32_t pids_max;
	uint32_t cpu_shares; /* v1 scale: 2..262144, 1024 = normal */
	/* The most CPU time the leaf's tasks get together, in thousandths
	 * of a CPU: a CFS quota of cpu_millis * 100 µs per 100 ms period
	 * (v1 cpu.cfs_quota_us, v2 cpu.max); 0 = none. */
	uint32_t cpu_millis;
} al_cgroup_limits;

/* The CFS period every leaf gets, and the quota (µs per period) of
 * cpu_millis thousandths of a CPU; -1 (no quota) for 0. */
#define AL_CGROUP_CPU_PERIOD_US 100000
int64_t al_cgroup_cpu_quota_us(uint32_t cpu_millis);

/* 1 for v1, 2 for v2; -1 with AL_EUNAVAIL if neither usable layout is
 * mounted. */
int al_cgroup_version(al_err *err);
/* Create AL_CGROUP_PARENT/<name> under every controller the sandbox uses
 * and write the limits. A stale leaf of the same name without tasks (a
 * crash) is replaced; one with tasks is AL_EEXIST. Nothing is left
 * behind on failure. */
int al_cgroup_create(const char *name, const al_cgroup_limits *lim,
		     al_err *err);
/* Rewrite the limits of an existing leaf (a warm sandbox taking the
 * limits its create request asked for). */
int al_cgroup_set_limits(const char *name, const al_cgroup_limits *lim,
			 al_err *err);
/* Rename leaf from -> to under every controller, tasks and all. On
 * failure midway the controllers already renamed are renamed back. */
int al_cgroup_rename(const char *from, const char *to, al_err *err);
/* Move pid into the leaf of every controller. Each move takes the
 * kernel's cgroup-wide threadgroup lock, whose write side waits for an
 * RCU grace period (~10 ms on a busy host). */
int al_cgroup_attach(const char *name, pid_t pid, al_err *err);
/* A process moving itself in, without that wait: al_cgroup_join_open
 * opens the files it writes (v1: each controller's tasks file, v2:
 * cgroup.procs) into fds, returning how many (<= AL_CGROUP_JOIN_FDS);
 * al_cgroup_join, called by a single-threaded process (a freshly cloned
 * child, before it runs anything of the sandbox), writes "0" to each:
 * on v1 moving only the caller skips the lock. It only makes write(2)
 * calls (async-signal-safe); 0, or -1 with errno. The caller closes
 * the fds.
 * AL_CGROUP_JOIN_ALL is for the sandbox's own tasks. AL_CGROUP_JOIN_LIMITS
 * is for a helper that works for the sandbox (its gateway): charged to
 * its memory, pids and cpu, but on v1 not in its freezer, so that a
 * paused sandbox's helper still answers its supervisor (on v2 there is
 * one leaf: it freezes too). */
#define AL_CGROUP_JOIN_FDS 4
typedef enum al_cgroup_join_kind {
	AL_CGROUP_JOIN_ALL,
	AL_CGROUP_JOIN_LIMITS,
} al_cgroup_join_kind;
int al_cgroup_join_open(const char *name, al_cgroup_join_kind kind,
			int fds[AL_CGROUP_JOIN_FDS], al_err *err);
int al_cgroup_join(const int *fds, int n);
/* Freeze (1) or thaw (0) every task of the leaf; waits (bounded) until
 * the kernel reports the leaf frozen. */
int al_cgroup_freeze(const char *name, int frozen, al_err *err);
/* SIGKILL every task of the leaf (thawing it so the kill is delivered). */
int al_cgroup_kill(const char *name, al_err *err);
/* Remove the leaf under every controller, killing and retrying for up
 * to about a second while tasks are still exiting. A missing leaf is not
 * an error (idempotent). */
int al_cgroup_destroy(const char *name, al_err *err);
/* What the leaf's memory controller says about its limit and the
 * kernel's OOM killer: limit_bytes is 0 when there is none (v2 "max"),
 * oom_kills how many of its processes the killer ended since it was
 * made (v1: memory.oom_control's oom_kill line, v2: memory.events'). */
typedef struct al_cgroup_memory {
	uint64_t limit_bytes;
	uint64_t oom_kills;
} al_cgroup_memory;
int al_cgroup_memory_read(const char *name, al_cgroup_memory *out, al_err *err);
/* The N of the "oom_kill N" line of either file's text; -1 when there
 * is no such line (the kernel predates the count). */
int al_cgroup_oom_kills_parse(const char *text, uint64_t *kills);
/* Path of a control file of the leaf ("memory.max", "pids.max", ...)
 * under the controller that owns it; for tests and diagnostics. */
int al_cgroup_file(const char *name, const char *file, char *out, size_t outlen,
		   al_err *err);

#endif
