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

/* Answer the sandbox as an operation left it, with extra members. */
static void answer_after(al_req *r, al_db *db, json_object *extra)
{
	al_err err;
	al_sandbox sb;
	if (al_sandbox_get_in(db, r->id, fcgi_req_scope(r), &sb, &err) < 0) {
		fcgi_http_error(r, &err);
		json_object_put(extra);
		return;
	}
	json_object *o = al_sandbox_to_json(&sb);
	add_mac(o, &sb);
	al_sandbox_free_fields(&sb);
	if (o != NULL && extra != NULL) {
		json_object_object_foreach(extra, k, v)
			json_object_object_add(o, k, json_object_get(v));
	}
	json_object_put(extra);
	fcgi_http_json(r, 200, o);
	json_object_put(o);
}

/* POST /v1/sandboxes/{id}/pause: no body. */
void fcgi_api_sandbox_pause(al_req *r)
{
	al_err err = {0};
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL || al_lifecycle_pause(r->cfg, db, r->id,
					     fcgi_req_scope(r), &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	answer_sandbox(r, db);
}

/* POST /v1/sandboxes/{id}/resume: no body; says whether the memory
 * came back. */
void fcgi_api_sandbox_resume(al_req *r)
{
	al_err err = {0};
	int cold = 0;
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL ||
	    al_lifecycle_resume(r->cfg, db, r->id, fcgi_req_scope(r), &cold,
				&err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	json_object *extra = json_object_new_object();
	json_object_object_add(extra, "resumed_cold",
			       json_object_new_boolean(cold));
	answer_after(r, db, extra);
}

/* POST /v1/sandboxes/{id}/suspend: {"memory": bool} or no body. */
void fcgi_api_sandbox_suspend(al_req *r)
{
	static const char *const fields[] = {"memory", NULL};
	al_err err = {0};
	char *body = NULL;
	size_t len = 0;
	int memory = -1;
	if (fcgi_req_body(r, AL_JSON_BODY_MAX, &body, &len, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	if (len > 0) {
		json_object *o = al_json_parse_object(body, len, &err);
		if (o == NULL || al_json_check_fields(o, fields, &err) < 0 ||
		    al_json_get_bool(o, "memory", &memory, &err) < 0) {
			json_object_put(o);
			free(body);
			fcgi_http_error(r, &err);
			return;
		}
		json_object_put(o);
	}
	free(body);
	char snap[64];
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL ||
	    al_lifecycle_suspend(r->cfg, db, r->id, fcgi_req_scope(r), memory,
				 snap, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	json_object *extra = json_object_new_object();
	json_object_object_add(extra, "snapshot", json_object_new_string(snap));
	answer_after(r, db, extra);
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

/* POST /v1/sandboxes/{id}/timeout {"timeout": S}: its deadline becomes
 * now + S seconds, in any state but deleted. */
void fcgi_api_sandbox_timeout(al_req *r)
{
	static const char *const fields[] = {"timeout", NULL};
	al_err err = {0};
	char *body = NULL;
	size_t len = 0;
	int64_t secs = 0;
	if (fcgi_req_body(r, AL_JSON_BODY_MAX, &body, &len, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	json_object *o = al_json_parse_object(body, len, &err);
	free(body);
	int rc = o == NULL ? -1 : al_json_check_fields(o, fields, &err);
	if (rc == 0)
		rc = al_json_get_int(o, "timeout", 1, r->cfg->max_timeout_s,
				     &secs, &err);
	json_object_put(o);
	if (rc == 0)
		rc = al_err_set(&err, AL_EINVAL, 0,
				"'timeout' (seconds) is required");
	if (rc < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL || al_sandbox_set_timeout(db, r->id, fcgi_req_scope(r),
						 (uint32_t)secs, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	answer_sandbox(r, db);
}
