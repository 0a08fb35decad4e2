/* Snapshots and fork of sandboxes: POST|GET /v1/sandboxes/{id}/snapshots,
 * GET|DELETE /v1/snapshots/{id}, POST /v1/sandboxes/{id}/fork. A member
 * key sees only its project's: another project's sandbox or snapshot is
 * answered exactly like an unknown id. What happens is core's
 * (sandbox/lifecycle_ops.h, sandbox/fork_ops.h). */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "http.h"
#include "model/sandbox.h"
#include "model/snapshot.h"
#include "sandbox/fork_ops.h"
#include "sandbox/lifecycle_ops.h"

/* The body's JSON object ({} when there is none), fields checked. */
static json_object *body_object(al_req *r, const char *const *fields,
				al_err *err)
{
	char *body = NULL;
	size_t len = 0;
	if (fcgi_req_body(r, AL_JSON_BODY_MAX, &body, &len, err) < 0)
		return NULL;
	json_object *o = len > 0 ? al_json_parse_object(body, len, err)
				 : json_object_new_object();
	free(body);
	if (o != NULL && al_json_check_fields(o, fields, err) < 0) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static void answer_snapshot(al_req *r, al_db *db, const char *id, int status)
{
	al_err err = {0};
	al_snapshot s;
	if (al_snapshot_get_in(db, id, fcgi_req_scope(r), &s, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	json_object *o = al_snapshot_to_json(&s);
	fcgi_http_json(r, status, o);
	json_object_put(o);
}

/* POST /v1/sandboxes/{id}/snapshots {"name": "..."} (optional). */
void fcgi_api_snapshot_create(al_req *r)
{
	static const char *const fields[] = {"name", NULL};
	al_err err = {0};
	const char *name = NULL;
	json_object *o = body_object(r, fields, &err);
	if (o == NULL ||
	    al_json_get_str(o, "name", 63, &name, NULL, &err) < 0) {
		json_object_put(o);
		fcgi_http_error(r, &err);
		return;
	}
	if (name != NULL && name[0] == '\0')
		name = NULL;
	char snap[64];
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL ||
	    al_lifecycle_snapshot(r->cfg, db, r->id, fcgi_req_scope(r), "named",
				  name, snap, &err) < 0) {
		json_object_put(o);
		fcgi_http_error(r, &err);
		return;
	}
	json_object_put(o);
	answer_snapshot(r, db, snap, 201);
}

/* GET /v1/sandboxes/{id}/snapshots */
void fcgi_api_snapshot_list(al_req *r)
{
	al_err err = {0};
	al_sandbox sb;
	json_object *arr = NULL;
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL ||
	    al_sandbox_get_in(db, r->id, fcgi_req_scope(r), &sb, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	al_sandbox_free_fields(&sb);
	if (al_snapshot_list_of(db, r->id, fcgi_req_scope(r), &arr, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "snapshots", arr);
	fcgi_http_json(r, 200, o);
	json_object_put(o);
}

/* GET /v1/snapshots/{id} */
void fcgi_api_snapshot_get(al_req *r)
{
	al_err err = {0};
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL) {
		fcgi_http_error(r, &err);
		return;
	}
	answer_snapshot(r, db, r->id, 200);
}

/* DELETE /v1/snapshots/{id} */
void fcgi_api_snapshot_delete(al_req *r)
{
	al_err err = {0};
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL ||
	    al_lifecycle_snapshot_delete(r->cfg, db, r->id, fcgi_req_scope(r),
					 &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	fcgi_http_no_content(r);
}

/* POST /v1/sandboxes/{id}/fork {"count": N, "timeout": S} */
void fcgi_api_sandbox_fork(al_req *r)
{
	static const char *const fields[] = {"count", "timeout", NULL};
	al_err err = {0};
	int64_t count = 1, timeout = 0;
	json_object *o = body_object(r, fields, &err);
	if (o == NULL ||
	    al_json_get_int(o, "count", 1, AL_FORK_MAX, &count, &err) < 0 ||
	    al_json_get_int(o, "timeout", 1, r->cfg->max_timeout_s, &timeout,
			    &err) < 0) {
		json_object_put(o);
		fcgi_http_error(r, &err);
		return;
	}
	json_object_put(o);
	json_object *out = NULL;
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL ||
	    al_fork_ops_fork(r->cfg, db, &r->who, r->id, fcgi_req_scope(r),
			     (int)count, (uint32_t)timeout, &out, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	fcgi_http_json(r, 201, out);
	json_object_put(out);
}
