/* airlock-controller [--init] [--once] [--rotate-master-key]
 *
 * --init  check that PostgreSQL, the logs, the keys and the sockets are
 *         not on the pool's filesystem and turn on the pool's disk
 *         quotas (either failing fails --init, before the database is
 *         touched); apply migrations, create the admin API key on first
 *         start (written to $AIRLOCK_STATE/api-key); then, when QEMU and
 *         the guest kernel are there, probe whether KVM can boot a guest
 *         (3 s deadline, else TCG), remember the answer, and build the
 *         VM artefacts (disk image + base snapshot) of every template
 *         that has none or stale ones; create the host CA
 *         (STATE/keys/ca.{key,crt}, core/ca/ca.h) if there is none, before
 *         any template is built. A vm failure never fails --init:
 *         it is logged and recorded as the reason the vm driver is
 *         unavailable (the ns driver does not need any of it). Exit.
 * --once  run one pass of the rules below and exit (tests).
 * --rotate-master-key  make a new master key current, re-encrypt every
 *         credential with it while the stack runs, remove the keys no
 *         credential uses any more, exit (controller/credentials.h).
 * default: run the time-based rules until SIGTERM, each in its own file
 * (this one holds --init and the loop):
 *   - the shims' spooled transitions (core/sandbox/spool.h: a sandbox ended) are
 *     recorded in batches, one transaction each, as they appear (inotify)
 *     and on every tick; a file goes only once its batch committed
 *     (controller/spool_drain.h);
 *   - sandboxes past expires_at are destroyed through their shim, every
 *     second (controller/expiry.h);
 *   - reconcile, every 10 s: live sandboxes whose shim is gone (and whose
 *     end is not waiting in the spool) are marked error and their
 *     resources released; a sandbox still creating long after its start
 *     with a shim is one whose starter died before recording it: it is
 *     destroyed (its client never got it); builds whose builder died
 *     fail; dead standbys are released; rootfs snapshots with no live
 *     sandbox or standby are deleted. Nothing leaks across a crash of
 *     any program (controller/reconcile.h);
 *   - the gateways' egress decisions (core/net/egress.h: run/egress/) are
 *     recorded in batches every tick and their files unlinked; rows
 *     older than AIRLOCK_EGRESS_RETENTION_DAYS are deleted;
 *   - warm pool, every tick: AIRLOCK_WARM_POOL ns standbys and (while
 *     the vm driver is usable and the template has its VM snapshot)
 *     AIRLOCK_WARM_POOL_VM vm standbys per template at the least are kept
 *     ready, so that a create claims one instead of starting cold; up to
 *     the _MAX variables while creates come (core/sandbox/warmpool.h); retired
 *     standbys (a template rebuilt or deleted, a pool shrunk:
 *     core/sandbox/standby.h) are ended (controller/refill.h);
 *   - network slots (core/net/pool.h): enough ready of each kind for
 *     the creates and standby starts to come, sized like the warm pool
 *     from the create rate, prepared here off every create's path;
 *     reconcile removes the slots of shims that died; at stop the ready
 *     ones are removed (controller/refill.h);
 *   - credential audit rows older than AIRLOCK_AUDIT_RETENTION_DAYS are
 *     deleted; the first master key (STATE/keys/master-1.key) is made
 *     at start if there is none;
 *   - a thread serves STATE/run/mint.sock: TLS leaves for the sandboxes'
 *     gateways, signed with the host CA (controller/mint.h);
 *   - a thread loads the operator's policies, reloads them as their files
 *     change and publishes their status for GET /v1/info in
 *     STATE/run/policies.json (controller/policywatch.h);
 *   - every 2 s, what policies/lifecycle.lua decides: idle sandboxes
 *     suspended or deleted, rolling snapshots taken (one capture a
 *     pass), snapshots past their retention removed
 *     (controller/lifecycle.h).
 * Exit codes: 0 ok, 100 usage, 111 temporary failure (database down). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/config.h"
#include "base/log.h"
#include "ca/ca.h"
#include "credentials.h"
#include "credstore.h"
#include "credsvc.h"
#include "ctl.h"
#include "egress_ingest.h"
#include "expiry.h"
#include "lifecycle.h"
#include "mint.h"
#include "model/auth.h"
#include "model/db.h"
#include "model/template.h"
#include "net/pool.h"
#include "policywatch.h"
#include "pool/poolcap.h"
#include "pool/store.h"
#include "poolcaps.h"
#include "proto/agentproto.h"
#include "reconcile.h"
#include "refill.h"
#include "sandbox/spool.h"
#include "spares.h"
#include "spool_drain.h"
#include "vm/mem.h"
#include "vm/probe.h"
#include "vm/snapshot.h"

#define RECONCILE_EVERY_S 10
#define TICK_MS 100
/* How long the KVM probe may take to see the guest init. */
#define KVM_PROBE_MS 3000

/* What the loop's parts share; stop is set by the signals. */
static ctl the_ctl;

static void on_signal(int sig)
{
	(void)sig;
	the_ctl.stop = 1;
}

static void vm_init(const al_config *cfg, al_db *db);

/* The groups that bound what sandboxes write on the pool: a reserve that
 * leaves them nothing stops the controller here, not a create later. */
static int start_poolcap(const al_config *cfg)
{
	al_err err = {0};
	if (al_poolcap_init(cfg, &err) < 0) {
		al_error("pool caps: %s", err.msg);
		return -1;
	}
	return 0;
}

/* What must keep working when the pool is full lives off it; and every
 * sandbox's disk limit needs the pool's quotas on. */
static int init_pool(const al_config *cfg)
{
	static const char *const dirs[] = {"pg", "log", "keys", "run"};
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		char p[AL_PATH_MAX + 8];
		al_err err = {0};
		snprintf(p, sizeof p, "%s/%s", cfg->state_dir, dirs[i]);
		int on = al_store_on_pool(cfg->pool_dir, p, &err);
		if (on < 0 && err.code == AL_ENOENT)
			continue;
		if (on < 0) {
			al_error("checking %s: %s", p, err.msg);
			return -1;
		}
		if (on) {
			al_error("%s is on the pool's filesystem (%s): a full "
				 "pool would take it down; mount the pool as "
				 "a filesystem of its own",
				 p, cfg->pool_dir);
			return -1;
		}
	}
	al_err err = {0};
	if (al_store_quota_enable(cfg->pool_dir, &err) < 0) {
		al_error("disk quotas: %s", err.msg);
		return -1;
	}
	return start_poolcap(cfg);
}

/* The host CA (created on first start) in STATE/keys. */
static al_ca *open_ca(const al_config *cfg, al_err *err)
{
	char keys[AL_PATH_MAX + 8];
	snprintf(keys, sizeof keys, "%s/keys", cfg->state_dir);
	if (mkdir(keys, 0700) < 0 && errno != EEXIST) {
		al_err_sys(err, AL_ESYS, errno, "mkdir %s", keys);
		return NULL;
	}
	return al_ca_open(keys, err);
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
	/* Before the first template build: builds install its certificate. */
	al_ca *ca = open_ca(cfg, &err);
	if (ca == NULL) {
		al_error("%s", err.msg);
		return 111;
	}
	al_ca_close(ca);
	vm_init(cfg, db);
	return 0;
}

/* The vm side of --init; never fails --init, records why vm cannot run
 * instead (STATE/vm/unavailable, read by al_vm_usable). */
static void vm_init(const al_config *cfg, al_db *db)
{
	al_err err = {0};
	char why[700];
	if (!al_config_driver_enabled(cfg, "vm")) {
		al_info("vm driver disabled by AIRLOCK_DRIVERS=%s",
			cfg->drivers_setting);
		return;
	}
	if (access(AL_VM_QEMU, X_OK) < 0) {
		al_info("vm driver: %s not installed; only ns is available",
			AL_VM_QEMU);
		return;
	}
	al_vm_kernel k;
	if (al_vm_kernel_find(cfg->state_dir, &k, &err) < 0) {
		al_warn("vm driver unavailable: %s", err.msg);
		return;
	}
	int64_t t0 = al_now_ms();
	al_vm_accel accel = al_vm_probe(&k, KVM_PROBE_MS, why, sizeof why);
	al_info("vm accelerator: %s (%s; probe took %lld ms)",
		al_vm_accel_name(accel), why, (long long)(al_now_ms() - t0));
	if (al_vm_accel_save(cfg->state_dir, accel, &err) < 0) {
		al_warn("vm driver unavailable: %s", err.msg);
		snprintf(why, sizeof why, "%.400s", err.msg);
		goto unavailable;
	}

	al_template_ref refs[64];
	int nrefs = al_template_refs(db, refs, 64, &err);
	if (nrefs < 0) {
		snprintf(why, sizeof why, "listing templates: %.400s", err.msg);
		goto unavailable;
	}
	int ready = 0, failed = 0;
	why[0] = '\0';
	char vmroot[AL_PATH_MAX + 8];
	snprintf(vmroot, sizeof vmroot, "%s/vm", cfg->pool_dir);
	if (mkdir(vmroot, 0700) < 0 && errno != EEXIST)
		al_warn("mkdir %s: %s", vmroot, strerror(errno));
	for (int i = 0; i < nrefs; i++) {
		const char *name = refs[i].name;
		char root[AL_PATH_MAX], vmdir[AL_PATH_MAX];
		struct stat st;
		if (al_config_template_root(cfg, name, root, sizeof root,
					    &err) < 0 ||
		    al_vm_template_dir(cfg, name, vmdir, sizeof vmdir, &err) <
			    0 ||
		    stat(root, &st) < 0) {
			/* A row without a built filesystem (yet). */
			continue;
		}
		if (!al_vm_template_stale(root, cfg->state_dir, accel)) {
			ready++;
			continue;
		}
		al_info("template %s: building its VM image and snapshot "
			"(%s)",
			name, al_vm_accel_name(accel));
		t0 = al_now_ms();
		if (al_vm_template_build(root, vmdir, &k, accel,
					 cfg->vm_template_cache, NULL,
					 &err) < 0) {
			al_warn("template %s: no vm sandboxes: %s", name,
				err.msg);
			if (failed++ == 0)
				snprintf(why, sizeof why,
					 "building the VM snapshot of "
					 "template %.64s failed: %.400s",
					 name, err.msg);
			continue;
		}
		al_info("template %s: VM image and snapshot built in %lld ms",
			name, (long long)(al_now_ms() - t0));
		ready++;
	}
	/* One broken template does not take vm away from the others; a
	 * host where none can be built cannot run vm sandboxes at all. */
	if (ready == 0 && failed > 0)
		goto unavailable;
	if (al_vm_status_save(cfg->state_dir, NULL, &err) < 0)
		al_warn("%s", err.msg);
	return;
unavailable:
	al_warn("vm driver unavailable: %s", why);
	if (al_vm_status_save(cfg->state_dir, why, &err) < 0)
		al_warn("%s", err.msg);
}

int main(int argc, char **argv)
{
	int init = 0, once = 0, rotate = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--init") == 0)
			init = 1;
		else if (strcmp(argv[i], "--once") == 0)
			once = 1;
		else if (strcmp(argv[i], "--rotate-master-key") == 0)
			rotate = 1;
		else {
			fprintf(stderr, "usage: airlock-controller [--init]"
					" [--once] [--rotate-master-key]\n");
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
	if (init && init_pool(&cfg) < 0)
		return 111;
	if (!init && !rotate && start_poolcap(&cfg) < 0)
		return 111;
	al_db *db = al_db_open(cfg.db_conninfo, &err);
	if (db == NULL) {
		al_error("%s", err.msg);
		return 111;
	}
	if (rotate) {
		int rc = ctl_rotate_master_key(&cfg, db);
		al_db_close(db);
		return rc;
	}
	if (ctl_master_key_ensure(&cfg) < 0) {
		al_db_close(db);
		return 111;
	}
	if (init) {
		int rc = do_init(&cfg, db);
		al_db_close(db);
		return rc;
	}
	ctl *c = &the_ctl;
	c->cfg = &cfg;
	c->db = db;
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* Shims restoring vm sandboxes get the template RAM from here, so
	 * every clone of a template shares its pages. Without it they make
	 * private copies: slower, but still correct. */
	al_vmmem_server *vmmem = NULL;
	if (!once) {
		vmmem = al_vmmem_serve(cfg.run_dir, cfg.pool_dir, &err);
		if (vmmem == NULL)
			al_warn("template RAM service: %s", err.msg);
	}

	/* Gateways get their TLS leaves from here; without it HTTPS egress
	 * fails closed (no leaf, no handshake). */
	al_ca *ca = NULL;
	al_mintd *mintd = NULL;
	if (!once) {
		ca = open_ca(&cfg, &err);
		if (ca != NULL)
			mintd = ctl_mintd_start(cfg.state_dir, ca, &err);
		if (mintd == NULL)
			al_warn("mint service: %s", err.msg);
	}

	/* Gateways get their credentials from here (credsvc.h); without
	 * it they fail closed on every credential. */
	static ctl_credstore credstore;
	al_credsvc *credsvc = NULL;
	if (!once) {
		al_credsvc_store st;
		if (ctl_credstore_open(&credstore, &cfg, &st, &err) == 0)
			credsvc = ctl_credsvc_start(cfg.state_dir, &st, &err);
		if (credsvc == NULL)
			al_warn("credential service: %s", err.msg);
	}

	/* The policies' status GET /v1/info shows (core/policy/policypub.h). */
	if (!once)
		ctl_policywatch_start(&cfg);

	/* Snapshots made ahead for the starts of a burst (core/sandbox/spare.h). */
	if (!once) {
		char ready[AL_PATH_MAX + 32];
		snprintf(ready, sizeof ready, "%s/controller.ready",
			 cfg.run_dir);
		unlink(ready);
		ctl_spares_start(&cfg);
	}

	/* A shim's spooled event wakes the loop; the tick's scan catches
	 * whatever the watch missed (or all of them, without one). */
	int watch = al_spool_watch(&cfg, &err);
	if (watch < 0)
		al_warn("spool: %s (scanning each tick only)", err.msg);

	/* Without it, shims prepare their sandboxes' slots themselves (and
	 * fail the start where they cannot either). */
	static al_netpool netpool;
	if (al_netpool_open(&netpool, cfg.state_dir, cfg.net_pool, &err) == 0)
		c->net = &netpool;
	else
		al_warn("network slots: %s", err.msg);

	/* The pool is looked at every tick so a claimed standby is replaced
	 * at once; expiry and reconcile run on slower clocks. */
	int64_t last_expire = 0, last_reconcile = 0;
	while (!c->stop) {
		int64_t now = al_now_ms();
		if (al_db_ensure(db, &err) < 0) {
			al_warn("database: %s", err.msg);
			sleep(1);
			continue;
		}
		al_spool_watch_clear(watch);
		ctl_spool_drain(c);
		ctl_egress_ingest(&cfg, db,
				  once || now - last_reconcile >=
						  RECONCILE_EVERY_S * 1000);
		if (once || now - last_expire >= 1000) {
			ctl_expire(c);
			ctl_lifecycle_tick(c);
			ctl_lifecycle_policy_sweep(c);
			ctl_poolcaps_refresh(&cfg, NULL);
			last_expire = now;
		}
		if (once || now - last_reconcile >= RECONCILE_EVERY_S * 1000) {
			ctl_poolcaps_refresh(&cfg, db);
			ctl_reconcile(c);
			ctl_lifecycle_reconcile(c);
			al_vmmem_prune(vmmem);
			ctl_egress_retain(&cfg, db);
			ctl_audit_retain(&cfg, db);
			last_reconcile = now;
		}
		ctl_refill(c);
		if (!once) {
			ctl_refill_net(c);
			ctl_mark_ready(c);
		}
		if (once)
			break;
		struct pollfd p = {.fd = watch, .events = POLLIN};
		poll(&p, watch >= 0 ? 1 : 0, TICK_MS);
	}
	if (watch >= 0)
		close(watch);
	ctl_spares_stop();
	ctl_policywatch_stop();
	if (c->net != NULL && !once) {
		/* Leased slots stay with their sandboxes; ready ones are
		 * nobody's once no controller keeps them. */
		al_netpool_drain(&netpool, AL_NETSLOT_NS);
		al_netpool_drain(&netpool, AL_NETSLOT_VM);
	}
	al_vmmem_stop(vmmem);
	ctl_credsvc_stop(credsvc);
	ctl_credstore_close(&credstore);
	ctl_mintd_stop(mintd);
	al_ca_close(ca);
	al_db_close(db);
	return 0;
}
