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

/* Ask the shim of id for type, with op begun on the row. */
static int shim_op(const al_config *cfg, al_db *db, const char *id, al_op op,
		   uint16_t type, al_event ev, al_err *err)
{
	al_frame res = {0};
	int rc = al_shimctl_request(cfg, id, type, "{}",
				    al_now_ms() + PAUSE_DEADLINE_MS, &res, err);
	al_frame_free(&res);
	if (end_op(db, id, op, rc == 0, ev, err) < 0 && rc == 0)
		return -1;
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
	return shim_op(cfg, db, id, AL_OP_PAUSING, AL_F_PAUSE, AL_EV_PAUSE,
		       err);
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
		return shim_op(cfg, db, id, AL_OP_RESUMING, AL_F_RESUME,
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
	al_autofree char *payload = NULL;
	char snap[21];
	if ((m.memory = suspend_memory(sb.driver, memory, err)) < 0 ||
	    al_sandbox_new_id(snap, err) < 0 ||
	    al_sandbox_op_begin(db, id, project, AL_OP_SUSPENDING, &from, err) <
		    0)
		goto out;
	snprintf(m.snapshot, sizeof m.snapshot, "%s", snap);
	al_frame res = {0};
	if (al_snapshot_insert_pending(db, snap, &sb, "suspend", NULL, err) <
		    0 ||
	    (payload = al_suspend_pack(&m, err)) == NULL ||
	    al_shimctl_request(cfg, id, AL_F_SUSPEND, payload,
			       al_now_ms() + SUSPEND_DEADLINE_MS, &res,
			       err) < 0 ||
	    al_suspend_result_unpack(res.payload, res.len, &m, err) < 0) {
		al_frame_free(&res);
		/* No answer: the shim may have committed the snapshot; the
		 * controller settles the row from its directory. */
		if (err->code == AL_ETIMEDOUT || err->code == AL_EPROTO ||
		    err->code == AL_EUNAVAIL)
			goto out;
		al_err e2 = {0};
		if (al_snapshot_delete_row(db, snap, &e2) < 0)
			al_warn("snapshot %s: %s", snap, e2.msg);
		end_op(db, id, AL_OP_SUSPENDING, 0, AL_EV_SUSPEND, err);
		goto out;
	}
	al_frame_free(&res);
	if (al_snapshot_commit_suspend(db, id, snap, (long long)m.bytes,
				       m.memory, err) < 0)
		goto out;
	snprintf(snapshot, 64, "%s", snap);
	al_info("sandbox %s: suspended to snapshot %s", id, snap);
	rc = 0;
out:
	al_sandbox_free_fields(&sb);
	return rc;
}
