/* airlock-controller [--init] [--once]
 *
 * --init  apply migrations, create the admin API key on first start
 *         (written to $AIRLOCK_STATE/api-key), then exit.
 * --once  run one pass of the rules below and exit (tests).
 * default: run the time-based rules until SIGTERM:
 *   - sandboxes past expires_at are destroyed through their shim;
 *   - reconcile: live sandboxes whose shim is gone are marked error and
 *     their resources released; rootfs snapshots with no live sandbox
 *     or standby are deleted. Nothing leaks across a crash of any program;
 *   - warm pool: AIRLOCK_WARM_POOL standby machines per template are
 *     kept booted, so that a create claims one instead of starting cold.
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
#define TICK_MS 100
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
		if (al_reap_shim_alive(cfg, de->d_name) ||
		    al_reap_standbys(cfg, de->d_name) > 0)
			continue;
		al_info("deleting orphaned rootfs of %s", de->d_name);
		if (al_reap_sandbox(cfg, de->d_name, &err) < 0)
			al_warn("sandbox %s: %s", de->d_name, err.msg);
	}
	closedir(d);
}

/* Templates whose standby failed to start recently, so a broken
 * template is retried every POOL_BACKOFF_S rather than every second. */
#define POOL_BACKOFF_S 30
static struct {
	char name[64];
	time_t until;
} pool_backoff[64];

static time_t *backoff_slot(const char *name)
{
	for (size_t i = 0; i < sizeof pool_backoff / sizeof pool_backoff[0];
	     i++) {
		if (strcmp(pool_backoff[i].name, name) == 0 ||
		    pool_backoff[i].name[0] == '\0') {
			snprintf(pool_backoff[i].name,
				 sizeof pool_backoff[i].name, "%.63s", name);
			return &pool_backoff[i].until;
		}
	}
	return NULL;
}

/* Keep cfg->warm_pool standbys ready for each template, so a create is a
 * claim rather than a cold start. */
static void refill_pool(const al_config *cfg, al_db *db)
{
	/* Template names, re-read every few seconds rather than each tick. */
	static char names[64][64];
	static int count;
	static int64_t loaded_at = -1000000;
	if (cfg->warm_pool == 0)
		return;
	if (al_now_ms() - loaded_at >= 5000) {
		al_err err = {0};
		PGresult *res = al_db_exec(db, "SELECT name FROM templates "
					       "ORDER BY name LIMIT 64",
					   0, NULL, &err);
		if (res == NULL) {
			al_warn("listing templates: %s", err.msg);
			return;
		}
		count = PQntuples(res);
		for (int i = 0; i < count; i++)
			snprintf(names[i], sizeof names[i], "%s",
				 PQgetvalue(res, i, 0));
		PQclear(res);
		loaded_at = al_now_ms();
	}
	for (int i = 0; i < count; i++) {
		const char *name = names[i];
		time_t *until = backoff_slot(name);
		if (until == NULL || time(NULL) < *until)
			continue;
		int have = al_shimctl_standby_count(cfg, name);
		while (have < (int)cfg->warm_pool && !stop_requested) {
			al_err err = {0};
			if (al_shimctl_spawn_standby(cfg, name,
						     al_now_ms() + 30000,
						     &err) < 0) {
				al_warn("warm pool of %s: %s", name, err.msg);
				*until = time(NULL) + POOL_BACKOFF_S;
				break;
			}
			have++;
		}
	}
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

	/* The pool is looked at every tick so a claimed standby is replaced
	 * at once; expiry and reconcile run on slower clocks. */
	int64_t last_expire = 0, last_reconcile = 0;
	while (!stop_requested) {
		int64_t now = al_now_ms();
		if (al_db_ensure(db, &err) < 0) {
			al_warn("database: %s", err.msg);
			sleep(1);
			continue;
		}
		if (once || now - last_expire >= 1000) {
			expire(&cfg, db);
			last_expire = now;
		}
		if (once || now - last_reconcile >= RECONCILE_EVERY_S * 1000) {
			reconcile_live(&cfg, db);
			al_reap_standbys(&cfg, NULL);
			reconcile_pool(&cfg, db);
			last_reconcile = now;
		}
		refill_pool(&cfg, db);
		if (once)
			break;
		usleep(TICK_MS * 1000);
	}
	al_db_close(db);
	return 0;
}
