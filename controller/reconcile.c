/* reconcile: see reconcile.h. */
#include "reconcile.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "host/cgroup.h"
#include "model/build.h"
#include "model/sandbox.h"
#include "model/sandbox_state.h"
#include "model/snapshot.h"
#include "sandbox/reap.h"
#include "sandbox/shimctl.h"
#include "sandbox/snapfiles.h"
#include "sandbox/spool.h"
#include "sandbox/standby.h"
#include "spool_drain.h"
#include "template/airlockfile.h"

/* A sandbox may sit in "creating" this long before a missing shim counts
 * as a failed start rather than one in progress. */
#define CREATING_GRACE_S 60

/* A shim that is there, or ending: its pid file (removed last, once its
 * end is spooled) names a live airlock-shim. */
static int shim_present(const al_config *cfg, const char *id)
{
	if (al_reap_shim_alive(cfg, id))
		return 1;
	char path[AL_PATH_MAX + 80], exe[64], link[AL_PATH_MAX];
	if ((size_t)snprintf(path, sizeof path, "%s/sbx/%s.pid", cfg->run_dir,
			     id) >= sizeof path)
		return 0;
	FILE *f = fopen(path, "re");
	int pid = 0;
	if (f == NULL)
		return 0;
	if (fscanf(f, "%d", &pid) != 1)
		pid = 0;
	fclose(f);
	snprintf(exe, sizeof exe, "/proc/%d/exe", pid);
	ssize_t n = pid > 0 ? readlink(exe, link, sizeof link - 1) : -1;
	if (n <= 0)
		return 0;
	link[n] = '\0';
	const char *base = strrchr(link, '/');
	return base != NULL && strncmp(base + 1, "airlock-shim", 12) == 0;
}

static int seconds_since(const char *rfc3339)
{
	struct tm tm = {0};
	if (strptime(rfc3339, "%Y-%m-%dT%H:%M:%S", &tm) == NULL)
		return 0;
	return (int)(time(NULL) - timegm(&tm));
}

/* Live sandboxes without a shim: the shim crashed or was killed. What
 * the spool holds is recorded first: a shim that ended cleanly said how
 * (and a pending event of one means: not lost, only not recorded yet). */
static void reconcile_live(ctl *c)
{
	const al_config *cfg = c->cfg;
	al_db *db = c->db;
	al_err err = {0};
	char(*ids)[64] = NULL;
	int n = 0;
	ctl_spool_drain(c);
	if (al_sandbox_list_live(db, &ids, &n, &err) < 0) {
		al_warn("listing live sandboxes: %s", err.msg);
		return;
	}
	for (int i = 0; i < n; i++) {
		int present = shim_present(cfg, ids[i]);
		if (!present && al_spool_pending(cfg, ids[i]))
			continue;
		al_sandbox sb = {0};
		if (al_sandbox_get(db, ids[i], &sb, &err) < 0)
			continue;
		int creating = sb.state == AL_ST_CREATING;
		int young = creating &&
			    seconds_since(sb.created_at) < CREATING_GRACE_S;
		/* A suspend ends its shim before it is recorded: an
		 * operation under way is settled by controller/lifecycle.c. */
		int busy = sb.op[0] != '\0';
		al_sandbox_free_fields(&sb);
		if (young || busy)
			continue;
		if (present) {
			/* Started, never recorded running: whoever started
			 * it died before answering its client. */
			if (creating) {
				al_warn("sandbox %s: never recorded running; "
					"destroying it",
					ids[i]);
				if (al_shimctl_destroy(cfg, ids[i], &err) < 0)
					al_warn("sandbox %s: %s", ids[i],
						err.msg);
			}
			continue;
		}
		al_warn("sandbox %s lost its shim; releasing it", ids[i]);
		if (al_reap_sandbox(cfg, ids[i], &err) < 0)
			al_warn("sandbox %s: %s", ids[i], err.msg);
		/* Its last snapshot brings it back, suspended; without
		 * one it is lost. */
		char snap[64];
		if (al_snapshot_latest_of(db, ids[i], snap, &err) == 0 &&
		    snap[0] != '\0' && al_snapfiles_committed(cfg, snap) &&
		    al_snapshot_recover(db, ids[i], snap, &err) == 0) {
			al_warn("sandbox %s: recovered, suspended, from "
				"snapshot %s",
				ids[i], snap);
			continue;
		}
		if (al_sandbox_transition(db, ids[i], AL_EV_FAIL,
					  "lost: the sandbox's shim is gone "
					  "and it has no snapshot",
					  &err) < 0)
			al_warn("sandbox %s: %s", ids[i], err.msg);
	}
	free(ids);
}

/* Root filesystems in the pool that no live sandbox owns. */
static void reconcile_pool(const al_config *cfg, al_db *db)
{
	char dir[AL_PATH_MAX + 16];
	snprintf(dir, sizeof dir, "%s/sandboxes", cfg->pool_dir);
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (!al_id_valid(de->d_name))
			continue;
		al_err err = {0};
		al_sandbox sb = {0};
		int rc = al_sandbox_get(db, de->d_name, &sb, &err);
		/* A resume makes the root of a suspended sandbox. */
		int live = rc == 0 &&
			   (sb.state == AL_ST_CREATING ||
			    sb.state == AL_ST_RUNNING ||
			    sb.state == AL_ST_PAUSED || sb.op[0] != '\0');
		if (rc == 0)
			al_sandbox_free_fields(&sb);
		if (live || (rc < 0 && err.code != AL_ENOENT))
			continue;
		if (shim_present(cfg, de->d_name) ||
		    al_standby_alive(cfg, de->d_name))
			continue;
		al_info("deleting orphaned rootfs of %s", de->d_name);
		if (al_reap_sandbox(cfg, de->d_name, &err) < 0)
			al_warn("sandbox %s: %s", de->d_name, err.msg);
	}
	closedir(d);
}

/* Builds whose builder died (killed, host restart) would stay "running"
 * for ever, and their log streams with them: mark them failed. A queued
 * build that no builder took within a minute failed to start. */
static void reconcile_builds(al_db *db)
{
	al_err err = {0};
	al_build_pending *b = NULL;
	int n = 0;
	if (al_build_list_pending(db, &b, &n, &err) < 0) {
		al_warn("listing builds: %s", err.msg);
		return;
	}
	for (int i = 0; i < n; i++) {
		const char *id = b[i].id;
		int pid = b[i].builder_pid;
		int dead = pid > 0 ? kill(pid, 0) < 0 && errno == ESRCH
				   : b[i].age_s > 60;
		if (!dead)
			continue;
		al_warn("build %s: its builder is gone", id);
		/* Its RUN jails end with it (their agent sees EOF), but the
		 * cgroup leaves (b<build>-<step>, builder/run.c) stay. */
		int steps = b[i].steps;
		for (int st = 1; st <= steps && st <= AL_AF_MAX_STEPS; st++) {
			char cg[80];
			snprintf(cg, sizeof cg, "b%.40s-%d", id, st);
			al_err e = {0};
			if (al_cgroup_destroy(cg, &e) < 0)
				al_warn("build %s: %s", id, e.msg);
		}
		if (al_build_update(db, id, AL_BUILD_FAILED, 0, 0, 0,
				    "the builder exited before finishing",
				    &err) < 0)
			al_warn("build %s: %s", id, err.msg);
	}
	free(b);
}

static void reconcile_net(al_netpool *p)
{
	unsigned cleaned = 0;
	al_err err = {0};
	if (al_netpool_reconcile(p, &cleaned, &err) < 0)
		al_warn("network slots: %s", err.msg);
	if (cleaned > 0)
		al_info("network slots: removed %u left by ended shims",
			cleaned);
}

void ctl_reconcile(ctl *c)
{
	reconcile_live(c);
	reconcile_builds(c->db);
	al_standby_reap(c->cfg);
	reconcile_pool(c->cfg, c->db);
	if (c->net != NULL)
		reconcile_net(c->net);
}
