/* shim gateway: the sandbox's egress gateway process (gateway.h). */
#include "gateway.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "credclient.h"
#include "log.h"
#include "net/addr.h"
#include "shim.h"

/* What the gateway gets of the shim's environment (the gateway process
 * contract), and nothing else. AIRLOCK_STATE and AIRLOCK_POLICIES come
 * from the shim's configuration, their defaults resolved. */
static const char *const gw_env_names[] = {
	"AIRLOCK_UPSTREAM_DNS",
	"AIRLOCK_UPSTREAM_HOSTS",
	"AIRLOCK_UPSTREAM_CA",
	"AIRLOCK_UPSTREAM_ALLOW_CIDRS",
};
#define GW_ENV_N (2 + sizeof gw_env_names / sizeof gw_env_names[0])

void shim_gwproc_init(shim_gwproc *g)
{
	memset(g, 0, sizeof *g);
	g->uid.lock_fd = -1;
	g->pidfd = -1;
}

/* Kill and reap the running one (if any). */
static void proc_end(shim_gwproc *g)
{
	if (g->pid > 0) {
		syscall(SYS_pidfd_send_signal, g->pidfd, SIGKILL, NULL, 0);
		/* ECHILD: the relay's SIGCHLD loop reaped it already. */
		siginfo_t si;
		waitid(P_PIDFD, (id_t)g->pidfd, &si, WEXITED);
	}
	if (g->pidfd >= 0)
		close(g->pidfd);
	g->pid = 0;
	g->pidfd = -1;
}

/* The next start, later each time (bounded restarts). */
static void schedule(shim_gwproc *g)
{
	g->next_start_ms = al_now_ms() + g->backoff_ms;
	g->backoff_ms *= 2;
	if (g->backoff_ms > SHIM_GW_BACKOFF_MAX_MS)
		g->backoff_ms = SHIM_GW_BACKOFF_MAX_MS;
}

/* Start it now and hand its control fd to netctl; a failure is logged
 * and the next try scheduled. */
static void launch(shim *s)
{
	shim_gwproc *g = &s->gwproc;
	char envbuf[GW_ENV_N][AL_PATH_MAX + 64];
	char *env[GW_ENV_N + 1];
	size_t ne = 0;
	for (size_t i = 0; i < GW_ENV_N; i++) {
		const char *name = i == 0   ? "AIRLOCK_STATE"
				   : i == 1 ? "AIRLOCK_POLICIES"
					    : gw_env_names[i - 2];
		const char *v = i == 0	 ? s->cfg.state_dir
				: i == 1 ? s->cfg.policies_dir
					 : getenv(name);
		if (v == NULL)
			continue;
		int w = snprintf(envbuf[ne], sizeof envbuf[ne], "%s=%s", name,
				 v);
		if (w > 0 && (size_t)w < sizeof envbuf[ne]) {
			env[ne] = envbuf[ne];
			ne++;
		}
	}
	env[ne] = NULL;
	al_gateway_spec spec = {
		.slot = g->slot,
		.uid = g->uid.base,
		.gid = g->uid.base,
		.sandbox = s->sb.id,
		.prog = g->prog,
		.env = env,
		.run_dir = s->cfg.run_dir,
		/* Not the sandbox's cgroup: the guest would share the
		 * gateway's memory and pids limits, and could starve it. */
		.cgroup_fd = -1,
	};
	al_gateway_proc p;
	al_err err = {0};
	g->starts++;
	g->next_start_ms = 0;
	/* Its credential channel (fd 7); without a controller it starts
	 * with none, fails closed on credentials and asks again (fd 6). */
	spec.cred_fd = al_credclient_open(s->cfg.state_dir, s->sb.id, &err);
	if (spec.cred_fd < 0)
		al_info("sandbox %s: gateway starts without credentials: %s",
			s->sb.id, err.msg);
	int rc = al_gateway_launch(&spec, &p, &err);
	if (spec.cred_fd >= 0)
		close(spec.cred_fd);
	if (rc < 0) {
		al_warn("sandbox %s: gateway: %s (again in %d ms; no egress "
			"until then)",
			s->sb.id, err.msg, g->backoff_ms);
		schedule(g);
		return;
	}
	g->pid = p.pid;
	g->pidfd = p.pidfd;
	g->started_ms = al_now_ms();
	/* netctl owns the control fd from here (closed on failure: the
	 * gateway then exits, and its pidfd says so). */
	if (shim_netctl_attach(s, p.control_fd, g->addr, 0, &err) < 0)
		al_warn("sandbox %s: gateway control: %s", s->sb.id, err.msg);
}

int shim_gwproc_begin(shim *s, const al_netslot *slot, al_err *err)
{
	shim_gwproc *g = &s->gwproc;
	if (g->on)
		return 0;
	g->slot = slot;
	al_net_addr_format(slot->addr.gateway, g->addr);
	const char *prog = getenv(SHIM_GW_PROG_ENV);
	int w = prog != NULL && prog[0] == '/'
			? snprintf(g->prog, sizeof g->prog, "%s", prog)
			: snprintf(g->prog, sizeof g->prog,
				   "%s/airlock-gateway", s->cfg.libexec_dir);
	if (w < 0 || (size_t)w >= sizeof g->prog)
		return al_err_set(err, AL_EINVAL, 0, "gateway path too long");
	if (al_uidrange_take(&al_uidrange_gw, s->sb.id, &g->uid, err) < 0)
		return -1;
	g->on = 1;
	g->backoff_ms = SHIM_GW_BACKOFF_MIN_MS;
	/* Off the create's path: the relay's first turn starts it, once
	 * the starter has its answer. */
	g->next_start_ms = al_now_ms();
	return 0;
}

int shim_gwproc_poll(shim *s, struct pollfd *pfd, int *who, int n)
{
	if (s->gwproc.pid <= 0)
		return n;
	pfd[n] = (struct pollfd){.fd = s->gwproc.pidfd, .events = POLLIN};
	who[n++] = SHIM_WHO_GWPROC;
	return n;
}

/* It died: no egress until the next start, which waits longer each time
 * unless the last one ran for a while. */
void shim_gwproc_event(shim *s, short revents)
{
	shim_gwproc *g = &s->gwproc;
	if (g->pid <= 0 || revents == 0)
		return;
	int64_t ran = al_now_ms() - g->started_ms;
	if (ran >= SHIM_GW_STABLE_MS)
		g->backoff_ms = SHIM_GW_BACKOFF_MIN_MS;
	al_warn("sandbox %s: gateway (pid %d) ended after %lld ms; "
		"restarting in %d ms, no egress until then",
		s->sb.id, (int)g->pid, (long long)ran, g->backoff_ms);
	shim_netctl_detach(s, "the gateway ended");
	proc_end(g);
	schedule(g);
}

int shim_gwproc_timeout(const shim *s, int64_t now)
{
	const shim_gwproc *g = &s->gwproc;
	if (!g->on || g->pid > 0 || g->next_start_ms == 0)
		return -1;
	return g->next_start_ms <= now ? 0 : (int)(g->next_start_ms - now);
}

void shim_gwproc_tick(shim *s, int64_t now)
{
	shim_gwproc *g = &s->gwproc;
	if (g->on && g->pid <= 0 && g->next_start_ms != 0 &&
	    g->next_start_ms <= now)
		launch(s);
}

void shim_gwproc_end(shim *s)
{
	shim_gwproc *g = &s->gwproc;
	if (!g->on)
		return;
	shim_netctl_detach(s, "the sandbox ended");
	proc_end(g);
	al_uidrange_drop(&g->uid);
	al_gateway_state_remove(s->cfg.run_dir, s->sb.id);
	g->on = 0;
}
