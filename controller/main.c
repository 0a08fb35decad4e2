/* airlock-controller [--init] [--once]
 *
 * --init  apply migrations, create the admin API key on first start
 *         (written to $AIRLOCK_STATE/api-key), then exit.
 * --once  run one pass of the rules below and exit (tests).
 * default: run the time-based rules every second until SIGTERM:
 *   - sandboxes past expires_at are destroyed through their shim;
 *   - reconcile: live sandboxes whose shim is gone are marked error and
 *     their resources released; rootfs snapshots with no live sandbox
 *     are deleted. Nothing leaks across a crash of any program.
 * Exit codes: 0 ok, 100 usage, 111 temporary failure (database down). */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "config.h"
#include "db.h"
#include "log.h"
#include "reap.h"
#include "sandbox.h"
#include "shimctl.h"

#define RECONCILE_EVERY_S 10
/* A sandbox may sit in "creating" this long before a missing shim counts
 * as a failed start rather than one in progress. */
#define CREATING_GRACE_S 60

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static int do_init(const al_config *cfg, al_db *db)
{
	al_err err = {0};
	if (al_db_migrate(db, cfg->sql_dir, &err) < 0) {
		al_error("migrations: %s", err.msg);
		return 111;
	}
	char key_file[AL_PATH_MAX + 16];
	snprintf(key_file, sizeof key_file, "%s/api-key", cfg->state_dir);
	int created = 0;
	if (al_auth_bootstrap(db, key_file, &created, &err) < 0) {
		al_error("admin key: %s", err.msg);
		return 111;
	}
	if (created)
		al_info("created the admin API key in %s", key_file);
	return 0;
}

static void expire(const al_config *cfg, al_db *db)
{
	al_err err = {0};
	char(*ids)[64] = NULL;
	int n = 0;
	if (al_sandbox_list_expired(db, &ids, &n, &err) < 0) {
		al_warn("listing expired sandboxes: %s", err.msg);
		return;
	}
	for (int i = 0; i < n; i++) {
		al_err e = {0};
		al_info("sandbox %s expired", ids[i]);
		if (al_shimctl_destroy(cfg, ids[i], &e) == 0)
			continue;
		/* No shim to ask: release what is left ourselves. */
		al_err e2 = {0};
		if (al_reap_sandbox(cfg, ids[i], &e2) < 0)
			al_warn("sandbox %s: %s", ids[i], e2.msg);
		if (al_sandbox_transition(db, ids[i], AL_EV_DELETE,
					  "expired", &e2) < 0)
			al_warn("sandbox %s: %s", ids[i], e2.msg);
	}
	free(ids);
}

static int seconds_since(const char *rfc3339)
{
	struct tm tm = {0};
	if (strptime(rfc3339, "%Y-%m-%dT%H:%M:%S", &tm) == NULL)
		return 0;
	return (int)(time(NULL) - timegm(&tm));
}

/* Live sandboxes without a shim: the shim crashed or was killed. */
static void reconcile_live(const al_config *cfg, al_db *db)
{
	al_err err = {0};
	char(*ids)[64] = NULL;
	int n = 0;
	if (al_sandbox_list_live(db, &ids, &n, &err) < 0) {
		al_warn("listing live sandboxes: %s", err.msg);
		return;
	}
	for (int i = 0; i < n; i++) {
		if (al_reap_shim_alive(cfg, ids[i]))
			continue;
		al_sandbox sb = {0};
		if (al_sandbox_get(db, ids[i], &sb, &err) < 0)
			continue;
		int young = sb.state == AL_ST_CREATING &&
			    seconds_since(sb.created_at) < CREATING_GRACE_S;
		al_sandbox_free_fields(&sb);
		if (young)
			continue;
		al_warn("sandbox %s lost its shim; releasing it", ids[i]);
		if (al_reap_sandbox(cfg, ids[i], &err) < 0)
			al_warn("sandbox %s: %s", ids[i], err.msg);
		if (al_sandbox_transition(db, ids[i], AL_EV_FAIL,
					  "the sandbox's shim is gone",
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
		int live = rc == 0 && (sb.state == AL_ST_CREATING ||
				       sb.state == AL_ST_RUNNING ||
				       sb.state == AL_ST_PAUSED);
		if (rc == 0)
			al_sandbox_free_fields(&sb);
		if (live || (rc < 0 && err.code != AL_ENOENT))
			continue;
		if (al_reap_shim_alive(cfg, de->d_name))
			continue;
		al_info("deleting orphaned rootfs of %s", de->d_name);
		if (al_reap_sandbox(cfg, de->d_name, &err) < 0)
			al_warn("sandbox %s: %s", de->d_name, err.msg);
	}
	closedir(d);
}

int main(int argc, char **argv)
{
	int init = 0, once = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--init") == 0)
			init = 1;
		else if (strcmp(argv[i], "--once") == 0)
			once = 1;
		else {
			fprintf(stderr,
				"usage: airlock-controller [--init] [--once]\n");
			return 100;
		}
	}
	al_log_init("airlock-controller", AL_LOG_INFO);
	al_config cfg;
	al_err err = {0};
	if (al_config_load(&cfg, &err) < 0) {
		al_error("%s", err.msg);
		return 100;
	}
	al_db *db = al_db_open(cfg.db_conninfo, &err);
	if (db == NULL) {
		al_error("%s", err.msg);
		return 111;
	}
	if (init) {
		int rc = do_init(&cfg, db);
		al_db_close(db);
		return rc;
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	time_t last_reconcile = 0;
	while (!stop_requested) {
		if (al_db_ensure(db, &err) < 0) {
			al_warn("database: %s", err.msg);
		} else {
			expire(&cfg, db);
			time_t now = time(NULL);
			if (once || now - last_reconcile >= RECONCILE_EVERY_S) {
				reconcile_live(&cfg, db);
				reconcile_pool(&cfg, db);
				last_reconcile = now;
			}
		}
		if (once)
			break;
		sleep(1);
	}
	al_db_close(db);
	return 0;
}
