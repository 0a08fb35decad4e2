/* refill: see refill.h. */
#include "refill.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "model/sandbox.h"
#include "model/template.h"
#include "pool/store.h"
#include "sandbox/poolbounds.h"
#include "sandbox/shimctl.h"
#include "sandbox/standby.h"
#include "sandbox/warmpool.h"
#include "spares.h"
#include "vm/probe.h"
#include "vm/snapshot.h"

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
	al_poolbounds_in_effect(cfg, ref->pool, driver, &min, &max_own);
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

void ctl_refill_net(ctl *c)
{
	al_netpool *p = c->net;
	if (p == NULL)
		return;
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
		for (uint32_t i = 0; i < start && !c->stop; i++) {
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

/* run/controller.ready, once the first fill of the spare snapshots and
 * network slots after the start is done: `scripts/stack.sh up` waits
 * for it, so a burst right after it finds them. */
void ctl_mark_ready(ctl *c)
{
	static int marked;
	if (marked || !ctl_spares_filled() || (c->net != NULL && !net_filled))
		return;
	char path[AL_PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/controller.ready", c->cfg->run_dir);
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
void ctl_refill(ctl *c)
{
	const al_config *cfg = c->cfg;
	al_db *db = c->db;
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
	ctl_spares_set(names, versions, recent, count);
	for (int i = 0; i < count && !c->stop; i++) {
		refill_one(cfg, db, &refs[i], "ns",
			   recent_creates(rates, nrates, refs[i].name, "ns"));
		/* With the vm pool off this retires what is left of it. */
		uint32_t vmin, vmax;
		al_poolbounds_in_effect(cfg, refs[i].pool, "vm", &vmin, &vmax);
		if (vm_ok[i] || vmax == 0)
			refill_one(cfg, db, &refs[i], "vm",
				   recent_creates(rates, nrates, refs[i].name,
						  "vm"));
	}
	al_standby_end_retired(cfg);
}
