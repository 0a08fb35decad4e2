/* The spare-snapshot maker (see spares.h). */
#include "spares.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/log.h"
#include "model/template.h"
#include "pool/store.h"
#include "proto/agentproto.h"
#include "sandbox/spare.h"

#define SPARES_TEMPLATES 64
#define SPARES_TICK_MS 100
/* No spare is made while starts are taking them, nor this long after the
 * last take: a snapshot's commit stalls every btrfs operation of the
 * starts it would serve (their renames, qgroup limits, writes). The
 * pool is sized to serve a burst from what was made before it. */
#define SPARES_QUIET_MS 300

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	int running, stop, known; /* known: ctl_spares_set was called */
	int filled;		  /* a look found none short */
	const al_config *cfg;
	int n;
	char name[SPARES_TEMPLATES][64];
	int version[SPARES_TEMPLATES];
	uint32_t target[SPARES_TEMPLATES];
	int seen[SPARES_TEMPLATES];	    /* spares at the last look */
	int64_t taken_ms[SPARES_TEMPLATES]; /* when a look found fewer */
} sp = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* Under sp.mu (al_spare_prune's callback). */
static int current(const char *name, int version, char *src, size_t srclen,
		   void *arg)
{
	const al_config *cfg = arg;
	for (int i = 0; i < sp.n; i++)
		if (strcmp(sp.name[i], name) == 0)
			return sp.version[i] == version &&
			       al_template_version_rootfs(cfg, name, version,
							  src, srclen,
							  NULL) == 0;
	/* Not known yet: kept, and compared with its own version's. */
	return !sp.known && al_template_version_rootfs(cfg, name, version, src,
						       srclen, NULL) == 0;
}

/* One spare for the first template short of its target; 0 when none is. */
static int make_one(const al_config *cfg)
{
	char name[64], src[AL_PATH_MAX];
	int version = 0, found = 0;
	pthread_mutex_lock(&sp.mu);
	al_spare_prune(cfg, current, (void *)cfg);
	int64_t now = al_now_ms();
	for (int i = 0; i < sp.n && !found; i++) {
		char root[AL_PATH_MAX];
		if (al_template_version_rootfs(cfg, sp.name[i], sp.version[i],
					       root, sizeof root, NULL) < 0)
			continue;
		int have = al_spare_count(cfg, sp.name[i], sp.version[i], root);
		if (have < sp.seen[i])
			sp.taken_ms[i] = now;
		sp.seen[i] = have;
		if (have >= (int)sp.target[i] ||
		    now - sp.taken_ms[i] < SPARES_QUIET_MS)
			continue;
		memcpy(name, sp.name[i], sizeof name);
		version = sp.version[i];
		found = 1;
	}
	if (!found && sp.known)
		sp.filled = 1;
	pthread_mutex_unlock(&sp.mu);
	if (!found)
		return 0;
	al_err err = {0};
	struct stat st;
	if (al_template_version_rootfs(cfg, name, version, src, sizeof src,
				       &err) < 0 ||
	    stat(src, &st) < 0)
		return 0; /* not a versioned template: starts snapshot it */
	if (al_store_room(cfg->pool_dir, cfg->pool_full_pct, &err) < 0 ||
	    al_spare_make(cfg, name, version, src, &err) < 0) {
		al_warn("spares of %s: %s", name, err.msg);
		return -1;
	}
	return 1;
}

static void *spares_main(void *arg)
{
	const al_config *cfg = arg;
	pthread_mutex_lock(&sp.mu);
	while (!sp.stop) {
		pthread_mutex_unlock(&sp.mu);
		int made = make_one(cfg);
		pthread_mutex_lock(&sp.mu);
		if (made == 1)
			continue;
		/* Nothing short (or quiet), or trouble: wait for news, or the
		 * tick (a failure waits longer). */
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		long ms = made < 0 ? 5000 : SPARES_TICK_MS;
		t.tv_sec += ms / 1000;
		t.tv_nsec += (ms % 1000) * 1000000L;
		if (t.tv_nsec >= 1000000000L) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000L;
		}
		if (!sp.stop)
			pthread_cond_timedwait(&sp.cv, &sp.mu, &t);
	}
	pthread_mutex_unlock(&sp.mu);
	return NULL;
}

int ctl_spares_start(const al_config *cfg)
{
	sp.cfg = cfg;
	/* Signals are the main loop's (they end its poll). */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&sp.thread, NULL, spares_main, (void *)cfg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		al_warn("spare snapshots: no thread; starts snapshot "
			"themselves");
		return -1;
	}
	sp.running = 1;
	return 0;
}

void ctl_spares_set(const char (*name)[64], const int *version,
		    const uint32_t *recent, int n)
{
	pthread_mutex_lock(&sp.mu);
	sp.n = n < SPARES_TEMPLATES ? n : SPARES_TEMPLATES;
	for (int i = 0; i < sp.n; i++) {
		if (strcmp(sp.name[i], name[i]) != 0 ||
		    sp.version[i] != version[i])
			sp.seen[i] = sp.taken_ms[i] = 0;
		memcpy(sp.name[i], name[i], sizeof sp.name[i]);
		sp.version[i] = version[i];
		uint32_t t = recent[i];
		sp.target[i] = t < SPARES_MIN	? SPARES_MIN
			       : t > SPARES_MAX ? SPARES_MAX
						: t;
	}
	sp.known = 1;
	pthread_cond_signal(&sp.cv);
	pthread_mutex_unlock(&sp.mu);
}

int ctl_spares_filled(void)
{
	pthread_mutex_lock(&sp.mu);
	int f = sp.filled || !sp.running;
	pthread_mutex_unlock(&sp.mu);
	return f;
}

void ctl_spares_stop(void)
{
	if (!sp.running)
		return;
	pthread_mutex_lock(&sp.mu);
	sp.stop = 1;
	pthread_cond_signal(&sp.cv);
	pthread_mutex_unlock(&sp.mu);
	pthread_join(sp.thread, NULL);
	sp.running = 0;
}
