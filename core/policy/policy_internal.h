/* policy internals shared by policy.c (the engine: states, budget,
 * reload), policy_lib.c (what every policy gets and the conversions both
 * kinds use; below the engine), policy_egress.c and policy_credentials.c
 * (the kinds, above it). The engine reaches a kind only through its
 * al_policy_kind. */
#ifndef AL_POLICY_INTERNAL_H
#define AL_POLICY_INTERNAL_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <lua.h>

#include "policy/policy.h"

/* One loaded file: its lua_State and the allocator's counters (the
 * allocator's ud, so the count hook finds it through lua_getallocf). */
typedef struct al_policy_state {
	lua_State *L;
	size_t used, peak;
	size_t limit;	  /* what the allocator lets used reach now */
	size_t mem_state; /* the state's cap */
	size_t mem_call;
	unsigned instructions;
	bool out_of_budget; /* the hook stopped the current call */
	bool out_of_memory; /* the entry's call failed an allocation */
	char budget_msg[160];
	int entry_ref; /* registry ref of the entry function */
	/* Registry refs of the C functions every call uses, made once so
	 * that a call's preamble allocates nothing unprotected. */
	int runner_ref, msgh_ref;
	/* The kind's Lua function that builds the request table and calls
	 * the entry (a table constructor costs less than a dozen
	 * lua_setfield calls). */
	int request_ref;
	/* The request's metadata (both kinds) and allow and deny (egress)
	 * tables of the last call, reused while their contents equal the
	 * next request's (each call checks every entry, and that nothing
	 * was added or a metatable set): no garbage, so fewer GC steps
	 * inside calls. */
	int allow_ref, deny_ref, meta_ref;
} al_policy_state;

/* Token bucket of one policy's log lines. */
typedef struct al_policy_loglimit {
	int64_t credit_ms;
	int64_t last_ms;
	unsigned long suppressed;
} al_policy_loglimit;

struct al_policy {
	char path[AL_POLICY_PATH_MAX];
	const al_policy_kind *kind;
	al_policy_limits limits;
	al_policy_state *st;
	bool from_file;
	/* Identity of the file the state in use came from, and of the one
	 * that failed last (not retried until it changes again). */
	struct stat cur_id, failed_id;
	bool failed_valid;
	time_t loaded_at;
	unsigned long reloads;
	char reload_error[AL_POLICY_ERROR_MAX];
	time_t reload_error_at;
	unsigned long calls, failures;
	char last_failure[AL_POLICY_ERROR_MAX];
	al_policy_loglimit errlog, userlog;
};

/* Run fn(L) protected, ud its light userdata argument, under one call's instruction
 * budget and memory window. fn pushes the entry and its arguments, calls
 * al_policy_pcall and reads its results into ud. 0 on success; -1
 * with why in msg (file:line when Lua knows it), the state cleaned. */
int al_policy_run(al_policy_state *st, lua_CFunction fn, void *ud, char *msg,
		  size_t msg_len);
/* Inside fn: push the file's entry function. */
void al_policy_push_entry(lua_State *L);
/* Inside fn: call the function below the nargs values on top of the stack,
 * with the handler that gives errors their file and line; returns how
 * many results it left in its place (errors propagate). */
int al_policy_pcall(lua_State *L, int nargs);
/* Log a policy failure (rate-limited) and count it in the status. */
void al_policy_failed(al_policy *p, const char *msg);
/* Log a policy's mistake that does not fail its call (rate-limited with
 * its failures; not counted). */
void al_policy_warn(al_policy *p, const char *msg);
/* Copy a reason or message, keeping printable ASCII (others become '?'),
 * so that a policy cannot forge log lines or JSON. */
void al_policy_copy_printable(char *dst, size_t len, const char *src,
			      size_t src_len);

/* A kind of policy (policy.h): what the engine (policy.c) needs of it. */
struct al_policy_kind {
	const char *entry; /* the entry function the file defines */
	/* Its request builder, Lua source of a function(entry, fields...)
	 * that calls entry with the request table (al_policy_lib_open). */
	const char *request_src;
	/* A decision on made-up input, on a state just loaded: 0 when it
	 * was well-formed, else -1 with why in msg. */
	int (*dry_run)(al_policy_state *st, char *msg, size_t msg_len);
};

/* Register the globals every policy gets besides the libraries (match,
 * match_any, allow, deny) and compile request_src, the kind's request
 * builder — Lua source of a function(entry, fields...) — into
 * request_ref. Runs inside a protected call (errors propagate). */
void al_policy_lib_open(lua_State *L, const char *request_src);
/* Inside a call: push v, or nil when it is NULL. */
void al_policy_push_str(lua_State *L, const char *v);
/* Inside a call: push the list v[0..n) (list != NULL) or the metadata
 * kv[0..n) as a table, the one in the registry at *ref when it still
 * holds just these (then refreshed at *ref). */
void al_policy_push_cached(lua_State *L, int *ref, const char *const *list,
			   const al_policy_kv *kv, size_t n);
/* Inside a call: push the sandbox's metadata as a table. */
void al_policy_push_metadata(lua_State *L, const al_policy_kv *kv, size_t n);
/* The same, the last call's table when it still holds just these. */
void al_policy_push_cached_metadata(lua_State *L, const al_policy_kv *kv,
				    size_t n);
/* Read the (allow, reason) an entry returned (n results on the stack
 * from index 1) into out; a Lua error when they are not a decision.
 * what names the entry in the message. */
int al_policy_read_decision(lua_State *L, int n, const char *what,
			    al_egress_decision *out);

#endif
