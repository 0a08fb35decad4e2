/* policy_lifecycle: lifecycle(sandbox) -> what an idle sandbox becomes,
 * the rolling snapshots' cadence and their retention (policy.h). The
 * call only reads what the policy returned; the ranges are checked here
 * after it, so that a bad value is logged and its default used. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "policy/policy.h"
#include "policy/policy_internal.h"

static const char request_src[] =
	"return function(f, id, template, project, driver, state, metadata)\n"
	"  return f({ id = id, template = template, project = project,\n"
	"             driver = driver, state = state, metadata = metadata })\n"
	"end\n";
#define REQUEST_NARGS 7

static const char *const action_names[AL_IDLE_ACTION_MAX] = {
	[AL_IDLE_NONE] = "none",
	[AL_IDLE_SUSPEND] = "suspend",
	[AL_IDLE_DELETE] = "delete",
};

const char *al_idle_action_name(enum al_idle_action a)
{
	return (unsigned)a < AL_IDLE_ACTION_MAX ? action_names[a] : "none";
}

/* The fields of the answer, as the policy gave them. */
enum field { F_AFTER, F_ACTION, F_EVERY, F_KEEP, F_MAX };
static const struct {
	const char *table, *key;
} fields[F_MAX] = {
	[F_AFTER] = {"idle", "after"},
	[F_ACTION] = {"idle", "action"},
	[F_EVERY] = {"snapshots", "every"},
	[F_KEEP] = {"snapshots", "keep"},
};

typedef struct raw_field {
	int type; /* LUA_TNIL when left out */
	double num;
	char str[16];
} raw_field;

struct ask {
	const al_lifecycle_req *req;
	raw_field raw[F_MAX];
	bool table_bad[2]; /* idle, snapshots: present but not a table */
};

/* Read t[key] (no metamethods: the policy's code runs only in its call)
 * into f. */
static void read_field(lua_State *L, int t, const char *key, raw_field *f)
{
	lua_pushstring(L, key);
	lua_rawget(L, t);
	f->type = lua_type(L, -1);
	if (f->type == LUA_TNUMBER)
		f->num = lua_tonumber(L, -1);
	else if (f->type == LUA_TSTRING) {
		size_t len = 0;
		const char *s = lua_tolstring(L, -1, &len);
		al_policy_copy_printable(f->str, sizeof f->str, s, len);
		if (len >= sizeof f->str)
			f->str[0] = '\0'; /* too long to be an action */
	}
	lua_pop(L, 1);
}

static int ask_policy(lua_State *L)
{
	struct ask *a = lua_touserdata(L, 1);
	const al_lifecycle_req *r = a->req;
	lua_settop(L, 0);
	void *ud;
	lua_getallocf(L, &ud);
	lua_rawgeti(L, LUA_REGISTRYINDEX, ((al_policy_state *)ud)->request_ref);
	al_policy_push_entry(L);
	al_policy_push_str(L, r->sandbox);
	al_policy_push_str(L, r->template_name);
	al_policy_push_str(L, r->project);
	al_policy_push_str(L, r->driver);
	al_policy_push_str(L, r->state);
	al_policy_push_cached_metadata(L, r->metadata, r->n_metadata);
	int n = al_policy_pcall(L, REQUEST_NARGS);
	if (n > 1 || (n == 1 && !lua_isnil(L, 1) && !lua_istable(L, 1)))
		return luaL_error(L,
				  "lifecycle() returned %d value(s) (%s), not"
				  " one table",
				  n, n > 0 ? luaL_typename(L, 1) : "none");
	if (n == 0 || lua_isnil(L, 1)) {
		lua_settop(L, 0);
		return 0; /* every default */
	}
	for (int i = 0; i < 2; i++) {
		const char *name = i == 0 ? "idle" : "snapshots";
		lua_pushstring(L, name);
		lua_rawget(L, 1);
		int t = lua_gettop(L);
		if (lua_istable(L, t)) {
			for (int k = 0; k < F_MAX; k++)
				if (strcmp(fields[k].table, name) == 0)
					read_field(L, t, fields[k].key,
						   &a->raw[k]);
		} else if (!lua_isnil(L, t))
			a->table_bad[i] = true;
		lua_settop(L, 1);
	}
	lua_settop(L, 0);
	return 0;
}

static const al_lifecycle_decision nothing = {
	.idle_action = AL_IDLE_NONE,
	.idle_after = 0,
	.snapshot_every = 0,
	.snapshot_keep = 0,
};

/* A number of seconds in [min, AL_LIFECYCLE_SECONDS_MAX] into *out, or
 * a complaint into why. */
static void seconds(const raw_field *f, const char *name, long min, long *out,
		    char *why, size_t len)
{
	if (f->type == LUA_TNIL)
		return;
	if (f->type == LUA_TNUMBER && isfinite(f->num) && f->num >= min &&
	    f->num <= AL_LIFECYCLE_SECONDS_MAX) {
		*out = (long)f->num;
		return;
	}
	snprintf(why, len,
		 "%s is not a number of seconds from %ld to %ld: its default"
		 " (%ld) applies",
		 name, min, AL_LIFECYCLE_SECONDS_MAX, *out);
}

/* The policy's answer over the defaults; each bad field logged. */
static void decide(al_policy *p, const struct ask *a,
		   al_lifecycle_decision *out)
{
	*out = (al_lifecycle_decision){
		.idle_action = AL_IDLE_SUSPEND,
		.idle_after = AL_LIFECYCLE_IDLE_AFTER_DEFAULT,
		.snapshot_every = AL_LIFECYCLE_EVERY_DEFAULT,
		.snapshot_keep = AL_LIFECYCLE_KEEP_DEFAULT,
	};
	char why[4][200] = {{0}};
	if (a->table_bad[0] || a->table_bad[1])
		snprintf(why[0], sizeof why[0],
			 "lifecycle(): %s is not a table: its defaults apply",
			 a->table_bad[0] ? "idle" : "snapshots");
	seconds(&a->raw[F_AFTER], "lifecycle(): idle.after", 1,
		&out->idle_after, why[1], sizeof why[1]);
	seconds(&a->raw[F_EVERY], "lifecycle(): snapshots.every", 0,
		&out->snapshot_every, why[2], sizeof why[2]);
	seconds(&a->raw[F_KEEP], "lifecycle(): snapshots.keep", 0,
		&out->snapshot_keep, why[3], sizeof why[3]);
	const raw_field *act = &a->raw[F_ACTION];
	if (act->type != LUA_TNIL) {
		int found = -1;
		for (int i = 0;
		     act->type == LUA_TSTRING && i < AL_IDLE_ACTION_MAX; i++)
			if (strcmp(act->str, action_names[i]) == 0)
				found = i;
		if (found >= 0)
			out->idle_action = (enum al_idle_action)found;
		else if (why[0][0] == '\0')
			snprintf(why[0], sizeof why[0],
				 "lifecycle(): idle.action is not \"suspend\","
				 " \"delete\" or \"none\": its default"
				 " (suspend) applies");
	}
	for (int i = 0; i < 4; i++)
		if (why[i][0] != '\0')
			al_policy_warn(p, why[i]);
}

static int dry_run(al_policy_state *st, char *msg, size_t msg_len)
{
	static const al_policy_kv meta[] = {{"dry_run", "1"}};
	al_lifecycle_req req = {
		.sandbox = "dry-run",
		.template_name = "base",
		.project = "default",
		.driver = "ns",
		.state = "running",
		.metadata = meta,
		.n_metadata = 1,
	};
	struct ask a = {.req = &req};
	return al_policy_run(st, ask_policy, &a, msg, msg_len);
}

const al_policy_kind al_policy_lifecycle_kind = {
	.entry = "lifecycle",
	.request_src = request_src,
	.dry_run = dry_run,
};

static bool field_ok(const char *s)
{
	return s != NULL &&
	       strnlen(s, AL_POLICY_FIELD_MAX + 1) <= AL_POLICY_FIELD_MAX;
}

static const char *req_problem(const al_lifecycle_req *r)
{
	if (!field_ok(r->sandbox) || !field_ok(r->template_name) ||
	    !field_ok(r->project) || !field_ok(r->driver) ||
	    !field_ok(r->state))
		return "bad request: a field is missing or too long";
	if (r->n_metadata > AL_POLICY_LIST_MAX ||
	    (r->n_metadata > 0 && r->metadata == NULL))
		return "bad request: metadata";
	for (size_t i = 0; i < r->n_metadata; i++)
		if (!field_ok(r->metadata[i].key) ||
		    !field_ok(r->metadata[i].value))
			return "bad request: a metadata entry";
	return NULL;
}

int al_policy_lifecycle(al_policy *p, const al_lifecycle_req *req,
			al_lifecycle_decision *out)
{
	if (out == NULL)
		return -1;
	*out = nothing;
	if (p == NULL || req == NULL || req_problem(req) != NULL)
		return -1;
	p->calls++;
	struct ask a = {.req = req};
	char why[AL_POLICY_ERROR_MAX];
	if (al_policy_run(p->st, ask_policy, &a, why, sizeof why) != 0) {
		/* Nothing is done to the sandbox: logged as the failure
		 * it is, without egress's "(denied)". */
		p->failures++;
		snprintf(p->last_failure, sizeof p->last_failure, "%s", why);
		al_policy_warn(p, why);
		return -1;
	}
	decide(p, &a, out);
	return 0;
}
