/* Health and the sandbox resource (create, list, get, delete). A member
 * key sees only its project's sandboxes: another project's is answered
 * exactly like an unknown id. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "http.h"
#include "model/sandbox.h"
#include "model/sandbox_state.h"
#include "sandbox/lifecycle_ops.h"
#include "sandbox/sandbox_ops.h"
#include "vm/net.h"

/* A vm sandbox's NIC address: derived from its id (core/vm/net.h), the
 * same one its guest was given. */
static void add_mac(json_object *o, const al_sandbox *sb)
{
	uint8_t mac[6];
	char s[AL_VM_MAC_STRLEN];
	al_err err;
	if (o == NULL || strcmp(sb->driver, "vm") != 0 ||
	    al_vm_mac_for_id(sb->id, mac, &err) < 0)
		return;
	al_vm_mac_format(mac, s);
	json_object_object_add(o, "mac", json_object_new_string(s));
}

void fcgi_api_health(al_req *r)
{
	static const char body[] = "{\"status\":\"ok\"}\n";
	fcgi_http_head(r, 200, "application/json", "Content-Length: 16\r\n");
	fcgi_http_write(r, body, sizeof body - 1);
}

void fcgi_api_sandbox_create(al_req *r)
{
	al_err err;
	char *body = NULL;
	size_t len = 0;
	al_create_req req;

	if (fcgi_req_body(r, AL_JSON_BODY_MAX, &body, &len, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	int rc = al_create_req_parse(body, len, r->cfg->default_timeout_s,
				     r->cfg->max_timeout_s, &req, &err);
	free(body);
	if (rc < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	/* PostgreSQL unreachable (AL_EUNAVAIL): fcgi_http_error tells the
	 * client when to come back. */
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL) {
		al_create_req_free(&req);
		fcgi_http_error(r, &err);
		return;
	}
	al_sandbox sb;
	int retry_after;
	rc = al_sandbox_ops_create(r->cfg, db, &r->who, &req, &sb, &retry_after,
				   &err);
	al_create_req_free(&req);
	if (rc < 0) {
		fcgi_http_error_retry(r, &err, retry_after);
		return;
	}
	json_object *o = al_sandbox_to_json(&sb);
	add_mac(o, &sb);
	al_sandbox_free_fields(&sb);
	fcgi_http_json(r, 201, o);
	json_object_put(o);
}

void fcgi_api_sandbox_list(al_req *r)
{
	al_err err;
	int state = -1;
	json_object *filter = json_object_new_object();

	for (int i = 0; i < r->query.n; i++) {
		const char *k = r->query.q[i].key, *v = r->query.q[i].val;
		if (strcmp(k, "state") == 0) {
			state = al_state_from_name(v);
			if (state < 0) {
				fcgi_http_errorf(r, AL_EINVAL,
						 "unknown state in 'state'");
				goto out;
			}
		} else if (strcmp(k, "project") == 0) {
			continue; /* fcgi_req_list_project */
		} else if (strncmp(k, "metadata.", 9) == 0 && k[9] != '\0' &&
			   strlen(k + 9) <= al_json_metadata_limits.max_key &&
			   strlen(v) <= al_json_metadata_limits.max_value) {
			json_object_object_add(filter, k + 9,
					       json_object_new_string(v));
		} else {
			fcgi_http_errorf(r, AL_EINVAL,
					 "unknown or oversized query parameter "
					 "(use state=, project=, "
					 "metadata.<key>=)");
			goto out;
		}
	}
	al_db *db = fcgi_req_db(r, &err);
	json_object *arr = NULL;
	if (db == NULL || al_sandbox_list(db, fcgi_req_list_project(r), state,
					  filter, &arr, &err) < 0) {
		fcgi_http_error(r, &err);
		goto out;
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "sandboxes", arr);
	fcgi_http_json(r, 200, o);
	json_object_put(o);
out:
	json_object_put(filter);
}

/* Answer the sandbox r->id as it is now. Another project's is not
 * found by the very query that misses an unknown id. */
static void answer_sandbox(al_req *r, al_db *db)
{
	al_err err;
	al_sandbox sb;
	if (al_sandbox_get_in(db, r->id, fcgi_req_scope(r), &sb, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	json_object *o = al_sandbox_to_json(&sb);
	add_mac(o, &sb);
	al_sandbox_free_fields(&sb);
	fcgi_http_json(r, 200, o);
	json_object_put(o);
}

void fcgi_api_sandbox_get(al_req *r)
{
	al_err err;
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL) {
		fcgi_http_error(r, &err);
		return;
	}
	answer_sandbox(r, db);
}

/* POST /v1/sandboxes/{id}/pause and /resume: no body; the answer is the
 * sandbox as the operation left it. */
static void lifecycle_call(al_req *r,
			   int (*op)(const al_config *, al_db *, const char *,
				     const char *, al_err *))
{
	al_err err = {0};
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL || op(r->cfg, db, r->id, fcgi_req_scope(r), &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	answer_sandbox(r, db);
}

void fcgi_api_sandbox_pause(al_req *r)
{
	lifecycle_call(r, al_lifecycle_pause);
}

void fcgi_api_sandbox_resume(al_req *r)
{
	lifecycle_call(r, al_lifecycle_resume);
}

void fcgi_api_sandbox_delete(al_req *r)
{
	al_err err;
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL || al_sandbox_ops_delete(r->cfg, db, r->id,
						fcgi_req_scope(r), &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	fcgi_http_no_content(r);
}
