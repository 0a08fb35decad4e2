/* The policy watch (see policywatch.h). */
#include "policywatch.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "base/log.h"
#include "policy/policy.h"
#include "policy/policypub.h"

/* A look at the files at least this often, watch or not. */
#define POLICYWATCH_TICK_MS 1000
/* Events closer together than this are one change: an editor's save (or
 * a write and a touch) is several, and a half-written file is not worth
 * a reload. */
#define POLICYWATCH_SETTLE_MS 100

static const struct {
	const char *name;
	const char *file;
	const al_policy_kind *kind;
	const char *unloaded; /* what the controller does without it */
} policies[] = {
	{"egress", "egress.lua", &al_policy_egress_kind, ""},
	{"lifecycle", "lifecycle.lua", &al_policy_lifecycle_kind,
	 " (until it loads: no idle suspend, no rolling snapshot, no"
	 " snapshot pruned)"},
};
/* The one the controller decides with itself (controller/lifecycle.c). */
#define LIFECYCLE 1
#define NPOLICIES (int)(sizeof policies / sizeof policies[0])

static struct {
	const al_config *cfg;
	pthread_t thread;
	int running;
	int inotify, stop; /* fds; the watch is -1 where inotify failed */
	/* Held while a policy is reloaded or the loop decides with one: an
	 * al_policy is one thread's at a time. */
	pthread_mutex_t lock;
	al_policy *p[NPOLICIES];
	char path[NPOLICIES][AL_PATH_MAX + 16];
	char error[NPOLICIES][AL_POLICY_ERROR_MAX]; /* why it never loaded */
} pw = {.inotify = -1, .stop = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

/* Open what never loaded, reload what changed; 1 when a status moved. */
static int look(void)
{
	int moved = 0;
	pthread_mutex_lock(&pw.lock);
	for (int i = 0; i < NPOLICIES; i++) {
		if (pw.p[i] != NULL) {
			moved |= al_policy_reload_if_changed(pw.p[i]) != 0;
			continue;
		}
		al_err err = {0};
		pw.p[i] = al_policy_open(pw.path[i], policies[i].kind, NULL,
					 &err);
		if (pw.p[i] != NULL || strcmp(err.msg, pw.error[i]) != 0) {
			if (pw.p[i] == NULL)
				al_error("%s policy: %s%s", policies[i].name,
					 err.msg, policies[i].unloaded);
			snprintf(pw.error[i], sizeof pw.error[i], "%s",
				 err.msg);
			moved = 1;
		}
	}
	pthread_mutex_unlock(&pw.lock);
	return moved;
}

static void publish(void)
{
	al_policypub v[NPOLICIES];
	pthread_mutex_lock(&pw.lock);
	for (int i = 0; i < NPOLICIES; i++)
		v[i] = (al_policypub){.name = policies[i].name,
				      .path = pw.path[i],
				      .p = pw.p[i],
				      .error = pw.error[i]};
	al_err err = {0};
	int rc = al_policypub_write(pw.cfg->run_dir, v, NPOLICIES, &err);
	pthread_mutex_unlock(&pw.lock);
	if (rc < 0)
		al_warn("policy status: %s", err.msg);
}

al_policy *ctl_policywatch_lifecycle(void)
{
	pthread_mutex_lock(&pw.lock);
	al_policy *p = pw.p[LIFECYCLE];
	if (p == NULL)
		pthread_mutex_unlock(&pw.lock);
	return p;
}

void ctl_policywatch_release(void)
{
	pthread_mutex_unlock(&pw.lock);
}

static void drain(int fd)
{
	char buf[4096];
	while (read(fd, buf, sizeof buf) > 0)
		;
}

static void *run(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p[2] = {{.fd = pw.stop, .events = POLLIN},
				      {.fd = pw.inotify, .events = POLLIN}};
		int n = poll(p, 2, POLICYWATCH_TICK_MS);
		if (p[0].revents != 0)
			break;
		if (n > 0 && p[1].revents != 0) {
			/* Let the change settle: wait for a quiet spell. */
			do
				drain(pw.inotify);
			while (poll(&p[1], 1, POLICYWATCH_SETTLE_MS) > 0);
		}
		if (look())
			publish();
	}
	return NULL;
}

int ctl_policywatch_start(const al_config *cfg)
{
	pw.cfg = cfg;
	for (int i = 0; i < NPOLICIES; i++)
		snprintf(pw.path[i], sizeof pw.path[i], "%s/%s",
			 cfg->policies_dir, policies[i].file);
	look();
	publish();
	pw.stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (pw.stop < 0) {
		al_warn("policy watch: eventfd: %s", strerror(errno));
		return -1;
	}
	pw.inotify = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (pw.inotify >= 0 &&
	    inotify_add_watch(pw.inotify, cfg->policies_dir,
			      IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM |
				      IN_CREATE | IN_DELETE | IN_ATTRIB) < 0) {
		al_warn("policy watch: %s: %s (a look each second only)",
			cfg->policies_dir, strerror(errno));
		close(pw.inotify);
		pw.inotify = -1;
	}
	if (pthread_create(&pw.thread, NULL, run, NULL) != 0) {
		al_warn("policy watch: no thread: the status stays as loaded"
			" at start");
		return -1;
	}
	pw.running = 1;
	return 0;
}

void ctl_policywatch_stop(void)
{
	if (pw.running) {
		uint64_t one = 1;
		if (write(pw.stop, &one, sizeof one) < 0)
			al_warn("policy watch: stop: %s", strerror(errno));
		pthread_join(pw.thread, NULL);
		pw.running = 0;
	}
	if (pw.inotify >= 0)
		close(pw.inotify);
	if (pw.stop >= 0)
		close(pw.stop);
	pw.inotify = pw.stop = -1;
	for (int i = 0; i < NPOLICIES; i++) {
		al_policy_close(pw.p[i]);
		pw.p[i] = NULL;
	}
	if (pw.cfg != NULL)
		al_policypub_withdraw(pw.cfg->run_dir);
}
