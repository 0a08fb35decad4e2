/* policy_lib: what both kinds of policy share — the globals a policy
 * calls (match, match_any, allow, deny; the name rules are
 * base/dnsname's), and the conversions between C requests and Lua
 * values. */
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/dnsname.h"
#include "policy/policy.h"
#include "policy/policy_internal.h"

static const char *const mode_names[AL_NET_MODE_MAX] = {
	[AL_NET_NONE] = "none",
	[AL_NET_ALLOWLIST] = "allowlist",
	[AL_NET_OPEN] = "open",
};

const char *al_net_mode_name(enum al_net_mode m)
{
	return (unsigned)m < AL_NET_MODE_MAX ? mode_names[m] : "none";
}

int al_net_mode_from_name(const char *name)
{
	for (int i = 0; name != NULL && i < AL_NET_MODE_MAX; i++)
		if (strcmp(name, mode_names[i]) == 0)
			return i;
	return -1;
}

/* ---- helpers policies call ---- */

/* match(name, pattern) */
static int lua_match(lua_State *L)
{
	size_t nl, pl;
	const char *name = luaL_checklstring(L, 1, &nl);
	const char *pat = luaL_checklstring(L, 2, &pl);
	lua_pushboolean(L, al_dnsname_match_n(name, nl, pat, pl));
	return 1;
}

/* match_any(name, {pattern, ...}): entries that are not strings never
 * match. */
static int lua_match_any(lua_State *L)
{
	size_t nl, pl;
	const char *name = luaL_checklstring(L, 1, &nl);
	luaL_checktype(L, 2, LUA_TTABLE);
	size_t n = lua_objlen(L, 2);
	for (size_t i = 1; i <= n; i++) {
		lua_rawgeti(L, 2, (int)i);
		const char *pat = lua_type(L, -1) == LUA_TSTRING
					  ? lua_tolstring(L, -1, &pl)
					  : NULL;
		bool hit = pat != NULL && al_dnsname_match_n(name, nl, pat, pl);
		lua_pop(L, 1);
		if (hit) {
			lua_pushboolean(L, 1);
			return 1;
		}
	}
	lua_pushboolean(L, 0);
	return 1;
}

/* allow(reason) / deny(reason): the decision egress() returns. */
static int verdict(lua_State *L, int allow)
{
	luaL_optstring(L, 1, NULL);
	lua_settop(L, 1);
	lua_pushboolean(L, allow);
	lua_insert(L, 1);
	return 2;
}

static int lua_allow(lua_State *L)
{
	return verdict(L, 1);
}

static int lua_deny(lua_State *L)
{
	return verdict(L, 0);
}

void al_policy_copy_printable(char *dst, size_t len, const char *src,
			      size_t src_len)
{
	if (len == 0)
		return;
	size_t n = src_len < len - 1 ? src_len : len - 1;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)src[i];
		dst[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	dst[n] = '\0';
}

void al_policy_lib_open(lua_State *L, const char *request_src)
{
	lua_register(L, "match", lua_match);
	lua_register(L, "match_any", lua_match_any);
	lua_register(L, "allow", lua_allow);
	lua_register(L, "deny", lua_deny);
	if (luaL_loadbufferx(L, request_src, strlen(request_src), "=request",
			     "t") != 0)
		lua_error(L);
	lua_call(L, 0, 1);
	void *ud;
	lua_getallocf(L, &ud);
	((al_policy_state *)ud)->request_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

void al_policy_push_str(lua_State *L, const char *v)
{
	if (v != NULL)
		lua_pushstring(L, v);
	else
		lua_pushnil(L);
}

static void push_list(lua_State *L, const char *const *v, size_t n)
{
	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		lua_pushstring(L, v[i]);
		lua_rawseti(L, -2, (int)i + 1);
	}
}

void al_policy_push_metadata(lua_State *L, const al_policy_kv *kv, size_t n)
{
	lua_createtable(L, 0, (int)n);
	for (size_t i = 0; i < n; i++) {
		lua_pushstring(L, kv[i].value);
		lua_setfield(L, -2, kv[i].key);
	}
}

/* The value on top is a string equal to s; pops it. */
static bool pop_equals(lua_State *L, const char *s)
{
	size_t len;
	const char *v = lua_type(L, -1) == LUA_TSTRING
				? lua_tolstring(L, -1, &len)
				: NULL;
	bool same = v != NULL && len == strlen(s) && memcmp(v, s, len) == 0;
	lua_pop(L, 1);
	return same;
}

/* Table t has no metatable and exactly n keys. */
static bool plain_with_keys(lua_State *L, int t, size_t n)
{
	if (lua_getmetatable(L, t)) {
		lua_pop(L, 1);
		return false;
	}
	size_t keys = 0;
	lua_pushnil(L);
	while (lua_next(L, t) != 0) {
		lua_pop(L, 1);
		if (++keys > n) {
			lua_pop(L, 1);
			return false;
		}
	}
	return keys == n;
}

static bool list_is(lua_State *L, int t, const char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		lua_rawgeti(L, t, (int)i + 1);
		if (!pop_equals(L, v[i]))
			return false;
	}
	if (n == 0)
		return plain_with_keys(L, t, 0);
	if (lua_getmetatable(L, t)) {
		lua_pop(L, 1);
		return false;
	}
	/* 1..n are as built; nothing else: no [0] (LuaJIT's array part
	 * starts there, before 1 in next()'s order) and nothing after n
	 * (the rest of the array part, then every hash key). */
	lua_rawgeti(L, t, 0);
	bool zero = lua_isnil(L, -1);
	lua_pop(L, 1);
	if (!zero)
		return false;
	lua_pushinteger(L, (lua_Integer)n);
	if (lua_next(L, t) == 0)
		return true;
	lua_pop(L, 2);
	return false;
}

static bool metadata_is(lua_State *L, int t, const al_policy_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		lua_pushstring(L, kv[i].key);
		lua_rawget(L, t);
		if (!pop_equals(L, kv[i].value))
			return false;
	}
	/* n distinct keys found: duplicates in kv (the last one wins when
	 * built) make the count differ, and the table is rebuilt. */
	return plain_with_keys(L, t, n);
}

/* Push the table cached at *ref if its contents are what the request
 * carries now (the next request may carry other lists, and the policy
 * may have changed the table it was given: contents decide, never a
 * pointer), else build it and cache it. */
void al_policy_push_cached(lua_State *L, int *ref, const char *const *list,
			   const al_policy_kv *kv, size_t n)
{
	if (*ref != LUA_NOREF) {
		lua_rawgeti(L, LUA_REGISTRYINDEX, *ref);
		int t = lua_gettop(L);
		if (lua_type(L, t) == LUA_TTABLE &&
		    (kv != NULL ? metadata_is(L, t, kv, n)
				: list_is(L, t, list, n)))
			return;
		lua_pop(L, 1);
		luaL_unref(L, LUA_REGISTRYINDEX, *ref);
		*ref = LUA_NOREF;
	}
	if (kv != NULL)
		al_policy_push_metadata(L, kv, n);
	else
		push_list(L, list, n);
	lua_pushvalue(L, -1);
	*ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

void al_policy_push_cached_metadata(lua_State *L, const al_policy_kv *kv,
				    size_t n)
{
	void *ud;
	lua_getallocf(L, &ud);
	static const al_policy_kv none[1];
	al_policy_push_cached(L, &((al_policy_state *)ud)->meta_ref, NULL,
			      n > 0 ? kv : none, n);
}

int al_policy_read_decision(lua_State *L, int n, const char *what,
			    al_egress_decision *out)
{
	if (n < 1 || n > 2 || lua_type(L, 1) != LUA_TBOOLEAN ||
	    (n == 2 && !lua_isnil(L, 2) && lua_type(L, 2) != LUA_TSTRING))
		return luaL_error(L,
				  "%s returned %d value(s) (%s), not"
				  " allow(reason) or deny(reason)",
				  what, n,
				  n > 0 ? luaL_typename(L, 1) : "none");
	out->allow = lua_toboolean(L, 1);
	size_t len = 0;
	const char *why = n == 2 ? lua_tolstring(L, 2, &len) : NULL;
	if (why == NULL || len == 0)
		snprintf(out->reason, sizeof out->reason, "%s",
			 out->allow ? "policy allows" : "policy denies");
	else
		al_policy_copy_printable(out->reason, sizeof out->reason, why,
					 len);
	return 0;
}
