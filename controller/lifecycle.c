/* lifecycle: see lifecycle.h. */
#include "lifecycle.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/json.h"
#include "base/log.h"
#include "model/sandbox.h"
#include "model/sandbox_op.h"
#include "model/snapshot.h"
#include "sandbox/shimctl.h"
#include "sandbox/snapfiles.h"

/* An operation is stale past its caller's longest deadline
 * (lifecycle_ops.c: a suspend's 120 s) and a margin. */
#define OP_STALE_S 150
/* Unfinished or unknown snapshot directories younger than this may be
 * a suspend at work. */
#define SNAPDIR_GRACE_S 600
#define BATCH 64

void ctl_lifecycle_tick(ctl *c)
{
	char ids[BATCH][64];
	int n = 0;
	al_err err = {0};
	if (al_snapshot_list_unneeded(c->db, ids, BATCH, &n, &err) < 0) {
		al_warn("listing unneeded snapshots: %s", err.msg);
		return;
	}
	for (int i = 0; i < n; i++) {
		char dir[AL_PATH_MAX];
		if (al_config_snapshot_dir(c->cfg, ids[i], dir, sizeof dir,
					   &err) < 0 ||
		    al_snapfiles_remove(dir, &err) < 0 ||
		    al_snapshot_delete_row(c->db, ids[i], &err) < 0) {
			al_warn("snapshot %s: %s", ids[i], err.msg);
			continue;
		}
		al_info("snapshot %s removed: its sandbox is gone", ids[i]);
	}
}

/* What the shim of id says it is: "running", "paused", or "" when no
 * shim answers. */
static void shim_state(const al_config *cfg, const char *id, char *out,
		       size_t len)
{
	al_err err = {0};
	json_object *res = NULL;
	out[0] = '\0';
	int fd = al_shimctl_connect(cfg, id, &err);
	if (fd < 0)
		return;
	if (al_shimctl_call(fd, AL_F_STATUS, AL_REQ_ID_CLIENT, NULL,
			    al_now_ms() + 3000, &res, &err) == 0) {
		json_object *st = NULL;
		if (json_object_object_get_ex(res, "state", &st) &&
		    json_object_is_type(st, json_type_string))
			snprintf(out, len, "%s", json_object_get_string(st));
	}
	json_object_put(res);
	close(fd);
}

/* A suspend or snapshot whose caller is gone: committed or not, by its
 * directory. */
static void settle_snapshot(ctl *c, const char *id, al_op op, al_err *err)
{
	char snap[64];
	if (al_snapshot_pending_of(c->db, id, snap, err) < 0)
		return;
	int committed = snap[0] != '\0' && al_snapfiles_committed(c->cfg, snap);
	if (committed && op == AL_OP_SUSPENDING) {
		if (al_snapshot_commit_suspend(c->db, id, snap, 0, -1, err) ==
		    0)
			al_info("sandbox %s: suspend to %s recorded", id, snap);
		return;
	}
	if (committed)
		(void)al_snapshot_mark_ready(c->db, snap, 0, -1, err);
	else if (snap[0] != '\0')
		(void)al_snapshot_delete_row(c->db, snap, err);
	(void)al_sandbox_op_end(c->db, id, op, AL_EV_MAX, NULL, err);
}

/* Pause or resume whose caller is gone: the row follows the shim. */
static void settle_by_shim(ctl *c, const char *id, al_op op, al_err *err)
{
	al_sandbox sb;
	char st[16];
	if (al_sandbox_get(c->db, id, &sb, err) < 0)
		return;
	al_state cur = sb.state;
	al_sandbox_free_fields(&sb);
	shim_state(c->cfg, id, st, sizeof st);
	al_event ev = AL_EV_MAX;
	if (strcmp(st, "paused") == 0 && cur == AL_ST_RUNNING)
		ev = AL_EV_PAUSE;
	else if (strcmp(st, "running") == 0 && cur != AL_ST_RUNNING)
		ev = AL_EV_RESUME;
	if (op == AL_OP_RESUMING && ev == AL_EV_RESUME &&
	    cur == AL_ST_SUSPENDED)
		(void)al_sandbox_op_end_resumed(c->db, id, 0, err);
	else
		(void)al_sandbox_op_end(c->db, id, op, ev, NULL, err);
}

static void settle_stale_ops(ctl *c)
{
	char ids[BATCH][64];
	al_op ops[BATCH];
	int n = 0;
	al_err err = {0};
	if (al_sandbox_op_stale(c->db, OP_STALE_S, ids, ops, BATCH, &n, &err) <
	    0) {
		al_warn("listing stale operations: %s", err.msg);
		return;
	}
	for (int i = 0; i < n; i++) {
		al_err e = {0};
		al_warn("sandbox %s: settling its stale %s", ids[i],
			al_op_name(ops[i]));
		if (ops[i] == AL_OP_SUSPENDING || ops[i] == AL_OP_SNAPSHOTTING)
			settle_snapshot(c, ids[i], ops[i], &e);
		else if (ops[i] == AL_OP_PAUSING || ops[i] == AL_OP_RESUMING)
			settle_by_shim(c, ids[i], ops[i], &e);
		else
			(void)al_sandbox_op_end(c->db, ids[i], ops[i],
						AL_EV_MAX, NULL, &e);
		if (e.code != AL_OK)
			al_warn("sandbox %s: %s", ids[i], e.msg);
	}
}

/* pool/snapshots: ".<id>.tmp" is a suspend at work or one that died;
 * "<id>" without a row is one whose row was never written or is gone. */
static void sweep_snapdirs(ctl *c)
{
	char dir[AL_PATH_MAX + 16], path[2 * AL_PATH_MAX];
	snprintf(dir, sizeof dir, "%s/snapshots", c->cfg->pool_dir);
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		char id[80];
		size_t len = strlen(de->d_name);
		int tmp = de->d_name[0] == '.' && len > 5 &&
			  strcmp(de->d_name + len - 4, ".tmp") == 0;
		snprintf(id, sizeof id, "%.*s", (int)(tmp ? len - 5 : len),
			 de->d_name + (tmp ? 1 : 0));
		if (!al_id_valid(id))
			continue;
		struct stat st;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode) ||
		    time(NULL) - st.st_mtime < SNAPDIR_GRACE_S)
			continue;
		al_err err = {0};
		if (!tmp && al_snapshot_known(c->db, id, &err) != 0)
			continue; /* named by a row, or the database is away */
		al_info("removing %s snapshot directory %s",
			tmp ? "unfinished" : "unknown", de->d_name);
		if (al_snapfiles_remove(path, &err) < 0)
			al_warn("%s: %s", path, err.msg);
	}
	closedir(d);
}

void ctl_lifecycle_reconcile(ctl *c)
{
	settle_stale_ops(c);
	sweep_snapdirs(c);
}
