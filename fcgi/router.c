#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "api_credentials.h"
#include "api_projects.h"
#include "api_templates.h"
#include "base/config.h"
#include "base/log.h"
#include "http.h"
#include "model/auth.h"
#include "model/sandbox_activity.h"

/* Who may call a route. */
enum access {
	ANYONE, /* no API key needed */
	KEY,	/* any active key; the handler scopes to its project */
	ADMIN,	/* admin keys only: 403 for member keys */
};

/* The /v1 routes. A pattern segment "{id}" captures one path segment into
 * r->id (checked with al_id_valid by the handlers' loaders). */
static const struct route {
	const char *method;
	const char *pattern;
	enum access access;
	al_handler_fn fn;
	/* A call on sandbox {id} that counts as its activity, which its idle
	 * rule (policies/lifecycle.lua) measures; reads of its record
	 * (status, snapshot list, egress log) do not, so that a dashboard
	 * polling them does not keep every sandbox awake. */
	bool activity;
} routes[] = {
	{"GET", "/v1/health", ANYONE, fcgi_api_health, false},
	{"GET", "/v1/projects", ADMIN, fcgi_api_projects, false},
	{"POST", "/v1/projects", ADMIN, fcgi_api_project_create, false},
	{"GET", "/v1/projects/{id}", ADMIN, fcgi_api_project_get, false},
	{"PUT", "/v1/projects/{id}/quota", ADMIN, fcgi_api_project_quota,
	 false},
	{"GET", "/v1/keys", ADMIN, fcgi_api_keys, false},
	{"POST", "/v1/keys", ADMIN, fcgi_api_key_create, false},
	{"DELETE", "/v1/keys/{id}", ADMIN, fcgi_api_key_delete, false},
	{"GET", "/v1/info", KEY, fcgi_api_info, false},
	{"POST", "/v1/credentials", KEY, fcgi_api_credential_create, false},
	{"GET", "/v1/credentials", KEY, fcgi_api_credential_list, false},
	{"GET", "/v1/credentials/{id}", KEY, fcgi_api_credential_get, false},
	{"PUT", "/v1/credentials/{id}", KEY, fcgi_api_credential_rotate, false},
	{"DELETE", "/v1/credentials/{id}", KEY, fcgi_api_credential_delete,
	 false},
	{"GET", "/v1/audit", KEY, fcgi_api_audit, false},
	{"GET", "/v1/templates", KEY, fcgi_api_templates, false},
	{"POST", "/v1/templates", KEY, fcgi_api_template_build, false},
	{"GET", "/v1/templates/builds/{id}", KEY, fcgi_api_build_get, false},
	{"GET", "/v1/templates/builds/{id}/logs", KEY, fcgi_api_build_logs,
	 false},
	{"GET", "/v1/templates/builds/{id}/egress", KEY, fcgi_api_build_egress,
	 false},
	{"GET", "/v1/templates/{id}", KEY, fcgi_api_template_get, false},
	{"DELETE", "/v1/templates/{id}", KEY, fcgi_api_template_delete, false},
	{"PUT", "/v1/templates/{id}/warm_pool", ADMIN, fcgi_api_template_pool,
	 false},
	{"POST", "/v1/sandboxes", KEY, fcgi_api_sandbox_create, false},
	{"GET", "/v1/sandboxes", KEY, fcgi_api_sandbox_list, false},
	{"GET", "/v1/sandboxes/{id}", KEY, fcgi_api_sandbox_get, false},
	{"DELETE", "/v1/sandboxes/{id}", KEY, fcgi_api_sandbox_delete, false},
	{"POST", "/v1/sandboxes/{id}/pause", KEY, fcgi_api_sandbox_pause, true},
	{"POST", "/v1/sandboxes/{id}/resume", KEY, fcgi_api_sandbox_resume,
	 true},
	{"POST", "/v1/sandboxes/{id}/suspend", KEY, fcgi_api_sandbox_suspend,
	 true},
	{"POST", "/v1/sandboxes/{id}/fork", KEY, fcgi_api_sandbox_fork, true},
	{"POST", "/v1/sandboxes/{id}/timeout", KEY, fcgi_api_sandbox_timeout,
	 true},
	{"POST", "/v1/sandboxes/{id}/snapshots", KEY, fcgi_api_snapshot_create,
	 true},
	{"GET", "/v1/sandboxes/{id}/snapshots", KEY, fcgi_api_snapshot_list,
	 false},
	{"GET", "/v1/snapshots/{id}", KEY, fcgi_api_snapshot_get, false},
	{"DELETE", "/v1/snapshots/{id}", KEY, fcgi_api_snapshot_delete, false},
	{"PUT", "/v1/sandboxes/{id}/network", KEY, fcgi_api_sandbox_network_put,
	 true},
	{"GET", "/v1/sandboxes/{id}/egress", KEY, fcgi_api_sandbox_egress,
	 false},
	{"POST", "/v1/sandboxes/{id}/exec", KEY, fcgi_api_exec, true},
	{"PUT", "/v1/sandboxes/{id}/files", KEY, fcgi_api_files_put, true},
	{"GET", "/v1/sandboxes/{id}/files", KEY, fcgi_api_files_get, true},
};

/* Match path against pattern; fills id (AL_REQ_ID_MAX) on a capture. */
static int match(const char *pattern, const char *path, char *id)
{
	const char *p = pattern, *s = path;

	while (*p != '\0') {
		if (strncmp(p, "{id}", 4) == 0) {
			size_t n = strcspn(s, "/");
			if (n == 0 || n >= AL_REQ_ID_MAX)
				return 0;
			memcpy(id, s, n);
			id[n] = '\0';
			s += n;
			p += 4;
			continue;
		}
		if (*p != *s)
			return 0;
		p++;
		s++;
	}
	return *s == '\0';
}

/* The key from "Authorization: Bearer <key>" or "X-API-Key: <key>". */
static const char *request_key(al_req *r)
{
	const char *h = fcgi_req_param(r, "HTTP_AUTHORIZATION");
	if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0) {
		h += 7;
		while (*h == ' ')
			h++;
		return h;
	}
	return fcgi_req_param(r, "HTTP_X_API_KEY");
}

/* Sandbox r->id had a call: its activity moves (before the handler, so
 * that an idle sweep deciding meanwhile sees it). A failure is the
 * handler's to meet and answer; here it is only logged. */
static void touch(al_req *r)
{
	al_err err = {0};
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL ||
	    al_sandbox_touch(db, r->id, fcgi_req_scope(r), &err) < 0)
		al_warn("sandbox %s: recording its activity: %s", r->id,
			err.msg);
}

void fcgi_route(al_req *r)
{
	char allow[128] = "";
	const struct route *hit = NULL;
	size_t nroutes = sizeof routes / sizeof routes[0];

	for (size_t i = 0; i < nroutes; i++) {
		char id[AL_REQ_ID_MAX] = "";
		if (!match(routes[i].pattern, r->path, id))
			continue;
		if (strcmp(routes[i].method, r->method) == 0) {
			hit = &routes[i];
			memcpy(r->id, id, sizeof r->id);
			break;
		}
		size_t n = strlen(allow);
		snprintf(allow + n, sizeof allow - n, "%s%s", n > 0 ? ", " : "",
			 routes[i].method);
	}
	if (hit == NULL) {
		if (allow[0] == '\0') {
			fcgi_http_errorf(r, AL_ENOENT, "no such endpoint");
			return;
		}
		char extra[160];
		snprintf(extra, sizeof extra, "Allow: %s\r\n", allow);
		static const char body[] =
			"{\"error\":{\"code\":\"method_not_allowed\","
			"\"message\":\"method not allowed\"}}\n";
		fcgi_http_head(r, 405, "application/json", extra);
		fcgi_http_write(r, body, sizeof body - 1);
		return;
	}
	if (hit->access != ANYONE) {
		al_err err;
		const char *key = request_key(r);
		if (key == NULL || key[0] == '\0') {
			fcgi_http_errorf(r, AL_EAUTH,
					 "API key required (Authorization: "
					 "Bearer <key> or X-API-Key)");
			return;
		}
		al_db *db = fcgi_req_db(r, &err);
		if (db == NULL) {
			fcgi_http_error(r, &err);
			return;
		}
		if (al_auth_identify(db, key, &r->who, &err) < 0) {
			fcgi_http_error(r, &err);
			return;
		}
		if (hit->access == ADMIN && r->who.role != AL_ROLE_ADMIN) {
			fcgi_http_errorf(r, AL_EPERM,
					 "this endpoint needs an admin key");
			return;
		}
	}
	if (hit->activity)
		touch(r);
	hit->fn(r);
}
