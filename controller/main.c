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
 *         (STATE/keys/ca.{key,crt}, core/gw/ca.h) if there is none, before
 *         any template is built. A vm failure never fails --init:
 *         it is logged and recorded as the reason the vm driver is
 *         unavailable (the ns driver does not need any of it). Exit.
 * --once  run one pass of the rules below and exit (tests).
 * --rotate-master-key  make a new master key current, re-encrypt every
 *         credential with it while the stack runs, remove the keys no
 *         credential uses any more, exit (controller/credentials.h).
 * default: run the time-based rules until SIGTERM:
 *   - the shims' spooled transitions (core/spool.h: a sandbox ended) are
 *     recorded in batches, one transaction each, as they appear (inotify)
 *     and on every tick; a file goes only once its batch committed;
 *   - sandboxes past expires_at are destroyed through their shim;
 *   - reconcile: live sandboxes whose shim is gone (and whose end is not
 *     waiting in the spool) are marked error and their resources
 *     released; a sandbox still creating long after its start with a
 *     shim is one whose starter died before recording it: it is
 *     destroyed (its client never got it); rootfs snapshots with no live sandbox
 *     or standby are deleted. Nothing leaks across a crash of any program;
 *   - the gateways' egress decisions (core/egress.h: run/egress/) are
 *     recorded in batches every tick and their files unlinked; rows
 *     older than AIRLOCK_EGRESS_RETENTION_DAYS are deleted;
 *   - warm pool: AIRLOCK_WARM_POOL ns standbys and (while the vm driver
 *     is usable and the template has its VM snapshot) AIRLOCK_WARM_POOL_VM
 *     vm standbys per template at the least are kept ready, so that a
 *     create claims one instead of starting cold; up to the _MAX
 *     variables while creates come (core/warmpool.h);
 *   - network slots (core/net/pool.h): enough ready of each kind for
 *     the creates and standby starts to come, sized like the warm pool
 *     from the create rate, prepared here off every create's path;
 *     reconcile removes the slots of shims that died; at stop the ready
 *     ones are removed;
 *   - credential audit rows older than AIRLOCK_AUDIT_RETENTION_DAYS are
 *     deleted; the first master key (STATE/keys/master-1.key) is made
 *     at start if there is none;
 *   - a thread serves STATE/run/mint.sock: TLS leaves for the sandboxes'
 *     gateways, signed with the host CA (controller/mint.h);
 *   - a thread loads the operator's policies, reloads them as their files
 *     change and publishes their status for GET /v1/info in
 *     STATE/run/policies.json (controller/policywatch.h).
 * Exit codes: 0 ok, 100 usage, 111 temporary failure (database down). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "airlockfile.h"
#include "auth.h"
#include "cgroup.h"
#include "config.h"
#include "credentials.h"
#include "credstore.h"
#include "credsvc.h"
#include "db.h"
#include "egress_ingest.h"
#include "gw/ca.h"
#include "log.h"
#include "mint.h"
#include "net/pool.h"
#include "policywatch.h"
#include "poolcap.h"
#include "poolcaps.h"
#include "reap.h"
#include "sandbox.h"
#include "shimctl.h"
#include "spares.h"
#include "spool.h"
#include "standby.h"
#include "store.h"
#include "template.h"
#include "vm/mem.h"
#include "vm/probe.h"
#include "vm/snapshot.h"
#include "warmpool.h"

#define RECONCILE_EVERY_S 10
#define TICK_MS 100
/* A sandbox may sit in "creating" this long before a missing shim counts
 * as a failed start rather than one in progress. */
#define CREATING_GRACE_S 60
/* How long the KVM probe may take to see the guest init. */
#define KVM_PROBE_MS 3000
/* Spooled events recorded in one transaction. */
#define SPOOL_BATCH 256

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
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
		if (al_sandbox_transition(db, ids[i], AL_EV_DELETE, "expired",
					  &e2) < 0)
			al_warn("sandbox %s: %s", ids[i], e2.msg);
	}
	free(ids);
}

/* A batch PostgreSQL refused while its connection works: record the
 * events one by one, and put aside (run/events/bad/) each one refused
 * on its own, so that one event cannot hold every later one back. 0,
 * or -1 when the database went away (the rest wait). */
static int apply_one_by_one(const al_config *cfg, al_db *db,
			    const al_spool_entry *ents, int n)
{
	for (int i = 0; i < n; i++) {
		al_err err = {0};
		int applied = 0;
		if (al_sandbox_record_events(db, &ents[i].e, 1, &applied,
					     &err) == 0) {
			al_spool_ack(cfg, &ents[i]);
			continue;
		}
		if (err.code == AL_EUNAVAIL)
			return -1;
		al_spool_reject(cfg, &ents[i], err.msg);
	}
	return 0;
}

/* Record what the shims spooled, a batch per transaction, and take each
 * file away once its batch is committed. PostgreSQL down: the files
 * wait for the next pass. */
static void apply_spool(const al_config *cfg, al_db *db)
{
	static al_spool_entry ents[SPOOL_BATCH];
	static al_sandbox_event evs[SPOOL_BATCH];
	for (;;) {
		al_err err = {0};
		int n = al_spool_read(cfg, ents, SPOOL_BATCH, &err);
		if (n < 0)
			al_warn("spool: %s", err.msg);
		if (n <= 0)
			return;
		for (int i = 0; i < n; i++)
			evs[i] = ents[i].e;
		int applied = 0;
		if (al_sandbox_record_events(db, evs, n, &applied, &err) < 0) {
			al_warn("spool: recording %d events: %s%s", n, err.msg,
				err.code == AL_EUNAVAIL ? " (they wait)"
							: " (one by one now)");
			if (err.code == AL_EUNAVAIL ||
			    apply_one_by_one(cfg, db, ents, n) < 0)
				return;
			continue;
		}
		for (int i = 0; i < n; i++)
			al_spool_ack(cfg, &ents[i]);
		al_info("spool: recorded %d events (%d changed a sandbox)", n,
			applied);
		if (n < SPOOL_BATCH)
			return;
	}
}

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
static void reconcile_live(const al_config *cfg, al_db *db)
{
	al_err err = {0};
	char(*ids)[64] = NULL;
	int n = 0;
	apply_spool(cfg, db);
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
		al_sandbox_free_fields(&sb);
		if (young)
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
		if (shim_present(cfg, de->d_name) ||
		    al_standby_alive(cfg, de->d_name))
			continue;
		al_info("deleting orphaned rootfs of %s", de->d_name);
		if (al_reap_sandbox(cfg, de->d_name, &err) < 0)
			al_warn("sandbox %s: %s", de->d_name, err.msg);
	}
	closedir(d);
}

/* (template, driver) pairs whose standby failed to start recently, so
 * a broken template is retried every POOL_BACKOFF_S rather than every
 * tick. */
#define POOL_BACKOFF_S 30
static struct {
	char key[80];
	time_t until;
} pool_backoff[128];

static time_t *backoff_slot(const char *name, const char *driver)
{
	char key[80];
	snprintf(key, sizeof key, "%s.%s", name, driver);
	for (size_t i = 0; i < sizeof pool_backoff / sizeof pool_backoff[0];
	     i++) {
		if (strcmp(pool_backoff[i].key, key) == 0 ||
		    pool_backoff[i].key[0] == '\0') {
			snprintf(pool_backoff[i].key,
				 sizeof pool_backoff[i].key, "%s", key);
			return &pool_backoff[i].until;
		}
	}
	return NULL;
}

/* Standbys started at once for one template and driver in a tick: a
 * burst refills in a few ticks without a host of boots at once. */
#define POOL_STARTS_PER_TICK 4

static void refill_one(const al_config *cfg, al_db *db,
		       const al_template_ref *ref, const char *driver,
		       uint32_t recent)
{
	const char *name = ref->name;
	uint32_t min, max_own;
	al_template_pool_bounds(cfg, ref->pool, driver, &min, &max_own);
	if (max_own == 0) {
		/* The pool was switched off: standbys left from before only
		 * cost memory (and, idle under TCG, CPU). */
		al_standby_retire_all(cfg, name, driver);
		return;
	}
	time_t *until = backoff_slot(name, driver);
	if (until == NULL || time(NULL) < *until)
		return;
	uint64_t avail_mb, total_mb;
	al_warmpool_host_mem(&avail_mb, &total_mb);
	uint32_t max = al_warmpool_cap(min, max_own, avail_mb, total_mb);
	uint32_t target = al_warmpool_target(min, max, recent);
	int have = al_standby_count(cfg, name, driver, ref->version);
	uint32_t start, extra;
	al_warmpool_plan((uint32_t)have, target, POOL_STARTS_PER_TICK, &start,
			 &extra);
	if (extra > 0) {
		al_standby_retire_some(cfg, name, driver, (int)extra);
		return;
	}
	if (start == 0)
		return;
	al_err err = {0};
	/* A standby is a create: none while the pool is full. */
	if (al_store_room(cfg->pool_dir, cfg->pool_full_pct, &err) < 0 ||
	    al_shimctl_spawn_standbys(cfg, db, name, ref->version, driver,
				      (int)start, al_now_ms() + 30000,
				      &err) < 0) {
		al_warn("warm pool of %s (%s): %s", name, driver, err.msg);
		*until = time(NULL) + POOL_BACKOFF_S;
	}
}

/* Creates of (name, driver) in the window the pool is sized from. */
static uint32_t recent_creates(const al_sandbox_creates *c, int n,
			       const char *name, const char *driver)
{
	for (int i = 0; i < n; i++)
		if (strcmp(c[i].template_name, name) == 0 &&
		    strcmp(c[i].driver, driver) == 0)
			return c[i].creates;
	return 0;
}

/* Creates per driver (ns, vm) in the warm pool's window: the ready
 * network slots follow them. */
static uint32_t recent_by_kind[2];

/* Ready network slots: at least NET_READY_MIN of a kind (a standby
 * start or a cold create takes one each), up to NET_READY_MAX while
 * creates come; NET_PREPARES_PER_TICK prepares (4 to 8 ms each) a tick
 * at most, so the tick stays short. A burst past them costs its creates
 * one prepare each, and 32 prepares at once queue on the kernel's
 * namespace and rtnl locks (the largest step of a burst's starts, 130
 * to 350 ms each). Not more: a ready slot holds two namespaces (about
 * 0.2 MiB of kernel memory each here) and two mounts in the host's
 * mount namespace, which each jail's clone copies. */
#define NET_READY_MIN 32
#define NET_READY_MAX 64
#define NET_PREPARES_PER_TICK 8

/* 1 once the ready ns slots reached their target (the first fill after
 * the start is done). */
static int net_filled;

static void refill_net(al_netpool *p)
{
	for (int kind = AL_NETSLOT_NS; kind <= AL_NETSLOT_VM; kind++) {
		uint32_t target = al_warmpool_target(NET_READY_MIN,
						     NET_READY_MAX,
						     recent_by_kind[kind]);
		uint32_t start, extra;
		uint32_t have = al_netpool_ready(p, (al_netslot_kind)kind);
		if (kind == AL_NETSLOT_NS && have >= target)
			net_filled = 1;
		al_warmpool_plan(have, target, NET_PREPARES_PER_TICK, &start,
				 &extra);
		for (uint32_t i = 0; i < start && !stop_requested; i++) {
			al_err err = {0};
			if (al_netpool_prepare(p, (al_netslot_kind)kind, &err) <
			    0) {
				al_warn("network slots (%s): %s",
					al_netslot_kind_name((al_netslot_kind)
								     kind),
					err.msg);
				break;
			}
		}
	}
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

/* run/controller.ready, once the first fill of the spare snapshots and
 * network slots after the start is done: `scripts/stack.sh up` waits
 * for it, so a burst right after it finds them. */
static void mark_ready(const al_config *cfg, int net_ok)
{
	static int marked;
	if (marked || !spares_filled() || (net_ok && !net_filled))
		return;
	char path[AL_PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/controller.ready", cfg->run_dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	marked = 1;
	al_info("spare snapshots and network slots ready");
}

/* The templates as last listed (al_template_refs), for
 * al_standby_retire_unless. */
typedef struct listing {
	const al_template_ref *refs;
	int n;
	int complete; /* every template is in refs */
} listing;

/* Keep a standby of tmpl's current version; none of a template that is
 * no more. */
static int current(const char *tmpl, const char *driver, int version, void *arg)
{
	const listing *l = arg;
	(void)driver;
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->refs[i].name, tmpl) == 0)
			return l->refs[i].version == version;
	return !l->complete;
}

/* Keep the configured standbys ready for each template and driver, so a
 * create is a claim rather than a cold start. */
static void refill_pool(const al_config *cfg, al_db *db)
{
	/* Template names, their own pool bounds (and whether vm standbys
	 * can be made of them), re-read every few seconds rather than each
	 * tick: a PUT .../warm_pool takes effect within 5 s. */
	static al_template_ref refs[64];
	static int vm_ok[64];
	static int count;
	static int64_t loaded_at = -1000000;
	if (al_now_ms() - loaded_at >= 5000) {
		al_err err = {0};
		int n = al_template_refs(db, refs, 64, &err);
		if (n < 0) {
			al_warn("listing templates: %s", err.msg);
			return;
		}
		char why[300];
		int vm = al_vm_usable(cfg->state_dir, why, sizeof why);
		count = n;
		/* A rebuilt template's older standbys go, and a deleted
		 * one's (a delete retires them itself: these are those a
		 * start in flight made meanwhile). */
		listing l = {.refs = refs, .n = n, .complete = n < 64};
		al_standby_retire_unless(cfg, current, &l);
		for (int i = 0; i < count; i++) {
			const char *name = refs[i].name;
			char root[AL_PATH_MAX];
			vm_ok[i] = vm &&
				   al_config_template_root(cfg, name, root,
							   sizeof root,
							   &err) == 0 &&
				   al_vm_template_ready(root, why, sizeof why);
		}
		loaded_at = al_now_ms();
	}
	/* The create rate, once a second: the pool follows it on a scale
	 * of seconds, not ticks. */
	static al_sandbox_creates rates[128];
	static int nrates;
	static int64_t rates_at = -1000000;
	if (al_now_ms() - rates_at >= 1000) {
		al_err err = {0};
		if (al_sandbox_recent_creates(db, cfg->warm_pool_window_s,
					      rates, 128, &nrates, &err) < 0) {
			al_warn("counting recent creates: %s", err.msg);
			nrates = 0;
		}
		rates_at = al_now_ms();
		recent_by_kind[AL_NETSLOT_NS] = recent_by_kind[AL_NETSLOT_VM] =
			0;
		for (int i = 0; i < nrates; i++)
			recent_by_kind[strcmp(rates[i].driver, "vm") == 0
					       ? AL_NETSLOT_VM
					       : AL_NETSLOT_NS] +=
				rates[i].creates;
	}
	/* Spare snapshots follow every driver's creates. */
	static char names[64][64];
	static int versions[64];
	static uint32_t recent[64];
	for (int i = 0; i < count; i++) {
		memcpy(names[i], refs[i].name, sizeof names[i]);
		versions[i] = refs[i].version;
		recent[i] = recent_creates(rates, nrates, refs[i].name, "ns") +
			    recent_creates(rates, nrates, refs[i].name, "vm");
	}
	spares_set(names, versions, recent, count);
	for (int i = 0; i < count && !stop_requested; i++) {
		refill_one(cfg, db, &refs[i], "ns",
			   recent_creates(rates, nrates, refs[i].name, "ns"));
		/* With the vm pool off this retires what is left of it. */
		uint32_t vmin, vmax;
		al_template_pool_bounds(cfg, refs[i].pool, "vm", &vmin, &vmax);
		if (vm_ok[i] || vmax == 0)
			refill_one(cfg, db, &refs[i], "vm",
				   recent_creates(rates, nrates, refs[i].name,
						  "vm"));
	}
	al_standby_end_retired(cfg);
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
			mintd = al_mintd_start(cfg.state_dir, ca, &err);
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
			credsvc = al_credsvc_start(cfg.state_dir, &st, &err);
		if (credsvc == NULL)
			al_warn("credential service: %s", err.msg);
	}

	/* The policies' status GET /v1/info shows (core/policypub.h). */
	if (!once)
		policywatch_start(&cfg);

	/* Snapshots made ahead for the starts of a burst (core/spare.h). */
	if (!once) {
		char ready[AL_PATH_MAX + 32];
		snprintf(ready, sizeof ready, "%s/controller.ready",
			 cfg.run_dir);
		unlink(ready);
		spares_start(&cfg);
	}

	/* A shim's spooled event wakes the loop; the tick's scan catches
	 * whatever the watch missed (or all of them, without one). */
	int watch = al_spool_watch(&cfg, &err);
	if (watch < 0)
		al_warn("spool: %s (scanning each tick only)", err.msg);

	/* Without it, shims prepare their sandboxes' slots themselves (and
	 * fail the start where they cannot either). */
	static al_netpool netpool;
	int net_ok = al_netpool_open(&netpool, cfg.state_dir, NULL, &err) == 0;
	if (!net_ok)
		al_warn("network slots: %s", err.msg);

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
		al_spool_watch_clear(watch);
		apply_spool(&cfg, db);
		ctl_egress_ingest(&cfg, db,
				  once || now - last_reconcile >=
						  RECONCILE_EVERY_S * 1000);
		if (once || now - last_expire >= 1000) {
			expire(&cfg, db);
			ctl_poolcaps_refresh(&cfg, NULL);
			last_expire = now;
		}
		if (once || now - last_reconcile >= RECONCILE_EVERY_S * 1000) {
			ctl_poolcaps_refresh(&cfg, db);
			reconcile_live(&cfg, db);
			reconcile_builds(db);
			al_standby_reap(&cfg);
			reconcile_pool(&cfg, db);
			if (net_ok)
				reconcile_net(&netpool);
			al_vmmem_prune(vmmem);
			ctl_egress_retain(&cfg, db);
			ctl_audit_retain(&cfg, db);
			last_reconcile = now;
		}
		refill_pool(&cfg, db);
		if (net_ok && !once)
			refill_net(&netpool);
		if (!once)
			mark_ready(&cfg, net_ok);
		if (once)
			break;
		struct pollfd p = {.fd = watch, .events = POLLIN};
		poll(&p, watch >= 0 ? 1 : 0, TICK_MS);
	}
	if (watch >= 0)
		close(watch);
	spares_stop();
	policywatch_stop();
	if (net_ok && !once) {
		/* Leased slots stay with their sandboxes; ready ones are
		 * nobody's once no controller keeps them. */
		al_netpool_drain(&netpool, AL_NETSLOT_NS);
		al_netpool_drain(&netpool, AL_NETSLOT_VM);
	}
	al_vmmem_stop(vmmem);
	al_credsvc_stop(credsvc);
	ctl_credstore_close(&credstore);
	al_mintd_stop(mintd);
	al_ca_close(ca);
	al_db_close(db);
	return 0;
}
