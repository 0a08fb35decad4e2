/* policy: restricted, budgeted LuaJIT states, one per policy file, and
 * their reload. The egress decision is in policy_egress.c.
 *
 * What a policy's globals are, decided function by function (an
 * allow-list: whatever a LuaJIT version adds to a library stays out):
 *  kept    assert error ipairs next pairs select tonumber tostring type
 *          unpack rawequal rawget rawset getmetatable setmetatable _G
 *          _VERSION; string.byte char format len lower rep reverse sub
 *          upper; table.concat insert maxn remove sort; all of math.
 *  removed load loadstring loadfile dofile (code from anywhere but the
 *          file); getfenv setfenv (reach other functions' environments);
 *          string.dump (bytecode out); collectgarbage gcinfo (the GC is
 *          the host's); newproxy (userdata with __gc: code that runs at
 *          collection, outside any budget); print (stdout is not ours:
 *          log() instead); pcall xpcall and coroutine (they would catch
 *          the budget's error and keep looping); string.find match
 *          gmatch gsub (Lua patterns backtrack in C, where the budget's
 *          hook does not fire: match() is the policy's matcher);
 *          table.foreach foreachi getn move (deprecated or 5.2-only);
 *          module require package io os debug jit ffi bit (never opened).
 *  added   match match_any allow deny (policy_egress.c), log.
 * The string metatable is locked (__metatable), so getmetatable("")
 * returns a string, not the table strings index through.
 *
 * C library functions run without the hook, but what they can do is
 * bounded by the memory window (string.rep, table.concat) or by the
 * budget that built their input (table.sort of a table the policy filled
 * within its instructions). */
#include "policy/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <luajit.h>
#include <lualib.h>

#include "base/log.h"
#include "policy/policy_internal.h"

/* Room above mem_state for what C pushes outside a protected call (none
 * of which may fail: an unprotected allocation failure is a panic). */
#define MEM_SLACK (64u << 10)
/* A file's top level (tables, functions) may run this many times a
 * call's budget. */
#define LOAD_BUDGET_FACTOR 10
/* Log lines of one policy: bursts of 5, then one every 12 s. */
#define LOG_BURST 5
#define LOG_EVERY_MS 12000

static const char *const keep_base[] = {
	"assert",   "error",	"ipairs",   "next",	    "pairs",
	"select",   "tonumber", "tostring", "type",	    "unpack",
	"rawequal", "rawget",	"rawset",   "getmetatable", "setmetatable",
	"_G",	    "_VERSION", "string",   "table",	    "math",
	NULL,
};
static const char *const keep_string[] = {
	"byte", "char",	   "format", "len",   "lower",
	"rep",	"reverse", "sub",    "upper", NULL,
};
static const char *const keep_table[] = {
	"concat", "insert", "maxn", "remove", "sort", NULL,
};

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the allocator: every byte of a state is counted against limit ---- */

static void *policy_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	al_policy_state *st = ud;
	if (ptr == NULL)
		osize = 0;
	if (nsize == 0) {
		free(ptr);
		st->used -= osize;
		return NULL;
	}
	if (nsize > osize && nsize - osize > st->limit - st->used)
		return NULL; /* Lua raises "not enough memory" */
	void *q = realloc(ptr, nsize);
	if (q == NULL)
		/* Lua assumes shrinking never fails: the old block will do. */
		return nsize <= osize ? ptr : NULL;
	st->used = st->used - osize + nsize;
	if (st->used > st->peak)
		st->peak = st->used;
	return q;
}

static void window_open(al_policy_state *st, size_t bytes)
{
	size_t room = st->mem_state > st->used ? st->mem_state - st->used : 0;
	st->limit = st->used + (bytes < room ? bytes : room);
}

static void window_close(al_policy_state *st)
{
	st->limit = st->mem_state + MEM_SLACK;
}

static al_policy_state *state_of(lua_State *L)
{
	void *ud;
	lua_getallocf(L, &ud);
	return ud;
}

/* ---- the budget: the count hook fires once the call's instructions are
 * spent (it is re-armed for every call) ---- */

static void budget_hook(lua_State *L, lua_Debug *ar)
{
	(void)ar;
	al_policy_state *st = state_of(L);
	lua_Debug d;
	st->out_of_budget = true;
	if (lua_getstack(L, 0, &d) && lua_getinfo(L, "Sl", &d))
		snprintf(st->budget_msg, sizeof st->budget_msg,
			 "%s:%d: instruction budget (%u) exceeded", d.short_src,
			 d.currentline, st->instructions);
	else
		snprintf(st->budget_msg, sizeof st->budget_msg,
			 "instruction budget (%u) exceeded", st->instructions);
	lua_pushstring(L, st->budget_msg);
	lua_error(L);
}

/* Error handler of the entry's call: a message with the file and line of
 * the innermost Lua frame (error("x", 0) and non-string errors have
 * none of their own). */
static int entry_msgh(lua_State *L)
{
	const char *m = lua_tostring(L, 1);
	char what[64];
	if (m == NULL) {
		snprintf(what, sizeof what, "error object is a %s",
			 luaL_typename(L, 1));
		m = what;
	}
	lua_Debug d;
	for (int level = 1; lua_getstack(L, level, &d); level++) {
		if (!lua_getinfo(L, "Sl", &d) || d.currentline <= 0)
			continue;
		size_t n = strlen(d.short_src);
		if (strncmp(m, d.short_src, n) == 0 && m[n] == ':')
			break; /* already placed */
		lua_pushfstring(L, "%s:%d: %s", d.short_src, d.currentline, m);
		return 1;
	}
	lua_pushstring(L, m);
	return 1;
}

void al_policy_push_entry(lua_State *L)
{
	lua_rawgeti(L, LUA_REGISTRYINDEX, state_of(L)->entry_ref);
}

int al_policy_pcall(lua_State *L, int nargs)
{
	al_policy_state *st = state_of(L);
	int h = lua_gettop(L) - nargs;
	lua_rawgeti(L, LUA_REGISTRYINDEX, st->msgh_ref);
	lua_insert(L, h);
	int rc = lua_pcall(L, nargs, LUA_MULTRET, h);
	if (rc != 0) {
		/* Rethrown as a plain error: remember what it was. */
		st->out_of_memory = rc == LUA_ERRMEM;
		lua_error(L); /* the handled message, out to al_policy_run */
	}
	int nres = lua_gettop(L) - h;
	lua_remove(L, h);
	return nres;
}

struct run {
	lua_CFunction fn;
	void *ud;
};

/* The protected side of al_policy_run: fn(L) with ud as its argument. */
static int runner(lua_State *L)
{
	struct run *r = lua_touserdata(L, 1);
	lua_pushlightuserdata(L, r->ud);
	lua_replace(L, 1);
	return r->fn(L);
}

int al_policy_run(al_policy_state *st, lua_CFunction fn, void *ud, char *msg,
		  size_t msg_len)
{
	lua_State *L = st->L;
	st->out_of_budget = false;
	st->out_of_memory = false;
	/* Garbage must not eat the call's window: a policy that keeps much
	 * alive lets the GC wait until the state is nearly full. */
	if (st->used > st->mem_state - st->mem_call)
		lua_gc(L, LUA_GCCOLLECT, 0);
	window_open(st, st->mem_call);
	/* Re-arming restarts the count. The hook stays set between calls
	 * (nothing runs then): clearing it would make LuaJIT rewrite its
	 * dispatch table twice a call. */
	lua_sethook(L, budget_hook, LUA_MASKCOUNT, (int)st->instructions);
	/* Neither push allocates (a registry read, a light userdata, and C
	 * always has LUA_MINSTACK slots). */
	struct run r = {fn, ud};
	lua_rawgeti(L, LUA_REGISTRYINDEX, st->runner_ref);
	lua_pushlightuserdata(L, &r);
	int rc = lua_pcall(L, 1, 0, 0);
	window_close(st);
	if (rc == 0)
		return 0;
	if (st->out_of_budget)
		snprintf(msg, msg_len, "%s", st->budget_msg);
	else if (rc == LUA_ERRMEM || st->out_of_memory)
		snprintf(msg, msg_len,
			 "not enough memory (a call may add %zu bytes to the"
			 " state's %zu)",
			 st->mem_call, st->mem_state);
	else {
		/* The policy's own text (error("...")) and bits of its
		 * source (syntax errors) go to logs and GET /v1/info. */
		size_t len = 0;
		const char *m = lua_tolstring(L, -1, &len);
		if (m == NULL)
			snprintf(msg, msg_len, "error");
		else
			al_policy_copy_printable(msg, msg_len, m, len);
	}
	lua_settop(L, 0);
	/* What the failed call left is garbage: the next call gets its
	 * whole window back. */
	lua_gc(L, LUA_GCCOLLECT, 0);
	return -1;
}

/* ---- rate-limited log lines ---- */

static bool loglimit_take(al_policy_loglimit *b)
{
	/* Credit in milliseconds: a line costs LOG_EVERY_MS of it. */
	int64_t now = mono_ms();
	if (b->last_ms == 0)
		b->credit_ms = LOG_BURST * LOG_EVERY_MS;
	else
		b->credit_ms += now - b->last_ms;
	if (b->credit_ms > LOG_BURST * LOG_EVERY_MS)
		b->credit_ms = LOG_BURST * LOG_EVERY_MS;
	b->last_ms = now;
	if (b->credit_ms < LOG_EVERY_MS) {
		b->suppressed++;
		return false;
	}
	b->credit_ms -= LOG_EVERY_MS;
	return true;
}

static void policy_logf(al_policy *p, al_policy_loglimit *b,
			enum al_log_level level, const char *what,
			const char *msg)
{
	if (!loglimit_take(b))
		return;
	if (b->suppressed > 0)
		al_log(level, "policy %s: %s%s (and %lu lines not logged)",
		       p->path, msg, what, b->suppressed);
	else
		al_log(level, "policy %s: %s%s", p->path, msg, what);
	b->suppressed = 0;
}

void al_policy_failed(al_policy *p, const char *msg)
{
	p->failures++;
	snprintf(p->last_failure, sizeof p->last_failure, "%s", msg);
	policy_logf(p, &p->errlog, AL_LOG_WARN, " (denied)", msg);
}

void al_policy_warn(al_policy *p, const char *msg)
{
	policy_logf(p, &p->errlog, AL_LOG_WARN, "", msg);
}

/* log(...): the policy's own lines, printable and rate-limited. */
static int lua_policy_log(lua_State *L)
{
	al_policy *p = lua_touserdata(L, lua_upvalueindex(1));
	size_t len;
	const char *s = luaL_checklstring(L, 1, &len);
	char line[256];
	al_policy_copy_printable(line, sizeof line, s, len);
	policy_logf(p, &p->userlog, AL_LOG_INFO, "", line);
	return 0;
}

/* ---- building a restricted state ---- */

static bool listed(const char *const *list, const char *name)
{
	for (; *list != NULL; list++)
		if (strcmp(*list, name) == 0)
			return true;
	return false;
}

/* Remove every key of the table on top of the stack not in keep. */
static void keep_only(lua_State *L, const char *const *keep)
{
	int t = lua_gettop(L);
	lua_pushnil(L);
	while (lua_next(L, t) != 0) {
		lua_pop(L, 1);
		if (lua_type(L, -1) != LUA_TSTRING ||
		    !listed(keep, lua_tostring(L, -1))) {
			lua_pushvalue(L, -1);
			lua_pushnil(L);
			lua_rawset(L, t);
		}
	}
}

static int open_restricted(lua_State *L)
{
	al_policy *p = lua_touserdata(L, 1);
	static const lua_CFunction libs[] = {
		luaopen_base,
		luaopen_string,
		luaopen_table,
		luaopen_math,
	};
	for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
		lua_pushcfunction(L, libs[i]);
		lua_call(L, 0, 0);
	}
	lua_pushvalue(L, LUA_GLOBALSINDEX);
	keep_only(L, keep_base);
	lua_getfield(L, -1, "string");
	keep_only(L, keep_string);
	lua_pop(L, 1);
	lua_getfield(L, -1, "table");
	keep_only(L, keep_table);
	lua_pop(L, 1);
	lua_pop(L, 1);
	/* Strings index through the string table: lock its metatable. */
	lua_pushliteral(L, "");
	if (lua_getmetatable(L, -1)) {
		lua_pushliteral(L, "locked");
		lua_setfield(L, -2, "__metatable");
		lua_pop(L, 1);
	}
	lua_pop(L, 1);
	/* The libraries registered themselves in the registry's _LOADED:
	 * harmless (nothing reads it without require), but out of reach. */
	lua_pushnil(L);
	lua_setfield(L, LUA_REGISTRYINDEX, "_LOADED");
	lua_pushlightuserdata(L, p);
	lua_pushcclosure(L, lua_policy_log, 1);
	lua_setglobal(L, "log");
	al_policy_lib_open(L, p->kind->request_src);
	al_policy_state *st = state_of(L);
	lua_pushcfunction(L, runner);
	st->runner_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	lua_pushcfunction(L, entry_msgh);
	st->msgh_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	return 0;
}

static void state_free(al_policy_state *st)
{
	if (st == NULL)
		return;
	if (st->L != NULL)
		lua_close(st->L);
	free(st);
}

struct load_ctx {
	const char *name;
	const char *src;
	size_t len;
	const char *entry;
	int ref;
};

/* Compile the chunk (text only), run its top level, take its entry. */
static int load_chunk(lua_State *L)
{
	struct load_ctx *c = lua_touserdata(L, 1);
	char chunk[AL_POLICY_PATH_MAX + 1];
	snprintf(chunk, sizeof chunk, "@%s", c->name);
	if (luaL_loadbufferx(L, c->src, c->len, chunk, "t") != 0)
		lua_error(L);
	lua_call(L, 0, 0);
	lua_getglobal(L, c->entry);
	if (!lua_isfunction(L, -1))
		luaL_error(L, "%s: defines no function %s(req)", c->name,
			   c->entry);
	c->ref = luaL_ref(L, LUA_REGISTRYINDEX);
	return 0;
}

/* self_test(): a file's own checks, when it defines them. */
static int run_self_test(lua_State *L)
{
	const char *name = lua_touserdata(L, 1);
	lua_getglobal(L, "self_test");
	if (lua_isnil(L, -1))
		return 0;
	if (!lua_isfunction(L, -1))
		luaL_error(L, "%s: self_test is not a function", name);
	lua_call(L, 0, 2);
	if (lua_toboolean(L, -2) && lua_type(L, -2) == LUA_TBOOLEAN)
		return 0;
	const char *why = lua_tostring(L, -1);
	return luaL_error(L, "%s: self_test failed: %s", name,
			  why != NULL ? why : "it returned no true");
}

static al_policy_state *state_build(al_policy *p, const char *src, size_t len,
				    char *msg, size_t msg_len)
{
	if (len > 0 && src[0] == LUA_SIGNATURE[0]) {
		snprintf(msg, msg_len,
			 "%s: is bytecode; policies load as"
			 " Lua source only",
			 p->path);
		return NULL;
	}
	al_policy_state *st = calloc(1, sizeof *st);
	if (st == NULL) {
		snprintf(msg, msg_len, "%s: out of memory", p->path);
		return NULL;
	}
	st->mem_state = p->limits.mem_state;
	st->mem_call = p->limits.mem_call;
	st->instructions = p->limits.instructions;
	st->entry_ref = LUA_NOREF;
	st->allow_ref = st->deny_ref = st->meta_ref = LUA_NOREF;
	window_close(st);
	st->L = lua_newstate(policy_alloc, st);
	if (st->L == NULL) {
		snprintf(msg, msg_len, "%s: cannot create a Lua state",
			 p->path);
		free(st);
		return NULL;
	}
	lua_State *L = st->L;
	/* Hooks do not fire in JIT-compiled code. */
	luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
	if (lua_cpcall(L, open_restricted, p) != 0) {
		snprintf(msg, msg_len, "%s: cannot set up the Lua state: %s",
			 p->path, lua_tostring(L, -1));
		state_free(st);
		return NULL;
	}
	/* The top level runs in one window the size of the state, with a
	 * budget of several calls. */
	struct load_ctx c = {p->path, src, len, p->kind->entry, LUA_NOREF};
	size_t call = st->mem_call;
	unsigned budget = st->instructions;
	st->mem_call = st->mem_state;
	st->instructions = budget * LOAD_BUDGET_FACTOR;
	int rc = al_policy_run(st, load_chunk, &c, msg, msg_len);
	st->mem_call = call;
	st->instructions = budget;
	if (rc != 0) {
		state_free(st);
		return NULL;
	}
	st->entry_ref = c.ref;
	if (al_policy_run(st, run_self_test, p->path, msg, msg_len) != 0) {
		state_free(st);
		return NULL;
	}
	char why[AL_POLICY_ERROR_MAX - 32];
	if (p->kind->dry_run(st, why, sizeof why) != 0) {
		snprintf(msg, msg_len, "dry decision failed: %s", why);
		state_free(st);
		return NULL;
	}
	return st;
}

/* ---- files ---- */

static char *read_policy(const char *path, size_t *len, struct stat *id,
			 char *msg, size_t msg_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		snprintf(msg, msg_len, "%s: %s", path, strerror(errno));
		return NULL;
	}
	char *buf = NULL;
	if (fstat(fd, id) != 0) {
		snprintf(msg, msg_len, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(id->st_mode)) {
		snprintf(msg, msg_len, "%s: not a regular file", path);
		goto out;
	}
	if (id->st_size > (off_t)AL_POLICY_FILE_MAX) {
		snprintf(msg, msg_len, "%s: larger than %u bytes", path,
			 AL_POLICY_FILE_MAX);
		goto out;
	}
	buf = malloc((size_t)id->st_size + 1);
	if (buf == NULL) {
		snprintf(msg, msg_len, "%s: out of memory", path);
		goto out;
	}
	size_t got = 0;
	while (got <= (size_t)id->st_size) {
		ssize_t n = read(fd, buf + got, (size_t)id->st_size + 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(msg, msg_len, "%s: %s", path, strerror(errno));
			free(buf);
			buf = NULL;
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got != (size_t)id->st_size) {
		/* Written to while we read: the next check sees it settled. */
		snprintf(msg, msg_len, "%s: changed while being read", path);
		free(buf);
		buf = NULL;
		goto out;
	}
	*len = got;
out:
	close(fd);
	return buf;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
	       a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static al_policy *policy_new(const char *name, const al_policy_kind *kind,
			     const al_policy_limits *limits, al_err *err)
{
	if (name == NULL || kind == NULL) {
		al_err_set(err, AL_EINVAL, 0, "policy: no file or bad kind");
		return NULL;
	}
	if (strlen(name) >= AL_POLICY_PATH_MAX) {
		al_err_set(err, AL_EINVAL, 0,
			   "policy: path longer than %d bytes",
			   AL_POLICY_PATH_MAX - 1);
		return NULL;
	}
	al_policy *p = calloc(1, sizeof *p);
	if (p == NULL) {
		al_err_set(err, AL_ENOMEM, 0, "policy %s: out of memory", name);
		return NULL;
	}
	snprintf(p->path, sizeof p->path, "%s", name);
	p->kind = kind;
	p->limits = (al_policy_limits){AL_POLICY_MEM_STATE_DEFAULT,
				       AL_POLICY_MEM_CALL_DEFAULT,
				       AL_POLICY_INSTRUCTIONS_DEFAULT};
	if (limits != NULL) {
		if (limits->mem_state > 0)
			p->limits.mem_state = limits->mem_state;
		if (limits->mem_call > 0)
			p->limits.mem_call = limits->mem_call;
		if (limits->instructions > 0)
			p->limits.instructions = limits->instructions;
	}
	if (p->limits.mem_call > p->limits.mem_state)
		p->limits.mem_call = p->limits.mem_state;
	if (p->limits.instructions > (unsigned)INT32_MAX / LOAD_BUDGET_FACTOR)
		p->limits.instructions = INT32_MAX / LOAD_BUDGET_FACTOR;
	return p;
}

al_policy *al_policy_open_source(const char *name, const char *src, size_t len,
				 const al_policy_kind *kind,
				 const al_policy_limits *limits, al_err *err)
{
	al_policy *p = policy_new(name, kind, limits, err);
	if (p == NULL)
		return NULL;
	char msg[AL_POLICY_ERROR_MAX];
	p->st = state_build(p, src, len, msg, sizeof msg);
	if (p->st == NULL) {
		al_err_set(err, AL_EINVAL, 0, "policy %s", msg);
		free(p);
		return NULL;
	}
	p->loaded_at = time(NULL);
	return p;
}

al_policy *al_policy_open(const char *path, const al_policy_kind *kind,
			  const al_policy_limits *limits, al_err *err)
{
	al_policy *p = policy_new(path, kind, limits, err);
	if (p == NULL)
		return NULL;
	char msg[AL_POLICY_ERROR_MAX];
	size_t len = 0;
	char *src = read_policy(path, &len, &p->cur_id, msg, sizeof msg);
	if (src != NULL) {
		p->st = state_build(p, src, len, msg, sizeof msg);
		free(src);
	}
	if (p->st == NULL) {
		al_err_set(err, AL_EINVAL, 0, "policy %s", msg);
		free(p);
		return NULL;
	}
	p->from_file = true;
	p->loaded_at = time(NULL);
	return p;
}

void al_policy_close(al_policy *p)
{
	if (p == NULL)
		return;
	state_free(p->st);
	free(p);
}

int al_policy_reload_if_changed(al_policy *p)
{
	if (p == NULL || !p->from_file)
		return 0;
	struct stat now;
	char msg[AL_POLICY_ERROR_MAX];
	if (stat(p->path, &now) != 0) {
		if (p->failed_valid && p->failed_id.st_ino == 0)
			return 0; /* still missing, already said so */
		snprintf(msg, sizeof msg, "%s: %s", p->path, strerror(errno));
		memset(&p->failed_id, 0, sizeof p->failed_id);
		goto failed;
	}
	if (same_file(&now, &p->cur_id))
		return 0;
	if (p->failed_valid && same_file(&now, &p->failed_id))
		return 0;
	struct stat id;
	size_t len = 0;
	char *src = read_policy(p->path, &len, &id, msg, sizeof msg);
	if (src == NULL) {
		p->failed_id = now;
		goto failed;
	}
	al_policy_state *st = state_build(p, src, len, msg, sizeof msg);
	free(src);
	if (st == NULL) {
		p->failed_id = id;
		goto failed;
	}
	state_free(p->st);
	p->st = st;
	p->cur_id = id;
	p->failed_valid = false;
	p->reload_error[0] = '\0';
	p->reload_error_at = 0;
	p->loaded_at = time(NULL);
	p->reloads++;
	al_info("policy %s: reloaded", p->path);
	return 1;
failed:
	p->failed_valid = true;
	snprintf(p->reload_error, sizeof p->reload_error, "%s", msg);
	p->reload_error_at = time(NULL);
	al_warn("policy reload failed, the last good policy stays: %s", msg);
	return -1;
}

void al_policy_status(const al_policy *p, al_policy_stat *out)
{
	memset(out, 0, sizeof *out);
	if (p == NULL)
		return;
	out->path = p->path;
	out->loaded_at = p->loaded_at;
	out->reloads = p->reloads;
	snprintf(out->reload_error, sizeof out->reload_error, "%s",
		 p->reload_error);
	out->reload_error_at = p->reload_error_at;
	out->calls = p->calls;
	out->failures = p->failures;
	snprintf(out->last_failure, sizeof out->last_failure, "%s",
		 p->last_failure);
	out->mem_used = p->st->used;
	out->mem_peak = p->st->peak;
}
