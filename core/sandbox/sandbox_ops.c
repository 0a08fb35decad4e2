/* The sandbox operations (see sandbox_ops.h). */
#include "sandbox/sandbox_ops.h"

#include <stdio.h>
#include <string.h>

#include "base/capacity.h"
#include "base/cleanup.h"
#include "base/log.h"
#include "driver.h"
#include "model/credential.h"
#include "model/project.h"
#include "model/sandbox.h"
#include "model/sandbox_state.h"
#include "model/snapshot.h"
#include "model/template.h"
#include "pool/poolcap.h"
#include "pool/store.h"
#include "sandbox/lifecycle_ops.h"
#include "sandbox/shimctl.h"
#include "sandbox/shimspec.h"
#include "sandbox/standby.h"
#include "vm/shape.h"
#include "vm/snapshot.h"

#define SPAWN_DEADLINE_MS 30000

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
static int pick_driver(const al_config *cfg, const al_create_req *req,
		       al_sandbox *sb, al_err *err)
{
	al_driver_status st;
	al_driver_status_read(cfg, &st);
	const char *driver = req->driver != NULL ? req->driver
						 : st.default_driver;
	snprintf(sb->driver, sizeof sb->driver, "%s", driver);
	if (al_config_driver_check(cfg, driver, err) < 0)
		return -1;
	if (strcmp(driver, "vm") != 0)
		return 0;
	if (al_vm_shape_limits(req->memory_mb, &sb->limits, err) < 0)
		return -1;
	if (!st.vm_usable)
		return al_err_set(err, AL_EUNAVAIL, 0,
				  "vm driver unavailable: %s", st.vm_why);
	char root[AL_PATH_MAX], why[200];
	if (al_config_template_root(cfg, sb->template_name, root, sizeof root,
				    err) < 0)
		return -1;
	if (!al_vm_template_ready(root, why, sizeof why))
		return al_err_set(err, AL_EUNAVAIL, 0,
				  "vm driver unavailable for template '%s': "
				  "%s (airlock-controller --init builds it)",
				  sb->template_name, why);
	return 0;
}

/* Whose the new sandbox is: the caller's project, or for an admin key
 * the request's "project", whose templates it may then use (as that
 * project's member would). */
static int owner_of(const al_identity *caller, const al_create_req *req,
		    al_identity *owner, al_err *err)
{
	*owner = *caller;
	if (req->project == NULL || strcmp(req->project, caller->project) == 0)
		return 0;
	if (caller->role != AL_ROLE_ADMIN)
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

/* A create from a snapshot of project: its template and driver are
 * the snapshot's (req's point at them), *version its template version. */
static int from_snapshot(al_db *db, al_create_req *req, const char *project,
			 int *version, al_err *err)
{
	al_snapshot snap;
	if (al_snapshot_get_in(db, req->snapshot, project, &snap, err) < 0)
		return -1;
	if (strcmp(snap.status, "ready") != 0)
		return al_err_set(err, AL_ESTATE, 0,
				  "snapshot %s is %s, not ready", snap.id,
				  snap.status);
	if (req->driver != NULL && strcmp(req->driver, snap.driver) != 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "snapshot %s is of a %s sandbox: it starts "
				  "only under driver %s",
				  snap.id, snap.driver, snap.driver);
	snprintf(req->snapshot_template, sizeof req->snapshot_template, "%s",
		 snap.template_name);
	snprintf(req->snapshot_driver, sizeof req->snapshot_driver, "%s",
		 snap.driver);
	req->template_name = req->snapshot_template;
	req->driver = req->snapshot_driver;
	*version = snap.template_version;
	return 0;
}

/* The new sandbox's row as req and the template ask, within what the
 * operator, the host and the request allow; nothing is written.
 * *retry_after_s -1: asking again does not help (no Retry-After, even
 * for an unavailable driver). */
static int plan(const al_config *cfg, al_db *db, const al_identity *caller,
		al_create_req *req, al_sandbox *sb, int *retry_after_s,
		al_err *err)
{
	al_identity owner;
	if (al_config_check_maxima(cfg, req->memory_mb, req->pids,
				   req->cpu_shares, req->disk_mb, err) < 0 ||
	    al_config_check_cpus(cfg, req->cpu_millis, err) < 0 ||
	    owner_of(caller, req, &owner, err) < 0)
		return -1;
	int version = 0;
	if (req->snapshot != NULL &&
	    from_snapshot(db, req, owner.project, &version, err) < 0)
		return -1;
	/* Before anything is written: a full pool takes no new sandbox,
	 * and the ones running keep what is left. */
	if (al_store_room(cfg->pool_dir, cfg->pool_full_pct, err) < 0 ||
	    load_template(db, cfg, req->template_name, &owner, sb, err) < 0)
		return -1;
	if (req->snapshot != NULL) {
		/* Its files are of the version it was taken from. */
		sb->template_version = version;
		snprintf(sb->resume_snapshot, sizeof sb->resume_snapshot, "%s",
			 req->snapshot);
	}
	sb->limits.cpu_millis = req->cpu_millis != 0 ? req->cpu_millis
						     : cfg->default_cpu_millis;
	if (pick_driver(cfg, req, sb, err) < 0) {
		*retry_after_s = -1;
		return -1;
	}
	if (req->memory_mb != 0 && strcmp(sb->driver, "vm") != 0)
		sb->limits.memory_bytes = req->memory_mb << 20;
	if (req->pids != 0)
		sb->limits.pids_max = req->pids;
	if (req->cpu_shares != 0)
		sb->limits.cpu_shares = req->cpu_shares;
	if (req->disk_mb != 0)
		sb->limits.disk_bytes = (uint64_t)req->disk_mb << 20;
	if (al_sandbox_new_id(sb->id, err) < 0)
		return -1;
	/* Borrowed from the request; never freed through sb. */
	sb->env = req->env;
	sb->metadata = req->metadata;
	sb->network = req->network;
	sb->state = AL_ST_CREATING;
	sb->on_timeout_suspend = req->on_timeout_suspend;
	sb->auto_resume = req->auto_resume;
	snprintf(sb->project, sizeof sb->project, "%s", owner.project);
	sb->created_by_key = caller->key_id;
	return add_credential_env(db, sb, req, err);
}

/* sb's row, in the transaction that checks the project's quotas and
 * what the pool can give it, committed. */
static int insert_row(const al_config *cfg, al_db *db, al_sandbox *sb,
		      const al_create_req *req, int *retry_after_s, al_err *err)
{
	al_project_pool pool;
	if (al_project_begin_sandbox(db, cfg, sb->project,
				     sb->limits.memory_bytes >> 20,
				     sb->limits.disk_bytes >> 20, &pool,
				     sb->limits.cpu_millis, retry_after_s,
				     err) < 0) {
		if (err->code == AL_ENOENT)
			err->code = AL_EINVAL; /* the request's "project" */
		return -1;
	}
	/* What the pool can give the project: a disk it could never
	 * write is refused, not promised (core/pool/poolcap.h). */
	if (al_poolcap_admit(cfg, pool.group, pool.disk_quota_mb,
			     req->disk_mb != 0, &sb->limits.disk_bytes,
			     &sb->limits.pool_group_bytes, err) < 0) {
		al_db_rollback(db);
		if (err->code == AL_EQUOTA)
			*retry_after_s = AL_QUOTA_RETRY_S;
		return -1;
	}
	sb->limits.pool_group = pool.group;
	if (al_sandbox_insert(db, sb, (int)req->timeout_s, err) < 0 ||
	    al_db_commit(db, err) < 0) {
		al_db_rollback(db);
		return -1;
	}
	return 0;
}

/* sb (its row in state creating) brought to running: its shim started
 * and the row marked, *out the row as it is then. A failure is
 * recorded on the row (al_sandbox_start_failed), and a shim that
 * started is stopped. */
static int start(const al_config *cfg, al_db *db, const al_sandbox *sb,
		 al_sandbox *out, int *retry_after_s, al_err *err)
{
	/* The shim is told everything it runs (it has no database): sb
	 * still borrows the request's env here. */
	al_shim_ready ready;
	if (al_standby_claim_or_spawn(cfg, db, sb,
				      al_now_ms() + SPAWN_DEADLINE_MS, &ready,
				      err) < 0) {
		al_sandbox_start_failed(db, sb->id, err, retry_after_s);
		return -1;
	}
	/* pid, accelerator and running in one statement, which answers the
	 * row too. Not recorded (PostgreSQL went away, or the sandbox
	 * ended already): nothing is left half-made, the shim goes (and
	 * spools its delete for the controller). */
	if (al_sandbox_mark_running(db, sb->id, ready.pid, ready.accel, out,
				    err) < 0) {
		al_err tmp;
		if (al_shimctl_destroy(cfg, sb->id, &tmp) < 0 &&
		    tmp.code != AL_EUNAVAIL)
			al_warn("sandbox %s: %s", sb->id, tmp.msg);
		al_sandbox_start_failed(db, sb->id, err, retry_after_s);
		return -1;
	}
	return 0;
}

int al_sandbox_ops_create(const al_config *cfg, al_db *db,
			  const al_identity *caller, al_create_req *req,
			  al_sandbox *out, int *retry_after_s, al_err *err)
{
	al_sandbox sb;
	int retry = 0;
	memset(&sb, 0, sizeof sb);
	*retry_after_s = 0;
	if (plan(cfg, db, caller, req, &sb, &retry, err) < 0 ||
	    insert_row(cfg, db, &sb, req, &retry, err) < 0 ||
	    start(cfg, db, &sb, out, &retry, err) < 0) {
		/* Out of database connections or the like: a burst's
		 * clients are told when to come back. */
		if (retry == 0 && al_capacity_exhausted(err))
			retry = AL_CAPACITY_RETRY_S;
		*retry_after_s = retry > 0 ? retry : 0;
		return -1;
	}
	al_info("sandbox %s created (template %s, driver %s)", sb.id,
		sb.template_name, sb.driver);
	return 0;
}

int al_sandbox_ops_delete(const al_config *cfg, al_db *db, const char *id,
			  const char *project, al_err *err)
{
	al_sandbox sb;
	al_err tmp;
	if (al_sandbox_get_in(db, id, project, &sb, err) < 0)
		return -1;
	al_sandbox_free_fields(&sb);
	if (al_shimctl_destroy(cfg, id, err) < 0) {
		if (err->code != AL_EUNAVAIL)
			return -1;
		/* No shim to ask: record the deletion ourselves; the
		 * controller cleans up whatever it left behind. */
		al_info("sandbox %s: shim unreachable, marking deleted", id);
	}
	/* Recorded here at once; the shim's spooled delete lands later as
	 * a no-op (or landed first: then this one is rejected by the state
	 * table, which is fine). */
	if (al_sandbox_transition(db, id, AL_EV_DELETE, "api delete", &tmp) <
		    0 &&
	    tmp.code != AL_ESTATE && tmp.code != AL_ENOENT) {
		*err = tmp;
		return -1;
	}
	al_info("sandbox %s deleted", id);
	return 0;
}

/* The shim answers a network change once its gateway has (SHIM_GW_ACK_MS,
 * 3 s); this leaves it a little more. */
#define NETWORK_DEADLINE_MS 5000

int al_sandbox_ops_set_network(const al_config *cfg, al_db *db, const char *id,
			       const char *project, const al_netspec *ns,
			       bool *gateway, al_err *err)
{
	if (al_sandbox_ops_running(cfg, db, id, project, err) < 0)
		return -1;
	al_autofree char *payload = al_net_update_pack(ns, err);
	json_object *network = al_netspec_to_json(ns);
	al_frame res = {0};
	int rc = -1;
	if (payload == NULL || network == NULL) {
		if (err->code == AL_OK)
			al_err_set(err, AL_ENOMEM, 0, "out of memory");
	} else if (al_shimctl_request(cfg, id, AL_F_NETWORK, payload,
				      al_now_ms() + NETWORK_DEADLINE_MS, &res,
				      err) == 0 &&
		   al_net_result_unpack(res.payload, res.len, gateway, err) ==
			   0 &&
		   al_sandbox_set_network(db, id, project, network, err) == 0) {
		al_info("sandbox %s: network set to %s (gateway %s)", id,
			al_json_compact(network),
			*gateway ? "acknowledged" : "none");
		rc = 0;
	}
	al_frame_free(&res);
	json_object_put(network);
	return rc;
}

int al_sandbox_ops_running(const al_config *cfg, al_db *db, const char *id,
			   const char *project, al_err *err)
{
	al_sandbox sb;
	if (al_sandbox_get_in(db, id, project, &sb, err) < 0)
		return -1;
	int rc = 0, cold = 0;
	if (sb.state == AL_ST_SUSPENDED && sb.auto_resume)
		rc = al_lifecycle_resume(cfg, db, id, project, &cold, err);
	else if (sb.state == AL_ST_PAUSED || sb.state == AL_ST_SUSPENDED)
		rc = al_err_set(err, AL_ESTATE, 0,
				"sandbox %s is %s: resume it first (POST "
				"/v1/sandboxes/%s/resume)",
				sb.id, al_state_name(sb.state), sb.id);
	else if (sb.state != AL_ST_RUNNING)
		rc = al_err_set(err, AL_ESTATE, 0,
				"sandbox %s is %s, not running", sb.id,
				al_state_name(sb.state));
	al_sandbox_free_fields(&sb);
	return rc;
}

/* A new connection's server process starts with empty caches, so the
 * first create on each of fcgi's connections had PostgreSQL read its
 * catalogs and plan every statement from cold (some 8 ms of its CPU): a
 * burst right after a start paid that once per connection, 64 times.
 * Here each runs once as the thread connects, finding and keeping
 * nothing: an unknown key, the quota read in a transaction rolled back,
 * the running mark of an id no row has. Only the insert is left cold. */
void al_sandbox_ops_warm(al_db *db, const al_config *cfg)
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
