/* Health and the sandbox resource (create, list, get, delete). A member
 * key sees only its project's sandboxes: another project's is answered
 * exactly like an unknown id. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentproto.h"
#include "auth.h"
#include "capacity.h"
#include "config.h"
#include "credential.h"
#include "http.h"
#include "json.h"
#include "log.h"
#include "poolcap.h"
#include "project.h"
#include "sandbox.h"
#include "shimctl.h"
#include "store.h"
#include "template.h"
#include "vm/net.h"
#include "vm/shape.h"
#include "vm/snapshot.h"

#define SPAWN_DEADLINE_MS 30000

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

void al_api_health(al_req *r)
{
	static const char body[] = "{\"status\":\"ok\"}\n";
	al_http_head(r, 200, "application/json", "Content-Length: 16\r\n");
	al_http_write(r, body, sizeof body - 1);
}

/* Template row for a create, if who may use it (else the AL_ENOENT of
 * an unknown one): driver, current version and default limits. A
 * template's disk default above the operator's maximum (lowered since
 * the template was made) is capped at it. */
static int load_template(al_db *db, const al_config *cfg, const char *name,
			 const al_identity *who, al_sandbox *sb, al_err *err)
{
	if (!al_id_valid(name))
		return al_err_set(err, AL_ENOENT, 0, "no such template");
	al_template_row row;
	if (al_template_row_get(db, name, &row, err) < 0)
		return -1;
	if (al_template_may(&row.owner, who, 0) != 1)
		return al_err_set(err, AL_ENOENT, 0, "no template '%s'", name);
	snprintf(sb->template_name, sizeof sb->template_name, "%s", name);
	snprintf(sb->driver, sizeof sb->driver, "%s", row.driver);
	sb->template_version = row.version;
	sb->limits.memory_bytes = (uint64_t)row.memory_mb << 20;
	sb->limits.pids_max = (uint32_t)row.pids;
	sb->limits.cpu_shares = (uint32_t)row.cpu_shares;
	uint64_t disk_mb = (uint64_t)row.disk_mb;
	if (disk_mb == 0 || disk_mb > cfg->max_disk_mb)
		disk_mb = cfg->max_disk_mb;
	sb->limits.disk_bytes = disk_mb << 20;
	return 0;
}

/* The request's driver, else the host's default; the checks that need
 * the host (is vm usable here, has the template its VM snapshot) after
 * the ones that need only the request. */
static int pick_driver(al_req *r, const al_create_req *req, al_sandbox *sb,
		       al_err *err)
{
	al_driver_status st;
	al_api_driver_status(r->cfg, &st);
	const char *driver = req->driver != NULL ? req->driver
						 : st.default_driver;
	snprintf(sb->driver, sizeof sb->driver, "%s", driver);
	if (al_config_driver_check(r->cfg, driver, err) < 0)
		return -1;
	if (strcmp(driver, "vm") != 0)
		return 0;
	if (al_vm_shape_limits(req->memory_mb, &sb->limits, err) < 0)
		return -1;
	if (!st.vm_usable)
		return al_err_set(err, AL_EUNAVAIL, 0,
				  "vm driver unavailable: %s", st.vm_why);
	char root[AL_PATH_MAX], why[200];
	if (al_config_template_root(r->cfg, sb->template_name, root,
				    sizeof root, err) < 0)
		return -1;
	if (!al_vm_template_ready(root, why, sizeof why))
		return al_err_set(err, AL_EUNAVAIL, 0,
				  "vm driver unavailable for template '%s': "
				  "%s (airlock-controller --init builds it)",
				  sb->template_name, why);
	return 0;
}

/* Whose the new sandbox is: the key's project, or for an admin key the
 * request's "project", whose templates it may then use (as that
 * project's member would). */
static int owner_of(al_req *r, const al_create_req *req, al_identity *owner,
		    al_err *err)
{
	*owner = r->who;
	if (req->project == NULL || strcmp(req->project, r->who.project) == 0)
		return 0;
	if (r->who.role != AL_ROLE_ADMIN)
		return al_err_set(err, AL_EPERM, 0,
				  "only admin keys create sandboxes in "
				  "another project");
	snprintf(owner->project, sizeof owner->project, "%s", req->project);
	owner->role = AL_ROLE_MEMBER;
	return 0;
}

/* The placeholders of the credentials that apply to the new sandbox
 * into its env (AIRLOCK_CRED_<NAME>=airlock-cred:<name>): the shim
 * gets them in its spec, cold start or claimed standby alike. */
static int add_credential_env(al_db *db, al_sandbox *sb, al_create_req *req,
			      al_err *err)
{
	if (req->env == NULL) {
		req->env = json_object_new_object();
		json_object_object_add(req->root, "env", req->env);
		sb->env = req->env;
	}
	al_sandbox_ref ref = {.metadata = json_object_get(req->metadata)};
	snprintf(ref.id, sizeof ref.id, "%s", sb->id);
	snprintf(ref.project, sizeof ref.project, "%s", sb->project);
	snprintf(ref.template_name, sizeof ref.template_name, "%s",
		 sb->template_name);
	int rc = al_credential_env_add(db, &ref, req->env, err);
	al_sandbox_ref_free(&ref);
	return rc;
}

/* A new connection's server process starts with empty caches, so the
 * first create on each of fcgi's connections had PostgreSQL read its
 * catalogs and plan every statement from cold (some 8 ms of its CPU): a
 * burst right after a start paid that once per connection, 64 times.
 * Here each runs once as the thread connects, finding and keeping
 * nothing: an unknown key, the quota read in a transaction rolled back,
 * the running mark of an id no row has. Only the insert is left cold. */
void al_api_sandbox_warm(al_db *db, const al_config *cfg)
{
	al_err err;
	al_identity who;
	(void)al_auth_identify(db, "airlock-warm-not-a-key", &who, &err);
	al_template_row row;
	(void)al_template_row_get(db, "minimal", &row, &err);
	al_template_version tv;
	if (al_template_get_version(db, "minimal", 0, &tv, &err) == 0)
		al_template_version_free(&tv);
	al_sandbox_ref ref = {0};
	json_object *env = json_object_new_object();
	if (env != NULL && al_sandbox_new_id(ref.id, &err) == 0) {
		snprintf(ref.project, sizeof ref.project, "default");
		snprintf(ref.template_name, sizeof ref.template_name,
			 "minimal");
		(void)al_credential_env_add(db, &ref, env, &err);
	}
	json_object_put(env);
	int retry_after = 0;
	al_project_pool pool;
	if (al_project_begin_sandbox(db, cfg, "default", 0, 0, &pool, 0,
				     &retry_after, &err) == 0)
		al_db_rollback(db);
	al_sandbox got;
	char id[21];
	if (al_sandbox_new_id(id, &err) == 0 &&
	    al_sandbox_mark_running(db, id, 1, "", &got, &err) == 0)
		al_sandbox_free_fields(&got); /* an id no row has: never */
}

void al_api_sandbox_create(al_req *r)
{
	al_err err;
	char *body = NULL;
	size_t len = 0;
	al_create_req req;
	al_sandbox sb;
	al_identity owner;
	int retry_after = 0;

	memset(&sb, 0, sizeof sb);
	if (al_req_body(r, AL_JSON_BODY_MAX, &body, &len, &err) < 0) {
		al_http_error(r, &err);
		return;
	}
	int rc = al_json_create_req_parse(body, len, r->cfg->default_timeout_s,
					  r->cfg->max_timeout_s, &req, &err);
	free(body);
	if (rc < 0) {
		al_http_error(r, &err);
		return;
	}
	if (al_config_check_maxima(r->cfg, req.memory_mb, req.pids,
				   req.cpu_shares, req.disk_mb, &err) < 0 ||
	    al_config_check_cpus(r->cfg, req.cpu_millis, &err) < 0 ||
	    owner_of(r, &req, &owner, &err) < 0)
		goto fail;
	/* Before anything is written: a full pool takes no new sandbox,
	 * and the ones running keep what is left. */
	if (al_store_room(r->cfg->pool_dir, r->cfg->pool_full_pct, &err) < 0)
		goto fail;
	al_db *db = al_req_db(r, &err);
	if (db == NULL)
		goto fail;
	if (load_template(db, r->cfg, req.template_name, &owner, &sb, &err) < 0)
		goto fail;
	sb.limits.cpu_millis = req.cpu_millis != 0 ? req.cpu_millis
						   : r->cfg->default_cpu_millis;
	/* Not a lack of room: asking again does not help. */
	if (pick_driver(r, &req, &sb, &err) < 0) {
		retry_after = -1;
		goto fail;
	}
	if (req.memory_mb != 0 && strcmp(sb.driver, "vm") != 0)
		sb.limits.memory_bytes = req.memory_mb << 20;
	if (req.pids != 0)
		sb.limits.pids_max = req.pids;
	if (req.cpu_shares != 0)
		sb.limits.cpu_shares = req.cpu_shares;
	if (req.disk_mb != 0)
		sb.limits.disk_bytes = (uint64_t)req.disk_mb << 20;
	if (al_sandbox_new_id(sb.id, &err) < 0)
		goto fail;
	/* Borrowed from the request; never freed through sb. */
	sb.env = req.env;
	sb.metadata = req.metadata;
	sb.network = req.network;
	sb.state = AL_ST_CREATING;
	snprintf(sb.project, sizeof sb.project, "%s", owner.project);
	sb.created_by_key = r->who.key_id;
	if (add_credential_env(db, &sb, &req, &err) < 0)
		goto fail;
	al_project_pool pool;
	if (al_project_begin_sandbox(db, r->cfg, sb.project,
				     sb.limits.memory_bytes >> 20,
				     sb.limits.disk_bytes >> 20, &pool,
				     sb.limits.cpu_millis, &retry_after,
				     &err) < 0) {
		if (err.code == AL_ENOENT)
			err.code = AL_EINVAL; /* the request's "project" */
		goto fail;
	}
	/* What the pool can give the project: a disk it could never
	 * write is refused, not promised (core/poolcap.h). */
	if (al_poolcap_admit(r->cfg, pool.group, pool.disk_quota_mb,
			     req.disk_mb != 0, &sb.limits.disk_bytes,
			     &sb.limits.pool_group_bytes, &err) < 0) {
		al_db_rollback(db);
		if (err.code == AL_EQUOTA)
			retry_after = AL_QUOTA_RETRY_S;
		goto fail;
	}
	sb.limits.pool_group = pool.group;
	if (al_sandbox_insert(db, &sb, (int)req.timeout_s, &err) < 0 ||
	    al_db_commit(db, &err) < 0) {
		al_db_rollback(db);
		goto fail;
	}

	/* The shim is told everything it runs (it has no database): sb
	 * still borrows the request's env here. */
	al_shim_ready ready;
	al_sandbox got;
	if (al_shimctl_start(r->cfg, db, &sb, al_now_ms() + SPAWN_DEADLINE_MS,
			     &ready, &err) < 0) {
		al_sandbox_start_failed(db, sb.id, &err, &retry_after);
		goto fail;
	}
	/* pid, accelerator and running in one statement, which answers the
	 * row too. Not recorded (PostgreSQL went away, or the sandbox
	 * ended already): nothing is left half-made, the shim goes (and
	 * spools its delete for the controller). */
	if (al_sandbox_mark_running(db, sb.id, ready.pid, ready.accel, &got,
				    &err) < 0) {
		al_err tmp;
		if (al_shimctl_destroy(r->cfg, sb.id, &tmp) < 0 &&
		    tmp.code != AL_EUNAVAIL)
			al_warn("sandbox %s: %s", sb.id, tmp.msg);
		al_sandbox_start_failed(db, sb.id, &err, &retry_after);
		goto fail;
	}
	json_object *o = al_sandbox_to_json(&got);
	add_mac(o, &got);
	al_sandbox_free_fields(&got);
	al_info("sandbox %s created (template %s, driver %s)", sb.id,
		sb.template_name, sb.driver);
	al_http_json(r, 201, o);
	json_object_put(o);
	al_json_create_req_free(&req);
	return;
fail:
	al_json_create_req_free(&req);
	/* Out of database connections or the like: a burst's clients are
	 * told when to come back. */
	if (retry_after == 0 && al_capacity_exhausted(&err))
		retry_after = AL_CAPACITY_RETRY_S;
	al_http_error_retry(r, &err, retry_after);
}

void al_api_sandbox_list(al_req *r)
{
	al_err err;
	int state = -1;
	json_object *filter = json_object_new_object();

	for (int i = 0; i < r->query.n; i++) {
		const char *k = r->query.q[i].key, *v = r->query.q[i].val;
		if (strcmp(k, "state") == 0) {
			state = al_state_from_name(v);
			if (state < 0) {
				al_http_errorf(r, AL_EINVAL,
					       "unknown state in 'state'");
				goto out;
			}
		} else if (strcmp(k, "project") == 0) {
			continue; /* al_req_list_project */
		} else if (strncmp(k, "metadata.", 9) == 0 && k[9] != '\0' &&
			   strlen(k + 9) <= al_json_metadata_limits.max_key &&
			   strlen(v) <= al_json_metadata_limits.max_value) {
			json_object_object_add(filter, k + 9,
					       json_object_new_string(v));
		} else {
			al_http_errorf(r, AL_EINVAL,
				       "unknown or oversized query parameter "
				       "(use state=, project=, "
				       "metadata.<key>=)");
			goto out;
		}
	}
	al_db *db = al_req_db(r, &err);
	json_object *arr = NULL;
	if (db == NULL || al_sandbox_list(db, al_req_list_project(r), state,
					  filter, &arr, &err) < 0) {
		al_http_error(r, &err);
		goto out;
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "sandboxes", arr);
	al_http_json(r, 200, o);
	json_object_put(o);
out:
	json_object_put(filter);
}

/* The sandbox of r->id if r's key may see it: another project's is
 * not found by the very query that misses an unknown id. */
static int load_owned(al_req *r, al_sandbox *sb, al_err *err)
{
	al_db *db = al_req_db(r, err);
	if (db == NULL)
		return -1;
	return al_sandbox_get_in(db, r->id, al_req_scope(r), sb, err);
}

void al_api_sandbox_get(al_req *r)
{
	al_err err;
	al_sandbox sb;
	if (load_owned(r, &sb, &err) < 0) {
		al_http_error(r, &err);
		return;
	}
	json_object *o = al_sandbox_to_json(&sb);
	add_mac(o, &sb);
	al_sandbox_free_fields(&sb);
	al_http_json(r, 200, o);
	json_object_put(o);
}

void al_api_sandbox_delete(al_req *r)
{
	al_err err, tmp;
	al_sandbox sb;
	if (load_owned(r, &sb, &err) < 0) {
		al_http_error(r, &err);
		return;
	}
	al_db *db = al_req_db(r, &err);
	al_sandbox_free_fields(&sb);
	if (al_shimctl_destroy(r->cfg, r->id, &err) < 0) {
		if (err.code != AL_EUNAVAIL) {
			al_http_error(r, &err);
			return;
		}
		/* No shim to ask: record the deletion ourselves; the
		 * controller cleans up whatever it left behind. */
		al_info("sandbox %s: shim unreachable, marking deleted", r->id);
	}
	/* Recorded here at once; the shim's spooled delete lands later as
	 * a no-op (or landed first: then this one is rejected by the state
	 * table, which is fine). */
	if (al_sandbox_transition(db, r->id, AL_EV_DELETE, "api delete", &tmp) <
		    0 &&
	    tmp.code != AL_ESTATE && tmp.code != AL_ENOENT) {
		al_http_error(r, &tmp);
		return;
	}
	al_info("sandbox %s deleted", r->id);
	al_http_no_content(r);
}

int al_api_running_sandbox(al_req *r, json_object **env_out)
{
	al_err err;
	al_sandbox sb;
	if (load_owned(r, &sb, &err) < 0) {
		al_http_error(r, &err);
		return -1;
	}
	if (sb.state != AL_ST_RUNNING) {
		al_http_errorf(r, AL_ESTATE, "sandbox %s is %s, not running",
			       sb.id, al_state_name(sb.state));
		al_sandbox_free_fields(&sb);
		return -1;
	}
	if (env_out != NULL)
		*env_out = json_object_get(sb.env);
	al_sandbox_free_fields(&sb);
	return 0;
}
