/* lifecycle_policy: the sweeps policies/lifecycle.lua drives (see
 * lifecycle.h): idle sandboxes suspended or deleted, rolling snapshots
 * of running ones, rolling and fork snapshots past their retention
 * removed. The policy is asked for every live sandbox under its lock,
 * then the work is done without it. A capture (a suspend, a snapshot)
 * holds this loop for its duration, so a pass does at most one: the
 * warm pool and the spool wait one capture, never a queue of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "lifecycle.h"
#include "model/project.h"
#include "model/sandbox_activity.h"
#include "model/snapshot.h"
#include "policy/policy.h"
#include "policywatch.h"
#include "proto/agentproto.h"
#include "sandbox/lifecycle_ops.h"
#include "sandbox/sandbox_ops.h"
#include "sandbox/streamlease.h"

/* How often the policy is asked about every live sandbox. */
#define SWEEP_EVERY_MS 2000
#define PAGE 128
/* Per pass: idle deletes, and snapshots pruned. */
#define DELETES_MAX 8
#define PRUNES_MAX 16

/* What one pass decided. */
typedef struct plan {
	char capture[64]; /* a sandbox to suspend (idle) or snapshot */
	bool capture_suspend;
	int capture_memory; /* suspend: 1 vm, 0 ns (files only) */
	long capture_idle_s;
	long capture_overdue; /* snapshot: seconds past its cadence */
	char del[DELETES_MAX][64];
	long del_idle_s[DELETES_MAX];
	int ndel;
	/* Every live sandbox with a retention, for the prune query. */
	char (*keep_ids)[64];
	long *keep_s;
	int nkeep, capkeep;
} plan;

/* The metadata object as the policy's kv list (string members only; a
 * row's metadata is strings by the API's validation). */
static size_t metadata_kv(json_object *meta, al_policy_kv *kv, size_t max)
{
	size_t n = 0;
	if (meta == NULL)
		return 0;
	json_object_object_foreach(meta, k, v)
	{
		if (n < max && json_object_is_type(v, json_type_string))
			kv[n++] = (al_policy_kv){k, json_object_get_string(v)};
	}
	return n;
}

/* 1 when sandbox id has an event stream open (asked of its shim, which
 * sees streams end; ended ones lose their leases) or cannot tell, 0 if
 * none. */
static int stream_open(ctl *c, const char *id)
{
	al_err err = {0};
	json_object *arr = al_project_stream_leases(c->db, NULL, 0, &err);
	if (arr == NULL)
		return 1; /* cannot tell: treated as open */
	char(*lease)[AL_STREAM_LEASE_LEN + 1] = calloc(AL_STREAMS_MAX,
						       sizeof *lease);
	size_t n = 0;
	for (size_t i = 0; lease != NULL && i < json_object_array_length(arr) &&
			   n < AL_STREAMS_MAX;
	     i++) {
		json_object *row = json_object_array_get_idx(arr, i), *v;
		if (json_object_object_get_ex(row, "sandbox_id", &v) &&
		    strcmp(json_object_get_string(v), id) == 0 &&
		    json_object_object_get_ex(row, "lease", &v))
			snprintf(lease[n++], AL_STREAM_LEASE_LEN + 1, "%s",
				 json_object_get_string(v));
	}
	json_object_put(arr);
	int open = lease == NULL ? -1
		   : n == 0	 ? 0
			    : al_streamlease_check(c->cfg, c->db, id, lease, n,
						   AL_OK, NULL, &err);
	if (open < 0)
		al_warn("sandbox %s: asking for its streams: %s", id,
			lease == NULL ? "out of memory" : err.msg);
	free(lease);
	return open != 0; /* cannot tell: treated as open */
}

static void keep_add(plan *pl, const char *id, long keep)
{
	if (pl->nkeep == pl->capkeep) {
		int cap = pl->capkeep > 0 ? 2 * pl->capkeep : PAGE;
		void *a = realloc(pl->keep_ids, (size_t)cap * 64);
		if (a == NULL)
			return;
		pl->keep_ids = a;
		void *b = realloc(pl->keep_s, (size_t)cap * sizeof(long));
		if (b == NULL)
			return;
		pl->keep_s = b;
		pl->capkeep = cap;
	}
	snprintf(pl->keep_ids[pl->nkeep], 64, "%s", id);
	pl->keep_s[pl->nkeep++] = keep;
}

/* The policy's decision for s, into pl. */
static void consider(ctl *c, al_policy *p, const al_sandbox_idle *s, plan *pl)
{
	al_policy_kv kv[AL_POLICY_LIST_MAX];
	al_lifecycle_req req = {
		.sandbox = s->id,
		.template_name = s->template_name,
		.project = s->project,
		.driver = s->driver,
		.state = al_state_name(s->state),
		.metadata = kv,
		.n_metadata = metadata_kv(s->metadata, kv, AL_POLICY_LIST_MAX),
	};
	al_lifecycle_decision d;
	if (al_policy_lifecycle(p, &req, &d) < 0)
		return; /* logged; nothing is done to it */
	if (d.snapshot_keep > 0)
		keep_add(pl, s->id, d.snapshot_keep);
	bool live = s->state == AL_ST_RUNNING || s->state == AL_ST_PAUSED;
	if (live && d.idle_action != AL_IDLE_NONE &&
	    s->idle_s >= d.idle_after) {
		if (s->streams > 0 && stream_open(c, s->id)) {
			/* An open stream is activity. */
			al_err err = {0};
			if (al_sandbox_touch(c->db, s->id, NULL, &err) < 0)
				al_warn("sandbox %s: %s", s->id, err.msg);
			return;
		}
		if (d.idle_action == AL_IDLE_DELETE && pl->ndel < DELETES_MAX) {
			pl->del_idle_s[pl->ndel] = s->idle_s;
			snprintf(pl->del[pl->ndel++], 64, "%s", s->id);
			return;
		}
		if (d.idle_action == AL_IDLE_SUSPEND && !pl->capture_suspend) {
			snprintf(pl->capture, sizeof pl->capture, "%s", s->id);
			pl->capture_suspend = true;
			pl->capture_memory = strcmp(s->driver, "vm") == 0;
			pl->capture_idle_s = s->idle_s;
			return;
		}
	}
	/* Rolling snapshots: the running sandbox most overdue, unless a
	 * suspend takes this pass's capture. */
	long overdue = s->snapshot_age_s - d.snapshot_every;
	if (s->state == AL_ST_RUNNING && d.snapshot_every > 0 && overdue >= 0 &&
	    !pl->capture_suspend &&
	    (pl->capture[0] == '\0' || overdue > pl->capture_overdue)) {
		snprintf(pl->capture, sizeof pl->capture, "%s", s->id);
		pl->capture_overdue = overdue;
	}
}

/* Ask the policy about every live sandbox; 0 when it could. */
static int decide(ctl *c, plan *pl)
{
	al_policy *p = ctl_policywatch_lifecycle();
	if (p == NULL)
		return -1; /* the policy watch said why */
	al_sandbox_idle *rows = calloc(PAGE, sizeof *rows);
	char after[64] = "";
	int n = 0, rc = 0;
	al_err err = {0};
	do {
		if (rows == NULL || al_sandbox_idle_list(c->db, after, rows,
							 PAGE, &n, &err) < 0) {
			al_warn("lifecycle sweep: %s",
				rows == NULL ? "out of memory" : err.msg);
			rc = -1;
			break;
		}
		for (int i = 0; i < n; i++) {
			consider(c, p, &rows[i], pl);
			al_sandbox_idle_free(&rows[i]);
		}
		if (n > 0)
			snprintf(after, sizeof after, "%s", rows[n - 1].id);
	} while (n == PAGE && !c->stop);
	ctl_policywatch_release();
	free(rows);
	return rc;
}

static void act_delete(ctl *c, const plan *pl)
{
	for (int i = 0; i < pl->ndel; i++) {
		al_err err = {0};
		al_info("sandbox %s: idle for %ld s: deleting it (lifecycle"
			" policy)",
			pl->del[i], pl->del_idle_s[i]);
		if (al_sandbox_ops_delete(c->cfg, c->db, pl->del[i], NULL,
					  &err) < 0)
			al_warn("sandbox %s: idle delete: %s", pl->del[i],
				err.msg);
	}
}

static void act_capture(ctl *c, const plan *pl)
{
	char snap[64] = "";
	al_err err = {0};
	if (pl->capture[0] == '\0')
		return;
	if (pl->capture_suspend) {
		al_info("sandbox %s: idle for %ld s: suspending it%s (lifecycle"
			" policy)",
			pl->capture, pl->capture_idle_s,
			pl->capture_memory ? ""
					   : " with its files only (an ns"
					     " sandbox keeps no process)");
		if (al_lifecycle_suspend(c->cfg, c->db, pl->capture, NULL,
					 pl->capture_memory, snap, &err) < 0)
			al_warn("sandbox %s: idle suspend: %s", pl->capture,
				err.msg);
		return;
	}
	if (al_lifecycle_snapshot(c->cfg, c->db, pl->capture, NULL, "rolling",
				  NULL, snap, &err) < 0)
		/* Busy (an operation began meanwhile) or refused: the
		 * next pass tries again. */
		al_warn("sandbox %s: rolling snapshot: %s", pl->capture,
			err.msg);
}

static void act_prune(ctl *c, const plan *pl)
{
	char ids[PRUNES_MAX][64];
	int n = 0;
	al_err err = {0};
	if (al_snapshot_list_expired(c->db, pl->keep_ids, pl->keep_s, pl->nkeep,
				     ids, PRUNES_MAX, &n, &err) < 0) {
		al_warn("listing expired snapshots: %s", err.msg);
		return;
	}
	for (int i = 0; i < n; i++) {
		al_err e = {0};
		/* It checks again that no suspended sandbox needs it and
		 * that it is not being taken. */
		if (al_lifecycle_snapshot_delete(c->cfg, c->db, ids[i], NULL,
						 &e) < 0)
			al_warn("snapshot %s: pruning: %s", ids[i], e.msg);
		else
			al_info("snapshot %s pruned: past its retention"
				" (lifecycle policy)",
				ids[i]);
	}
}

void ctl_lifecycle_policy_sweep(ctl *c)
{
	static int64_t last;
	int64_t now = al_now_ms();
	if (last != 0 && now - last < SWEEP_EVERY_MS)
		return;
	last = now;
	plan pl = {0};
	if (decide(c, &pl) == 0) {
		act_prune(c, &pl);
		act_delete(c, &pl);
		act_capture(c, &pl);
	}
	free(pl.keep_ids);
	free(pl.keep_s);
}
