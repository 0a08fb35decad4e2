/* Lifecycle operations (lifecycle_ops.h). */
#include "sandbox/lifecycle_ops.h"

#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/log.h"
#include "model/project.h"
#include "model/sandbox.h"
#include "model/sandbox_op.h"
#include "model/snapshot.h"
#include "pool/poolcap.h"
#include "proto/agentproto.h"
#include "sandbox/shimctl.h"
#include "sandbox/snapfiles.h"

/* The shim answers a pause once its agent did (SHIM_PAUSE_MS at most)
 * and the machine stopped. */
#define PAUSE_DEADLINE_MS 8000
/* A suspend writes the memory the guest changed: seconds under TCG for
 * a big guest. A resume starts a machine (a vm under TCG, seconds). */
#define SUSPEND_DEADLINE_MS 120000
#define RESUME_DEADLINE_MS 60000

/* End op with ev when done, else with no change; a failure to record
 * it is the controller's to settle from the shim (al_sandbox_op_stale). */
static int end_op(al_db *db, const char *id, al_op op, int done, al_event ev,
		  al_err *err)
{
	al_err e2 = {0};
	if (al_sandbox_op_end(db, id, op, done ? ev : AL_EV_MAX, NULL, &e2) ==
	    0)
		return 0;
	al_warn("sandbox %s: ending %s: %s", id, al_op_name(op), e2.msg);
	if (done)
		*err = e2;
	return -1;
}

/* Ask the shim of id for type, with op begun on the row in state from. */
static int shim_op(const al_config *cfg, al_db *db, const char *id, al_op op,
		   al_state from, uint16_t type, al_event ev, al_err *err)
{
	al_frame res = {0};
	int rc = al_shimctl_request(cfg, id, type, "{}",
				    al_now_ms() + PAUSE_DEADLINE_MS, &res, err);
	al_frame_free(&res);
	if (rc == 0 && al_sandbox_op_finish(db, id, op, from, ev, err) < 0) {
		/* The controller settles it from the shim's STATUS. */
		al_warn("sandbox %s: ending %s: %s", id, al_op_name(op),
			err->msg);
		return -1;
	}
	if (rc < 0)
		end_op(db, id, op, 0, ev, err);
	if (rc == 0)
		al_info("sandbox %s: %s", id, al_event_name(ev));
	return rc;
}

int al_lifecycle_pause(const al_config *cfg, al_db *db, const char *id,
		       const char *project, al_err *err)
{
	al_state from;
	if (al_sandbox_op_begin(db, id, project, AL_OP_PAUSING, &from, err) < 0)
		return -1;
	return shim_op(cfg, db, id, AL_OP_PAUSING, from, AL_F_PAUSE,
		       AL_EV_PAUSE, err);
}

/* Room for sb to run again: the project's quotas (as for a create) and
 * its part of the pool, into sb's limits. */
static int admit_resume(const al_config *cfg, al_db *db, al_sandbox *sb,
			al_err *err)
{
	al_project_pool pool;
	int retry = 0;
	if (al_project_begin_sandbox(db, cfg, sb->project,
				     sb->limits.memory_bytes >> 20,
				     sb->limits.disk_bytes >> 20, &pool,
				     sb->limits.cpu_millis, &retry, err) < 0)
		return -1;
	al_db_rollback(db); /* nothing to write: the row exists */
	uint64_t used = 0, cap = 0;
	if (al_poolcap_project_usage(cfg, pool.group, &used, &cap, err) < 0)
		return -1;
	sb->limits.pool_group = pool.group;
	sb->limits.pool_group_bytes = cap;
	return 0;
}

/* suspended -> running: a new shim from the snapshot. */
static int resume_suspended(const al_config *cfg, al_db *db, al_sandbox *sb,
			    int *cold, al_err *err)
{
	al_shim_ready ready = {0};
	int rc = admit_resume(cfg, db, sb, err);
	if (rc == 0)
		rc = al_shimctl_spawn(cfg, db, sb,
				      al_now_ms() + RESUME_DEADLINE_MS, &ready,
				      err);
	if (rc < 0) {
		al_err_wrap(err, "resuming from snapshot %s",
			    sb->resume_snapshot);
		end_op(db, sb->id, AL_OP_RESUMING, 0, AL_EV_RESUME, err);
		return -1;
	}
	*cold = ready.cold;
	if (al_sandbox_op_end_resumed(db, sb->id, ready.pid, err) < 0)
		return -1;
	al_info("sandbox %s: resumed from snapshot %s%s", sb->id,
		sb->resume_snapshot, ready.cold ? " (files only)" : "");
	return 0;
}

int al_lifecycle_resume(const al_config *cfg, al_db *db, const char *id,
			const char *project, int *cold, al_err *err)
{
	al_state from;
	*cold = 0;
	if (al_sandbox_op_begin(db, id, project, AL_OP_RESUMING, &from, err) <
	    0)
		return -1;
	if (from != AL_ST_SUSPENDED)
		return shim_op(cfg, db, id, AL_OP_RESUMING, from, AL_F_RESUME,
			       AL_EV_RESUME, err);
	al_sandbox sb;
	if (al_sandbox_get_in(db, id, project, &sb, err) < 0) {
		end_op(db, id, AL_OP_RESUMING, 0, AL_EV_RESUME, err);
		return -1;
	}
	int rc = resume_suspended(cfg, db, &sb, cold, err);
	al_sandbox_free_fields(&sb);
	return rc;
}

/* Which memory a suspend of a driver keeps: -1 (err) when it cannot do
 * what was asked. */
static int suspend_memory(const char *driver, int memory, al_err *err)
{
	int vm = strcmp(driver, "vm") == 0;
	if (vm && memory == 0)
		return al_err_set(err, AL_ENOTSUP, 0,
				  "a vm sandbox is suspended with its memory "
				  "(\"memory\": true or left out)");
	if (!vm && memory != 0)
		return al_err_set(err, AL_EMEMORY, 0,
				  "an %s sandbox cannot keep its processes "
				  "and memory across a suspend: ask for "
				  "\"memory\": false to keep its files only "
				  "(its processes end, and a resume starts "
				  "it afresh on them)",
				  driver);
	return vm;
}

/* Take a snapshot of sb (kind, name or NULL) through its shim with
 * frame type (SUSPEND or SNAPSHOT), op begun on its row; *m gets what
 * it holds. The row is pending meanwhile. 1: taken; 0 (err): refused,
 * the row removed, the caller ends its op; -1 (err): no answer, the
 * row and op left to the controller (al_sandbox_op_stale), which
 * settles them from the snapshot's directory. */
static int take(const al_config *cfg, al_db *db, const al_sandbox *sb,
		uint16_t type, const char *kind, const char *name,
		al_suspend_msg *m, al_err *err)
{
	al_autofree char *payload = NULL;
	al_frame res = {0};
	if (al_snapshot_insert_pending(db, m->snapshot, sb, kind, name, err) <
	    0)
		return 0; /* refused before anything was asked */
	al_suspend_msg got;
	if ((payload = al_suspend_pack(m, err)) != NULL &&
	    al_shimctl_request(cfg, sb->id, type, payload,
			       al_now_ms() + SUSPEND_DEADLINE_MS, &res,
			       err) == 0 &&
	    al_suspend_result_unpack(res.payload, res.len, &got, err) == 0) {
		al_frame_free(&res);
		m->bytes = got.bytes;
		m->memory = got.memory;
		return 1;
	}
	al_frame_free(&res);
	/* No answer: the shim may have committed it; the controller
	 * settles the row from its directory. */
	if (err->code == AL_ETIMEDOUT || err->code == AL_EPROTO ||
	    err->code == AL_EUNAVAIL)
		return -1;
	al_err e2 = {0};
	if (al_snapshot_delete_row(db, m->snapshot, &e2) < 0)
		al_warn("snapshot %s: %s", m->snapshot, e2.msg);
	return 0;
}

/* A new snapshot id into m. */
static int new_snapshot(al_suspend_msg *m, al_err *err)
{
	char snap[21];
	if (al_sandbox_new_id(snap, err) < 0)
		return -1;
	snprintf(m->snapshot, sizeof m->snapshot, "%s", snap);
	return 0;
}

int al_lifecycle_suspend(const al_config *cfg, al_db *db, const char *id,
			 const char *project, int memory, char snapshot[64],
			 al_err *err)
{
	al_sandbox sb;
	if (al_sandbox_get_in(db, id, project, &sb, err) < 0)
		return -1;
	int rc = -1;
	al_state from;
	al_suspend_msg m = {0};
	if ((m.memory = suspend_memory(sb.driver, memory, err)) < 0 ||
	    new_snapshot(&m, err) < 0 ||
	    al_sandbox_op_begin(db, id, project, AL_OP_SUSPENDING, &from, err) <
		    0)
		goto out;
	int got = take(cfg, db, &sb, AL_F_SUSPEND, "suspend", NULL, &m, err);
	if (got == 0)
		end_op(db, id, AL_OP_SUSPENDING, 0, AL_EV_SUSPEND, err);
	if (got <= 0 ||
	    al_snapshot_commit_suspend(db, id, m.snapshot, (long long)m.bytes,
				       m.memory, err) < 0)
		goto out;
	snprintf(snapshot, 64, "%s", m.snapshot);
	al_info("sandbox %s: suspended to snapshot %s", id, m.snapshot);
	rc = 0;
out:
	al_sandbox_free_fields(&sb);
	return rc;
}

int al_lifecycle_snapshot(const al_config *cfg, al_db *db, const char *id,
			  const char *project, const char *kind,
			  const char *name, char snapshot[64], al_err *err)
{
	al_sandbox sb;
	if (al_sandbox_get_in(db, id, project, &sb, err) < 0)
		return -1;
	int rc = -1;
	al_state from;
	/* A vm keeps its memory; an ns sandbox's snapshot is its files. */
	al_suspend_msg m = {.memory = strcmp(sb.driver, "vm") == 0};
	if (new_snapshot(&m, err) < 0 ||
	    al_sandbox_op_begin(db, id, project, AL_OP_SNAPSHOTTING, &from,
				err) < 0)
		goto out;
	int got = take(cfg, db, &sb, AL_F_SNAPSHOT, kind, name, &m, err);
	if (got == 0)
		end_op(db, id, AL_OP_SNAPSHOTTING, 0, AL_EV_MAX, err);
	if (got <= 0)
		goto out;
	if (al_snapshot_mark_ready(db, m.snapshot, (long long)m.bytes, m.memory,
				   err) < 0 ||
	    end_op(db, id, AL_OP_SNAPSHOTTING, 1, AL_EV_MAX, err) < 0)
		goto out;
	snprintf(snapshot, 64, "%s", m.snapshot);
	al_info("sandbox %s: snapshot %s taken (%s)", id, m.snapshot, kind);
	rc = 0;
out:
	al_sandbox_free_fields(&sb);
	return rc;
}

int al_lifecycle_snapshot_delete(const al_config *cfg, al_db *db,
				 const char *snap, const char *project,
				 al_err *err)
{
	al_snapshot sn;
	if (al_snapshot_get_in(db, snap, project, &sn, err) < 0)
		return -1;
	if (strcmp(sn.status, "pending") == 0)
		return al_err_set(err, AL_ESTATE, 0,
				  "snapshot %s is being taken", snap);
	al_sandbox sb;
	if (al_sandbox_get(db, sn.sandbox_id, &sb, err) == 0) {
		int needed = sb.state == AL_ST_SUSPENDED &&
			     strcmp(sb.resume_snapshot, snap) == 0;
		al_sandbox_free_fields(&sb);
		if (needed)
			return al_err_set(err, AL_ESTATE, 0,
					  "sandbox %s is suspended on snapshot "
					  "%s: resume or delete it first",
					  sn.sandbox_id, snap);
	}
	char dir[AL_PATH_MAX];
	if (al_config_snapshot_dir(cfg, snap, dir, sizeof dir, err) < 0 ||
	    al_snapfiles_remove(dir, err) < 0 ||
	    al_snapshot_delete_row(db, snap, err) < 0)
		return -1;
	al_info("snapshot %s deleted", snap);
	return 0;
}
