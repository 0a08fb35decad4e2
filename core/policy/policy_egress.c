/* policy_egress: the egress decision (request -> Lua table -> egress(req)
 * -> allow/deny) and the rules C applies after it whatever it says. */
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/dnsname.h"
#include "policy/policy.h"
#include "policy/policy_internal.h"

static const char *const proto_names[AL_EGRESS_PROTO_MAX] = {
	"dns",
	"http",
	"https",
	"tcp",
};

/* request(entry, fields...): req as the policy sees it. Its own chunk,
 * reachable only from the registry. */
static const char request_src[] =
	"return function(f, name, port, protocol, method, path, sandbox,\n"
	"                template, project, mode, build, metadata, allow,\n"
	"                deny)\n"
	"  return f({ name = name, port = port, protocol = protocol,\n"
	"             method = method, path = path, sandbox = sandbox,\n"
	"             template = template, project = project, mode = mode,\n"
	"             build = build, metadata = metadata, allow = allow,\n"
	"             deny = deny })\n"
	"end\n";
#define REQUEST_NARGS 14

/* ---- one request through the policy ---- */

struct ask {
	const al_egress_req *req;
	al_egress_decision *out;
};

static int ask_policy(lua_State *L)
{
	struct ask *a = lua_touserdata(L, 1);
	const al_egress_req *r = a->req;
	lua_settop(L, 0);
	void *ud;
	lua_getallocf(L, &ud);
	lua_rawgeti(L, LUA_REGISTRYINDEX, ((al_policy_state *)ud)->request_ref);
	al_policy_push_entry(L);
	al_policy_push_str(L, r->name);
	lua_pushinteger(L, (lua_Integer)r->port);
	al_policy_push_str(L, proto_names[r->protocol]);
	al_policy_push_str(L, r->method);
	al_policy_push_str(L, r->path);
	al_policy_push_str(L, r->sandbox);
	al_policy_push_str(L, r->template_name);
	al_policy_push_str(L, r->project);
	al_policy_push_str(L, al_net_mode_name(r->mode));
	lua_pushboolean(L, r->build);
	al_policy_state *st = ud;
	al_policy_push_cached_metadata(L, r->metadata, r->n_metadata);
	al_policy_push_cached(L, &st->allow_ref, r->allow, NULL, r->n_allow);
	al_policy_push_cached(L, &st->deny_ref, r->deny, NULL, r->n_deny);

	int n = al_policy_pcall(L, REQUEST_NARGS);
	al_policy_read_decision(L, n, "egress()", a->out);
	lua_settop(L, 0);
	return 0;
}

static int dry_run(al_policy_state *st, char *msg, size_t msg_len)
{
	static const char *const allow[] = {"example.com"};
	static const al_policy_kv meta[] = {{"dry_run", "1"}};
	al_egress_req req = {
		.name = "example.com",
		.port = 443,
		.protocol = AL_EGRESS_HTTPS,
		.sandbox = "dry-run",
		.template_name = "base",
		.project = "default",
		.metadata = meta,
		.n_metadata = 1,
		.mode = AL_NET_ALLOWLIST,
		.allow = allow,
		.n_allow = 1,
	};
	al_egress_decision d;
	struct ask a = {&req, &d};
	return al_policy_run(st, ask_policy, &a, msg, msg_len);
}

const al_policy_kind al_policy_egress_kind = {
	.entry = "egress",
	.request_src = request_src,
	.dry_run = dry_run,
};

/* ---- the decision ---- */

static const char *field_problem(const char *s)
{
	if (s != NULL &&
	    strnlen(s, AL_POLICY_FIELD_MAX + 1) > AL_POLICY_FIELD_MAX)
		return "a field is too long";
	return NULL;
}

static const char *list_problem(const char *const *v, size_t n)
{
	if (n > AL_POLICY_LIST_MAX)
		return "a list is too long";
	if (n > 0 && v == NULL)
		return "a list is missing";
	for (size_t i = 0; i < n; i++)
		if (v[i] == NULL || field_problem(v[i]) != NULL)
			return "a list entry is missing or too long";
	return NULL;
}

static const char *req_problem(const al_egress_req *r)
{
	if (r->name == NULL ||
	    !al_dnsname_valid(r->name, strnlen(r->name, AL_DNSNAME_MAX + 1)))
		return "the name is not canonical";
	if ((unsigned)r->protocol >= AL_EGRESS_PROTO_MAX)
		return "unknown protocol";
	if ((unsigned)r->mode >= AL_NET_MODE_MAX)
		return "unknown network mode";
	if (r->port > 65535)
		return "port out of range";
	const char *s;
	if ((s = field_problem(r->method)) || (s = field_problem(r->path)) ||
	    (s = field_problem(r->sandbox)) ||
	    (s = field_problem(r->template_name)) ||
	    (s = field_problem(r->project)))
		return s;
	if (r->n_metadata > AL_POLICY_LIST_MAX)
		return "too much metadata";
	if (r->n_metadata > 0 && r->metadata == NULL)
		return "metadata missing";
	for (size_t i = 0; i < r->n_metadata; i++)
		if (r->metadata[i].key == NULL ||
		    r->metadata[i].value == NULL ||
		    field_problem(r->metadata[i].key) ||
		    field_problem(r->metadata[i].value))
			return "a metadata entry is missing or too long";
	if ((s = list_problem(r->allow, r->n_allow)) ||
	    (s = list_problem(r->deny, r->n_deny)))
		return s;
	return NULL;
}

/* A decision of C's own: reason is what + detail. */
static void decide(al_egress_decision *out, bool allow, const char *what,
		   const char *detail)
{
	out->allow = allow;
	char buf[AL_POLICY_REASON_MAX];
	snprintf(buf, sizeof buf, "%s%s", what, detail);
	al_policy_copy_printable(out->reason, sizeof out->reason, buf,
				 strlen(buf));
}

int al_policy_egress(al_policy *p, const al_egress_req *req,
		     al_egress_decision *out)
{
	if (out == NULL)
		return -1;
	if (p == NULL || req == NULL) {
		decide(out, false, "no policy or no request", "");
		return -1;
	}
	const char *bad = req_problem(req);
	if (bad != NULL) {
		decide(out, false, "bad request: ", bad);
		return -1;
	}
	if (req->mode == AL_NET_NONE) {
		decide(out, false, "", "network mode none");
		return 0;
	}
	p->calls++;
	struct ask a = {req, out};
	char why[AL_POLICY_ERROR_MAX];
	if (al_policy_run(p->st, ask_policy, &a, why, sizeof why) != 0) {
		al_policy_failed(p, why);
		decide(out, false, "", "policy failed (see the log)");
		return -1;
	}
	if (!out->allow)
		return 0;
	/* The request's lists narrow what the policy allows, checked here
	 * so that a policy bug cannot widen them. */
	if (al_dnsname_match_list(req->name, req->deny, req->n_deny))
		decide(out, false, "", "on the sandbox's deny list");
	else if (req->mode == AL_NET_ALLOWLIST && !req->build &&
		 !al_dnsname_match_list(req->name, req->allow, req->n_allow))
		decide(out, false, "", "not on the sandbox's allow list");
	return 0;
}
