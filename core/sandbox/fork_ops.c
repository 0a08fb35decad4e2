/* Fork (fork_ops.h). */
#include "sandbox/fork_ops.h"

#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "base/log.h"
#include "model/sandbox.h"
#include "model/snapshot.h"
#include "sandbox/lifecycle_ops.h"
#include "sandbox/sandbox_ops.h"
#include "sandbox/sandbox_req.h"

/* The create body of a child of parent from snapshot snap: the parent's
 * env, metadata, network, project and limits. Parsed as any create is,
 * so a child is held to the same checks. */
static json_object *child_body(const al_sandbox *parent, const char *snap,
			       uint32_t timeout_s)
{
	json_object *o = json_object_new_object();
	if (o == NULL)
		return NULL;
	json_object_object_add(o, "snapshot", json_object_new_string(snap));
	json_object_object_add(o, "project",
			       json_object_new_string(parent->project));
	if (parent->env != NULL)
		json_object_object_add(o, "env", json_object_get(parent->env));
	if (parent->metadata != NULL)
		json_object_object_add(o, "metadata",
				       json_object_get(parent->metadata));
	if (parent->network != NULL)
		json_object_object_add(o, "network",
				       json_object_get(parent->network));
	if (strcmp(parent->driver, "vm") != 0)
		json_object_object_add(
			o, "memory_mb",
			json_object_new_int64(
				(int64_t)(parent->limits.memory_bytes >> 20)));
	json_object_object_add(o, "pids",
			       json_object_new_int64(parent->limits.pids_max));
	json_object_object_add(
		o, "cpu_shares",
		json_object_new_int64(parent->limits.cpu_shares));
	json_object_object_add(
		o, "disk_mb",
		json_object_new_int64((int64_t)(parent->limits.disk_bytes >>
						20)));
	json_object_object_add(o, "cpus",
			       al_json_new_millis(parent->limits.cpu_millis));
	if (timeout_s > 0)
		json_object_object_add(o, "timeout",
				       json_object_new_int64(timeout_s));
	return o;
}

static json_object *error_entry(const al_err *e)
{
	json_object *o = json_object_new_object(),
		    *in = json_object_new_object();
	json_object_object_add(in, "code",
			       json_object_new_string(al_code_name(e->code)));
	json_object_object_add(in, "message", json_object_new_string(e->msg));
	json_object_object_add(o, "error", in);
	return o;
}

/* One child: its row as JSON, or an error entry (and *first the first
 * such error). */
static json_object *make_child(const al_config *cfg, al_db *db,
			       const al_identity *caller, json_object *body,
			       int *made, al_err *first)
{
	al_err err = {0};
	al_create_req req;
	al_sandbox out;
	int retry = 0;
	const char *txt =
		json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN);
	if (al_create_req_parse(txt, strlen(txt), cfg->default_timeout_s,
				cfg->max_timeout_s, &req, &err) == 0 &&
	    al_sandbox_ops_create(cfg, db, caller, &req, &out, &retry, &err) ==
		    0) {
		al_create_req_free(&req);
		(*made)++;
		json_object *o = al_sandbox_to_json(&out);
		al_sandbox_free_fields(&out);
		return o;
	}
	al_create_req_free(&req);
	if (first->code == AL_OK)
		*first = err;
	return error_entry(&err);
}

int al_fork_ops_fork(const al_config *cfg, al_db *db, const al_identity *caller,
		     const char *id, const char *project, int count,
		     uint32_t timeout_s, json_object **out, al_err *err)
{
	if (count < 1 || count > AL_FORK_MAX)
		return al_err_set(err, AL_EINVAL, 0, "'count' must be 1 to %d",
				  AL_FORK_MAX);
	al_sandbox parent;
	if (al_sandbox_get_in(db, id, project, &parent, err) < 0)
		return -1;
	char snap[64];
	int rc = -1;
	if (parent.state == AL_ST_SUSPENDED)
		snprintf(snap, sizeof snap, "%s", parent.resume_snapshot);
	else if (al_lifecycle_snapshot(cfg, db, id, project, "fork", NULL, snap,
				       err) < 0)
		goto out;
	json_object *body = child_body(&parent, snap, timeout_s);
	json_object *arr = json_object_new_array();
	if (body == NULL || arr == NULL) {
		json_object_put(body);
		json_object_put(arr);
		al_err_set(err, AL_ENOMEM, 0, "out of memory");
		goto out;
	}
	int made = 0;
	al_err first = {0};
	for (int i = 0; i < count; i++)
		json_object_array_add(arr, make_child(cfg, db, caller, body,
						      &made, &first));
	json_object_put(body);
	/* The children's roots are snapshots of its own and a vm child's
	 * QEMU holds its memory: a fork's snapshot is needed no more. */
	al_err e2 = {0};
	if (parent.state != AL_ST_SUSPENDED &&
	    al_lifecycle_snapshot_delete(cfg, db, snap, NULL, &e2) < 0)
		al_warn("sandbox %s: removing fork snapshot %s: %s", id, snap,
			e2.msg);
	if (made == 0) {
		json_object_put(arr);
		*err = first;
		goto out;
	}
	al_info("sandbox %s: forked into %d of %d from snapshot %s", id, made,
		count, snap);
	*out = json_object_new_object();
	json_object_object_add(*out, "parent", json_object_new_string(id));
	json_object_object_add(*out, "snapshot", json_object_new_string(snap));
	json_object_object_add(*out, "sandboxes", arr);
	rc = 0;
out:
	al_sandbox_free_fields(&parent);
	return rc;
}
