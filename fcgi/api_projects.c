#include "api_projects.h"
#include "streams.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/log.h"
#include "model/project.h"
#include "pool/poolcap.h"
#include "template/buildlog.h"

/* The request's JSON object body; NULL after answering the error. */
static json_object *read_object(al_req *r, const char *const *fields)
{
	al_err err;
	char *body = NULL;
	size_t len = 0;
	if (fcgi_req_body(r, AL_JSON_BODY_MAX, &body, &len, &err) < 0) {
		fcgi_http_error(r, &err);
		return NULL;
	}
	json_object *o = al_json_parse_object(body, len, &err);
	free(body);
	if (o == NULL || al_json_check_fields(o, fields, &err) < 0) {
		json_object_put(o);
		fcgi_http_error(r, &err);
		return NULL;
	}
	return o;
}

/* Answer {key: arr} (arr NULL: the error in err). */
static void answer_list(al_req *r, const char *key, json_object *arr,
			const al_err *err)
{
	if (arr == NULL) {
		fcgi_http_error(r, err);
		return;
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, key, arr);
	fcgi_http_json(r, 200, o);
	json_object_put(o);
}

void fcgi_api_projects(al_req *r)
{
	al_err err;
	al_db *db = fcgi_req_db(r, &err);
	json_object *arr = db != NULL ? al_project_list(db, r->cfg, &err)
				      : NULL;
	answer_list(r, "projects", arr, &err);
}

/* What the project's sandboxes have written on the pool now and the
 * most they may write together (core/pool/poolcap.h), beside its quotas:
 * {"written_mb","cap_mb"}, cap 0 until its first sandbox started. */
static void add_pool_use(al_req *r, json_object *o)
{
	json_object *g = NULL;
	uint64_t used, cap;
	al_err err = {0};
	if (!json_object_object_get_ex(o, "pool_group", &g) ||
	    al_poolcap_project_usage(r->cfg, json_object_get_int64(g), &used,
				     &cap, &err) < 0) {
		al_warn("project pool use: %s", err.msg);
		return;
	}
	json_object *d = json_object_new_object();
	json_object_object_add(d, "written_mb",
			       json_object_new_int64((int64_t)(used >> 20)));
	json_object_object_add(d, "cap_mb",
			       json_object_new_int64((int64_t)(cap >> 20)));
	json_object_object_add(o, "disk", d);
}

void fcgi_api_project_get(al_req *r)
{
	al_err err;
	al_db *db = fcgi_req_db(r, &err);
	json_object *o = db != NULL ? al_project_get(db, r->cfg, r->id, &err)
				    : NULL;
	if (o == NULL) {
		fcgi_http_error(r, &err);
		return;
	}
	add_pool_use(r, o);
	fcgi_http_json(r, 200, o);
	json_object_put(o);
}

void fcgi_api_project_create(al_req *r)
{
	static const char *const fields[] = {"name", NULL};
	al_err err;
	const char *name = NULL;
	json_object *o = read_object(r, fields);
	if (o == NULL)
		return;
	al_db *db = fcgi_req_db(r, &err);
	json_object *p = NULL;
	if (al_json_get_str(o, "name", 63, &name, NULL, &err) < 0 ||
	    db == NULL || al_project_create(db, name, &err) < 0 ||
	    (p = al_project_get(db, r->cfg, name, &err)) == NULL) {
		json_object_put(o);
		fcgi_http_error(r, &err);
		return;
	}
	al_info("project %s created", name);
	json_object_put(o);
	fcgi_http_json(r, 201, p);
	json_object_put(p);
}

void fcgi_api_project_quota(al_req *r)
{
	al_err err;
	char *body = NULL;
	size_t len = 0;
	al_quota_update u;
	if (fcgi_req_body(r, AL_JSON_BODY_MAX, &body, &len, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	int rc = al_quota_update_parse(body, len, &u, &err);
	free(body);
	al_db *db = rc == 0 ? fcgi_req_db(r, &err) : NULL;
	json_object *p = NULL;
	if (db == NULL || al_project_set_quota(db, r->id, &u, &err) < 0 ||
	    (p = al_project_get(db, r->cfg, r->id, &err)) == NULL) {
		fcgi_http_error(r, &err);
		return;
	}
	al_info("project %s: quota changed", r->id);
	fcgi_http_json(r, 200, p);
	json_object_put(p);
}

void fcgi_api_keys(al_req *r)
{
	al_err err;
	al_db *db = fcgi_req_db(r, &err);
	const char *project = fcgi_req_list_project(r);
	json_object *arr = db != NULL ? al_project_key_list(db, project, &err)
				      : NULL;
	answer_list(r, "keys", arr, &err);
}

void fcgi_api_key_create(al_req *r)
{
	static const char *const fields[] = {"project", "role", "name", NULL};
	al_err err;
	const char *project = NULL, *role_name = "member", *name = NULL;
	char key[AL_AUTH_KEY_LEN + 1];
	long long id = 0;
	json_object *o = read_object(r, fields);
	if (o == NULL)
		return;
	int role = -1;
	al_db *db = NULL;
	int rc = al_json_get_str(o, "project", 63, &project, NULL, &err);
	if (rc == 0)
		rc = al_err_set(&err, AL_EINVAL, 0, "'project' is required");
	if (rc > 0)
		rc = al_json_get_str(o, "role", 15, &role_name, NULL, &err);
	if (rc >= 0 && (role = al_role_from_name(role_name)) < 0)
		rc = al_err_set(&err, AL_EINVAL, 0,
				"'role' must be \"admin\" or \"member\"");
	if (rc >= 0)
		rc = al_json_get_str(o, "name", AL_KEY_NAME_MAX, &name, NULL,
				     &err);
	if (rc == 0)
		rc = al_err_set(&err, AL_EINVAL, 0, "'name' is required");
	if (rc > 0 && (db = fcgi_req_db(r, &err)) == NULL)
		rc = -1;
	if (rc > 0)
		rc = al_project_key_create(db, project, (al_role)role, name,
					   &id, key, &err);
	if (rc < 0) {
		json_object_put(o);
		fcgi_http_error(r, &err);
		return;
	}
	json_object *k = json_object_new_object();
	json_object_object_add(k, "id", json_object_new_int64(id));
	json_object_object_add(k, "key", json_object_new_string(key));
	json_object_object_add(k, "project", json_object_new_string(project));
	json_object_object_add(
		k, "role", json_object_new_string(al_role_name((al_role)role)));
	json_object_object_add(k, "name", json_object_new_string(name));
	explicit_bzero(key, sizeof key);
	al_info("key %lld created (project %s, role %s)", id, project,
		al_role_name((al_role)role));
	json_object_put(o);
	fcgi_http_json(r, 201, k);
	json_object_put(k);
}

void fcgi_api_key_delete(al_req *r)
{
	al_err err;
	char *end = NULL;
	errno = 0;
	long long id = strtoll(r->id, &end, 10);
	if (errno != 0 || end == r->id || *end != '\0' || id <= 0) {
		fcgi_http_errorf(r, AL_ENOENT, "no such key");
		return;
	}
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL || al_project_key_revoke(db, id, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	al_info("key %lld revoked", id);
	/* Its streams are carried by nginx from the shims and the build
	 * log streamers, where no key check runs: they are told. */
	fcgi_streams_end_key(r, id);
	if (al_buildlog_key_revoke(r->cfg, id, &err) < 0)
		al_warn("key %lld: ending its build log streams: %s", id,
			err.msg);
	fcgi_http_no_content(r);
}
