/* policy_credentials: credentials(req) -> allow/deny, asked per
 * credential a request would carry (core/policy/policy.h). */
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/dnsname.h"
#include "policy/policy.h"
#include "policy/policy_internal.h"

struct ask {
	const al_cred_req *req;
	al_egress_decision *out;
};

static const char request_src[] =
	"return function(f, credential, form, scope, host, port, method,\n"
	"                path, sandbox, template, project, metadata)\n"
	"  return f({ credential = credential, form = form, scope = scope,\n"
	"             host = host, port = port, method = method,\n"
	"             path = path, sandbox = sandbox, template = template,\n"
	"             project = project, metadata = metadata })\n"
	"end\n";
#define REQUEST_NARGS 12

static int ask_policy(lua_State *L)
{
	struct ask *a = lua_touserdata(L, 1);
	const al_cred_req *r = a->req;
	lua_settop(L, 0);
	void *ud;
	lua_getallocf(L, &ud);
	lua_rawgeti(L, LUA_REGISTRYINDEX, ((al_policy_state *)ud)->request_ref);
	al_policy_push_entry(L);
	al_policy_push_str(L, r->credential);
	al_policy_push_str(L, r->form);
	al_policy_push_str(L, r->scope);
	al_policy_push_str(L, r->host);
	lua_pushinteger(L, (lua_Integer)r->port);
	al_policy_push_str(L, r->method);
	al_policy_push_str(L, r->path);
	al_policy_push_str(L, r->sandbox);
	al_policy_push_str(L, r->template_name);
	al_policy_push_str(L, r->project);
	al_policy_push_cached_metadata(L, r->metadata, r->n_metadata);
	int n = al_policy_pcall(L, REQUEST_NARGS);
	al_policy_read_decision(L, n, "credentials()", a->out);
	lua_settop(L, 0);
	return 0;
}

static int dry_run(al_policy_state *st, char *msg, size_t msg_len)
{
	static const al_policy_kv meta[] = {{"dry_run", "1"}};
	al_cred_req req = {
		.credential = "dry-run",
		.form = "header",
		.scope = "project",
		.host = "api.example.com",
		.port = 443,
		.method = "GET",
		.path = "/",
		.sandbox = "dry-run",
		.template_name = "base",
		.project = "default",
		.metadata = meta,
		.n_metadata = 1,
	};
	al_egress_decision d;
	struct ask a = {&req, &d};
	return al_policy_run(st, ask_policy, &a, msg, msg_len);
}

const al_policy_kind al_policy_credentials_kind = {
	.entry = "credentials",
	.request_src = request_src,
	.dry_run = dry_run,
};

static bool field_ok(const char *s)
{
	return s == NULL ||
	       strnlen(s, AL_POLICY_FIELD_MAX + 1) <= AL_POLICY_FIELD_MAX;
}

static const char *req_problem(const al_cred_req *r)
{
	if (r->credential == NULL || r->form == NULL || r->host == NULL ||
	    !al_dnsname_valid(r->host, strnlen(r->host, 254)))
		return "bad request: no credential, form or canonical host";
	if (!field_ok(r->credential) || !field_ok(r->method) ||
	    !field_ok(r->path) || !field_ok(r->sandbox) ||
	    !field_ok(r->template_name) || !field_ok(r->project) ||
	    !field_ok(r->scope) || r->port > 65535)
		return "bad request: a field is too long";
	if (r->n_metadata > AL_POLICY_LIST_MAX ||
	    (r->n_metadata > 0 && r->metadata == NULL))
		return "bad request: metadata";
	for (size_t i = 0; i < r->n_metadata; i++)
		if (r->metadata[i].key == NULL ||
		    r->metadata[i].value == NULL ||
		    !field_ok(r->metadata[i].key) ||
		    !field_ok(r->metadata[i].value))
			return "bad request: a metadata entry";
	return NULL;
}

int al_policy_credentials(al_policy *p, const al_cred_req *req,
			  al_egress_decision *out)
{
	if (out == NULL)
		return -1;
	*out = (al_egress_decision){0};
	const char *bad = p == NULL || req == NULL ? "no policy or no request"
						   : req_problem(req);
	if (bad != NULL) {
		snprintf(out->reason, sizeof out->reason, "%s", bad);
		return -1;
	}
	p->calls++;
	struct ask a = {req, out};
	char why[AL_POLICY_ERROR_MAX];
	if (al_policy_run(p->st, ask_policy, &a, why, sizeof why) != 0) {
		al_policy_failed(p, why);
		*out = (al_egress_decision){0};
		snprintf(out->reason, sizeof out->reason,
			 "credentials policy failed (see the log)");
		return -1;
	}
	return 0;
}
