/* The credential routes (see api_credentials.h). Values arrive in
 * bodies only, are sealed at once and never answered, logged or
 * audited: every answer is a view (core/model/credential.h). */
#include "api_credentials.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base/log.h"
#include "cred/credclient.h"
#include "cred/credcrypt.h"
#include "model/audit.h"
#include "model/credential.h"
#include "model/project.h"

/* Whose credentials r acts on: its key's project, or for an admin the
 * ?project= it names. */
static al_cred_who who_of(al_req *r)
{
	const char *q = fcgi_req_query(r, "project");
	al_cred_who w = {.project = r->who.project,
			 .admin = r->who.role == AL_ROLE_ADMIN};
	if (w.admin && q != NULL && q[0] != '\0')
		w.project = q;
	return w;
}

/* One management row; a failure to write it is logged, not answered
 * (the change itself committed). */
static void audit(al_req *r, const char *action, const char *project,
		  const char *credential, const char *decision,
		  const char *reason)
{
	al_err err;
	al_db *db = fcgi_req_db(r, &err);
	al_audit_rec rec = {
		.project = project,
		.key_id = r->who.key_id,
		.credential = credential,
		.action = action,
		.method = r->method,
		.path = r->path,
		.status = -1,
		.decision = decision,
		.reason = reason,
	};
	if (db == NULL || al_audit_insert(db, &rec, 1, &err) < 0)
		al_warn("audit %s of credential %s: %s", action,
			credential != NULL ? credential : "-", err.msg);
}

/* A change committed: the controller pushes the new sets to the
 * affected gateways and says when they have them, so the next request
 * sees it. Bounded (core/cred/credclient.h); the answer stands either way. */
static void push(const al_req *r, const char *project)
{
	al_err err;
	al_cred_refresh_done d;
	if (al_credclient_refresh(r->cfg->state_dir, project, &d, &err) < 0)
		al_warn("credential change not pushed to gateways (they get it "
			"with their next channel): %s",
			err.msg);
	else if (d.acked < d.pushed)
		al_warn("credential change: %u of %u gateways acknowledged",
			d.acked, d.pushed);
}

/* A key asked for what it may not see: 404 to it, audited. */
static void refused(al_req *r, const al_err *err, int hidden)
{
	if (hidden)
		audit(r, "failed_access", r->who.project, r->id, "deny",
		      "another project's credential");
	fcgi_http_error(r, err);
}

static const char *view_str(json_object *o, const char *k)
{
	json_object *v = NULL;
	return json_object_object_get_ex(o, k, &v) && v != NULL
		       ? json_object_get_string(v)
		       : NULL;
}

/* Parse r's body as a spec; the body's copy of the value is wiped. */
static int read_spec(al_req *r, int rotate, al_cred_spec *spec, al_err *err)
{
	char *body = NULL;
	size_t len = 0;
	if (fcgi_req_body(r, AL_CRED_BODY_MAX, &body, &len, err) < 0)
		return -1;
	int rc = al_cred_spec_parse(body, len, rotate, spec, err);
	OPENSSL_cleanse(body, len);
	free(body);
	return rc;
}

static void answer_view(al_req *r, int status, json_object *view)
{
	fcgi_http_json(r, status, view);
	json_object_put(view);
}

void fcgi_api_credential_create(al_req *r)
{
	al_err err;
	al_cred_spec spec;
	al_keyring kr = {0};
	json_object *view = NULL;
	if (read_spec(r, 0, &spec, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	int admin = r->who.role == AL_ROLE_ADMIN;
	const char *project = spec.has_project ? spec.project : r->who.project;
	if (spec.c.scope == AL_CRED_GLOBAL)
		project = NULL;
	al_db *db = NULL;
	if (!admin && (project == NULL || strcmp(project, r->who.project))) {
		al_err_set(&err, AL_EPERM, 0,
			   project == NULL
				   ? "only admin keys create global credentials"
				   : "only admin keys create another project's"
				     " credentials");
		audit(r, "failed_access", r->who.project, spec.c.name, "deny",
		      err.msg);
		goto fail;
	}
	if ((db = fcgi_req_db(r, &err)) == NULL)
		goto fail;
	if (project != NULL && strcmp(project, r->who.project) != 0) {
		int exists = al_project_exists(db, project, &err);
		if (exists <= 0) {
			if (exists == 0)
				al_err_set(&err, AL_ENOENT, 0,
					   "no project '%s'", project);
			goto fail;
		}
	}
	if (al_keyring_load(&kr, r->cfg->state_dir, 1, &err) < 0 ||
	    al_credential_create(db, &kr, project, &spec, &view, &err) < 0)
		goto fail;
	al_keyring_wipe(&kr);
	al_info("credential %s (%s, %s of %s) created", view_str(view, "id"),
		spec.c.name, al_cred_scope_name(spec.c.scope),
		project != NULL ? project : "global");
	audit(r, "create", project, spec.c.name, "allow", view_str(view, "id"));
	push(r, project);
	al_cred_spec_free(&spec);
	answer_view(r, 201, view);
	return;
fail:
	al_keyring_wipe(&kr);
	al_cred_spec_free(&spec);
	fcgi_http_error(r, &err);
}

void fcgi_api_credential_list(al_req *r)
{
	al_err err;
	al_cred_who w = who_of(r);
	al_db *db = fcgi_req_db(r, &err);
	/* An admin's list is every project's unless it names one. */
	const char *filter = w.admin ? fcgi_req_list_project(r) : w.project;
	json_object *arr = db != NULL ? al_credential_list(db, &w, filter, &err)
				      : NULL;
	if (arr == NULL) {
		fcgi_http_error(r, &err);
		return;
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "credentials", arr);
	answer_view(r, 200, o);
}

void fcgi_api_credential_get(al_req *r)
{
	al_err err;
	int hidden = 0;
	al_cred_who w = who_of(r);
	al_db *db = fcgi_req_db(r, &err);
	json_object *view = db != NULL ? al_credential_get(db, &w, r->id,
							   &hidden, NULL, &err)
				       : NULL;
	if (view == NULL) {
		refused(r, &err, hidden);
		return;
	}
	answer_view(r, 200, view);
}

void fcgi_api_credential_rotate(al_req *r)
{
	al_err err;
	al_cred_spec spec;
	al_keyring kr = {0};
	int hidden = 0;
	json_object *view = NULL;
	if (read_spec(r, 1, &spec, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	al_cred_who w = who_of(r);
	al_db *db = fcgi_req_db(r, &err);
	int rc = -1;
	if (db != NULL && al_keyring_load(&kr, r->cfg->state_dir, 1, &err) == 0)
		rc = al_credential_rotate(db, &kr, &w, r->id, &spec, &hidden,
					  &view, &err);
	al_keyring_wipe(&kr);
	al_cred_spec_free(&spec);
	if (rc < 0) {
		if (err.code == AL_EPERM)
			audit(r, "failed_access", r->who.project, r->id, "deny",
			      err.msg);
		refused(r, &err, hidden);
		return;
	}
	al_info("credential %s rotated (version %d)", view_str(view, "id"),
		json_object_get_int(json_object_object_get(view, "version")));
	audit(r, "rotate", view_str(view, "project"), view_str(view, "name"),
	      "allow", view_str(view, "id"));
	push(r, view_str(view, "project"));
	answer_view(r, 200, view);
}

void fcgi_api_credential_delete(al_req *r)
{
	al_err err;
	int hidden = 0;
	json_object *view = NULL;
	al_cred_who w = who_of(r);
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL ||
	    al_credential_delete(db, &w, r->id, &hidden, &view, &err) < 0) {
		if (db != NULL && err.code == AL_EPERM)
			audit(r, "failed_access", r->who.project, r->id, "deny",
			      err.msg);
		refused(r, &err, hidden);
		return;
	}
	al_info("credential %s deleted", view_str(view, "id"));
	audit(r, "delete", view_str(view, "project"), view_str(view, "name"),
	      "allow", view_str(view, "id"));
	push(r, view_str(view, "project"));
	json_object_put(view);
	fcgi_http_no_content(r);
}
