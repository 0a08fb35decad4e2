/* policy: operator policies written in Lua (the .lua files of policies/), run by LuaJIT
 * in a restricted, budgeted state, reloaded when their file changes.
 *
 * One al_policy is one file and one lua_State of its own, so a policy can
 * never see or change another one's globals or string metatable. The state:
 *  - opens only the base, string, table and math libraries, then keeps an
 *    allow-list of their functions (see policy.c for what is removed and
 *    why: load*, dofile, get/setfenv, string.dump, the pattern functions,
 *    collectgarbage, pcall/xpcall, coroutine, print, newproxy, ...);
 *  - loads text chunks only (a bytecode file is refused: LuaJIT does not
 *    verify bytecode);
 *  - runs with the JIT off, so that the instruction-count hook fires: a
 *    call that runs past its instruction budget is stopped;
 *  - allocates through a counting allocator: the state holds at most
 *    mem_state bytes and one call may add at most mem_call bytes; past
 *    that an allocation fails, which is a Lua error.
 * A call that errors, runs out of budget or memory, or returns anything
 * but a well-formed decision DENIES; the error is logged with the file
 * and line, at most a few lines per policy per minute (a policy that
 * fails on every request does not flood the log).
 *
 * Reload: al_policy_reload_if_changed() compares the file's device, inode,
 * size and mtime with the loaded ones; on a change it builds a new state,
 * loads the file and checks it (its self_test() when it defines one, then
 * a dry decision), and swaps it in only if all of that passes. A file that
 * fails keeps the last good policy, and al_policy_status() says why.
 *
 * Threads: an al_policy is used by one thread at a time (the gateway is
 * single-threaded per process; the controller calls from one thread).
 * Distinct al_policy handles share nothing and may run in parallel. */
#ifndef AL_POLICY_H
#define AL_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "base/err.h"

typedef struct al_policy al_policy;

/* What a policy file decides: the entry function it must define, the
 * request it is given and the dry decision its load is checked with.
 * One per kind, defined by the kind's module (policy_egress.c,
 * policy_credentials.c). */
typedef struct al_policy_kind al_policy_kind;
extern const al_policy_kind al_policy_egress_kind;	/* egress(req) */
extern const al_policy_kind al_policy_credentials_kind; /* credentials(req) */
extern const al_policy_kind al_policy_lifecycle_kind;	/* lifecycle(sandbox) */

typedef struct al_policy_limits {
	size_t mem_state;      /* bytes one state may hold */
	size_t mem_call;       /* bytes one call may add to it */
	unsigned instructions; /* VM instructions one call may run */
} al_policy_limits;

#define AL_POLICY_MEM_STATE_DEFAULT (16u << 20)
#define AL_POLICY_MEM_CALL_DEFAULT (4u << 20)
/* The shipped egress policy runs a few hundred instructions a decision. */
#define AL_POLICY_INSTRUCTIONS_DEFAULT 100000u
/* A policy file larger than this is refused. */
#define AL_POLICY_FILE_MAX (1u << 20)

/* Load the policy file at path (NULL limits: the defaults). Fails when the
 * file cannot be read, is bytecode, does not compile, errors at its top
 * level, lacks the entry function, or fails its self-test or dry
 * decision: the message names the file and, for Lua errors, the line. */
al_policy *al_policy_open(const char *path, const al_policy_kind *kind,
			  const al_policy_limits *limits, al_err *err);
/* The same from a buffer; name is what logs and errors call it. */
al_policy *al_policy_open_source(const char *name, const char *src, size_t len,
				 const al_policy_kind *kind,
				 const al_policy_limits *limits, al_err *err);
void al_policy_close(al_policy *p);

/* 0: the file is the one loaded (or the one that failed last time);
 * 1: it changed and the new one is in use; -1: it changed and the new one
 * failed (or vanished): the last good policy stays, and the log and
 * al_policy_status() say why. A policy opened from a buffer never
 * reloads (0). */
int al_policy_reload_if_changed(al_policy *p);

#define AL_POLICY_ERROR_MAX 512
/* A policy file's path is at most this long (with its NUL). */
#define AL_POLICY_PATH_MAX 256

/* What GET /v1/info shows of a policy. */
typedef struct al_policy_stat {
	const char *path;      /* file (or buffer name) */
	time_t loaded_at;      /* when the policy in use was loaded */
	unsigned long reloads; /* successful reloads since open */
	/* Why the last reload failed, "" when it did not; kept until a
	 * reload succeeds. */
	char reload_error[AL_POLICY_ERROR_MAX];
	time_t reload_error_at;
	unsigned long calls;	/* decisions asked of the policy */
	unsigned long failures; /* of them, denied because the policy failed */
	/* The last such failure, "" if none. */
	char last_failure[AL_POLICY_ERROR_MAX];
	size_t mem_used, mem_peak; /* bytes of the state in use */
} al_policy_stat;

void al_policy_status(const al_policy *p, al_policy_stat *out);

/* ---- egress ---- */

enum al_egress_proto {
	AL_EGRESS_DNS,	 /* may the name be resolved (port 0) */
	AL_EGRESS_HTTP,	 /* a plain HTTP request (method, path) */
	AL_EGRESS_HTTPS, /* a TLS connection / request (SNI name) */
	AL_EGRESS_TCP,	 /* a TCP pass-through to name:port */
	AL_EGRESS_PROTO_MAX
};

enum al_net_mode {
	AL_NET_NONE,	  /* no egress at all */
	AL_NET_ALLOWLIST, /* the sandbox's allow list (and, for builds, what
			   * the policy adds) */
	AL_NET_OPEN,	  /* any public name the policy allows */
	AL_NET_MODE_MAX
};

const char *al_net_mode_name(enum al_net_mode m);
/* -1 if name is not one of "none", "allowlist", "open". */
int al_net_mode_from_name(const char *name);

typedef struct al_policy_kv {
	const char *key, *value;
} al_policy_kv;

/* Every string field is bounded (AL_POLICY_FIELD_MAX bytes) and every list
 * (AL_POLICY_LIST_MAX entries): a request past a bound is denied. NULL
 * strings reach the policy as nil. */
typedef struct al_egress_req {
	/* Canonical (al_dnsname_canon): lowercase, no trailing dot,
	 * IDNs already in punycode. A name that is not is denied. */
	const char *name;
	unsigned port; /* 0 for dns */
	enum al_egress_proto protocol;
	const char *method, *path; /* http(s) requests, else NULL */
	const char *sandbox;	   /* the sandbox's id */
	const char *template_name;
	const char *project;
	const al_policy_kv *metadata;
	size_t n_metadata;
	enum al_net_mode mode;
	/* The sandbox's own lists of name patterns (al_dnsname_match). */
	const char *const *allow;
	size_t n_allow;
	const char *const *deny;
	size_t n_deny;
	bool build; /* the egress of a template build */
} al_egress_req;

#define AL_POLICY_FIELD_MAX 4096
#define AL_POLICY_LIST_MAX 256
#define AL_POLICY_REASON_MAX 128

typedef struct al_egress_decision {
	/* For tcp the decision is for that port: allow means name:port. */
	bool allow;
	/* Printable ASCII, NUL-terminated; what the egress log shows. */
	char reason[AL_POLICY_REASON_MAX];
} al_egress_decision;

/* Decide one egress request; out is always filled. Whatever the policy
 * says, C then applies: mode none denies everything (the policy is not
 * asked); a name on the request's deny list is denied; in allowlist mode a
 * sandbox's (not a build's) name must be on its allow list. So the
 * request's lists only narrow what the policy allows (in open mode the
 * allow list is not needed, the deny list still applies).
 * 0: decided (allow or deny); -1: denied because the request was
 * malformed or the policy failed (logged, counted in the status). */
int al_policy_egress(al_policy *p, const al_egress_req *req,
		     al_egress_decision *out);

/* ---- credentials ----
 * Asked once per credential a request would carry, after the egress
 * policy allowed the request. An error, false, deny() or anything but a
 * well-formed decision means the credential is not injected (and the
 * request is denied when it named the credential by a placeholder). The
 * credential's own host list is checked in C before the policy is asked
 * and whatever it answers: no policy can send a credential elsewhere. */
typedef struct al_cred_req {
	const char *credential; /* its name */
	const char *form;	/* "header" or "placeholder" */
	const char *scope;	/* "global", "project", ... */
	const char *host;	/* canonical */
	unsigned port;
	const char *method, *path;
	const char *sandbox;
	const char *template_name;
	const char *project;
	const al_policy_kv *metadata;
	size_t n_metadata;
} al_cred_req;

/* 0: decided; -1: not injected because the request was malformed or the
 * policy failed (logged, counted). out is always filled. */
int al_policy_credentials(al_policy *p, const al_cred_req *req,
			  al_egress_decision *out);

/* ---- lifecycle ----
 * Asked by the controller for each live sandbox on its lifecycle sweep:
 * what an idle sandbox becomes and after how long, how often a running
 * one is snapshotted and how long its rolling and fork snapshots are
 * kept (policies/lifecycle.lua has the table it returns). A field the
 * policy leaves out, or returns out of range, gets its default (a bad
 * one is logged); a call that fails decides nothing: no idle action, no
 * snapshot, nothing pruned, so a broken policy never loses data. */
typedef struct al_lifecycle_req {
	const char *sandbox; /* its id */
	const char *template_name;
	const char *project;
	const char *driver; /* "ns", "vm" */
	const char *state;  /* "running", "paused", "suspended" */
	const al_policy_kv *metadata;
	size_t n_metadata;
} al_lifecycle_req;

enum al_idle_action {
	AL_IDLE_NONE,
	AL_IDLE_SUSPEND, /* ns: its files only (no process survives) */
	AL_IDLE_DELETE,
	AL_IDLE_ACTION_MAX
};

const char *al_idle_action_name(enum al_idle_action a);

/* Seconds; snapshot_every 0: no rolling snapshots; snapshot_keep 0:
 * kept until deleted. */
typedef struct al_lifecycle_decision {
	enum al_idle_action idle_action;
	long idle_after;
	long snapshot_every;
	long snapshot_keep;
} al_lifecycle_decision;

#define AL_LIFECYCLE_IDLE_AFTER_DEFAULT (6 * 3600L)
#define AL_LIFECYCLE_EVERY_DEFAULT 3600L
#define AL_LIFECYCLE_KEEP_DEFAULT (7 * 86400L)
/* Any duration a policy returns is at most this (ten years). */
#define AL_LIFECYCLE_SECONDS_MAX (10 * 366 * 86400L)

/* Decide for one sandbox. 0: decided (defaults for what the policy left
 * out or got wrong); -1: the request was malformed or the policy failed
 * (logged, counted): out says do nothing. out is always filled. */
int al_policy_lifecycle(al_policy *p, const al_lifecycle_req *req,
			al_lifecycle_decision *out);

#endif
