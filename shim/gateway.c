/* shim gateway: the sandbox's egress gateway process (gateway.h). */
#include "gateway.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/addr.h"
#include "base/clock.h"
#include "base/log.h"
#include "cred/credclient.h"

void shim_gwproc_init(shim_gwproc *g)
{
	memset(g, 0, sizeof *g);
	g->uid.lock_fd = -1;
	g->pidfd = -1;
	for (int i = 0; i < 3; i++)
		g->socks[i] = -1;
}

/* Kill and reap the running one (if any). */
static void proc_end(shim_gwproc *g)
{
	al_gateway_end(&g->pid, &g->pidfd);
}

/* The next start, later each time (bounded restarts). */
static void schedule(shim_gwproc *g)
{
	g->next_start_ms = al_now_ms() + g->backoff_ms;
	g->backoff_ms *= 2;
	if (g->backoff_ms > SHIM_GW_BACKOFF_MAX_MS)
		g->backoff_ms = SHIM_GW_BACKOFF_MAX_MS;
}

/* Start it now: its control fd, or -1 when the start failed (logged,
 * the next try scheduled). */
static int launch(shim_gwproc *g)
{
	/* AIRLOCK_STATE, AIRLOCK_POLICIES and the egress log's rate from the
	 * shim's configuration, their defaults resolved. */
	static al_gateway_env env;
	al_gateway_env_fill(&env, g->cfg);
	al_gateway_spec spec = {
		.slot = g->slot,
		.uid = g->uid.base,
		.gid = g->uid.base,
		.sandbox = g->sandbox,
		.prog = g->prog,
		.env = env.env,
		.run_dir = g->cfg->run_dir,
		/* Charged to the sandbox: what its guest makes the gateway
		 * spend comes out of its own limits. Both drivers name the
		 * leaf after the sandbox (a claimed standby's is renamed
		 * before it goes live). */
		.cgroup = g->sandbox,
		.sockets = g->socks[0] >= 0 ? g->socks : NULL,
	};
	al_gateway_proc p;
	al_err err = {0};
	g->starts++;
	g->next_start_ms = 0;
	/* Its credential channel (fd 7); without a controller it starts
	 * with none, fails closed on credentials and asks again (fd 6). */
	spec.cred_fd = al_credclient_open(g->cfg->state_dir, g->sandbox, &err);
	if (spec.cred_fd < 0)
		al_info("sandbox %s: gateway starts without credentials: %s",
			g->sandbox, err.msg);
	int rc = al_gateway_launch(&spec, &p, &err);
	if (spec.cred_fd >= 0)
		close(spec.cred_fd);
	if (rc < 0) {
		al_warn("sandbox %s: gateway: %s (again in %d ms; no egress "
			"until then)",
			g->sandbox, err.msg, g->backoff_ms);
		schedule(g);
		return -1;
	}
	g->pid = p.pid;
	g->pidfd = p.pidfd;
	g->started_ms = al_now_ms();
	return p.control_fd;
}

int shim_gwproc_begin(shim_gwproc *g, const al_config *cfg, const char *sandbox,
		      const al_netslot *slot, al_err *err)
{
	if (g->on)
		return 0;
	g->cfg = cfg;
	g->sandbox = sandbox;
	g->slot = slot;
	al_net_addr_format(slot->addr.gateway, g->addr);
	if (al_gateway_prog(cfg->libexec_dir, g->prog, sizeof g->prog, err) < 0)
		return -1;
	if (al_uidrange_take(&al_uidrange_gw, sandbox, &g->uid, err) < 0)
		return -1;
	g->on = 1;
	g->backoff_ms = SHIM_GW_BACKOFF_MIN_MS;
	al_err sock_err = {0};
	if (al_gateway_sockets(slot, g->socks, &sock_err) < 0) {
		/* Each launch makes its own, the first at the relay's next
		 * turn (after the create is answered). */
		al_warn("sandbox %s: gateway sockets: %s (the gateway starts "
			"now)",
			sandbox, sock_err.msg);
		g->next_start_ms = al_now_ms();
	}
	return 0;
}

/* Not started yet: waiting for the guest's first use of the sockets. */
static int dormant(const shim_gwproc *g)
{
	return g->on && g->starts == 0 && g->pid <= 0 && g->socks[0] >= 0;
}

int shim_gwproc_wake(shim_gwproc *g)
{
	return dormant(g) ? launch(g) : -1;
}

int shim_gwproc_poll(const shim_gwproc *g, struct pollfd *pfd, int *who, int n)
{
	if (dormant(g)) {
		for (int i = 0; i < 3; i++) {
			pfd[n] = (struct pollfd){.fd = g->socks[i],
						 .events = POLLIN};
			who[n++] = SHIM_WHO_GWPROC;
		}
		return n;
	}
	if (g->pid <= 0)
		return n;
	pfd[n] = (struct pollfd){.fd = g->pidfd, .events = POLLIN};
	who[n++] = SHIM_WHO_GWPROC;
	return n;
}

/* It died: no egress until the next start, which waits longer each time
 * unless the last one ran for a while. */
int shim_gwproc_event(shim_gwproc *g, short revents, int *died)
{
	*died = 0;
	if (revents != 0 && dormant(g))
		/* The guest's first query or connection waits for it. */
		return launch(g);
	if (g->pid <= 0 || revents == 0)
		return -1;
	int64_t ran = al_now_ms() - g->started_ms;
	if (ran >= SHIM_GW_STABLE_MS)
		g->backoff_ms = SHIM_GW_BACKOFF_MIN_MS;
	al_warn("sandbox %s: gateway (pid %d) ended after %lld ms; "
		"restarting in %d ms, no egress until then",
		g->sandbox, (int)g->pid, (long long)ran, g->backoff_ms);
	*died = 1;
	proc_end(g);
	schedule(g);
	return -1;
}

int shim_gwproc_timeout(const shim_gwproc *g, int64_t now)
{
	if (!g->on || g->pid > 0 || g->next_start_ms == 0)
		return -1;
	return g->next_start_ms <= now ? 0 : (int)(g->next_start_ms - now);
}

int shim_gwproc_tick(shim_gwproc *g, int64_t now)
{
	if (g->on && g->pid <= 0 && g->next_start_ms != 0 &&
	    g->next_start_ms <= now)
		return launch(g);
	return -1;
}

void shim_gwproc_end(shim_gwproc *g)
{
	if (!g->on)
		return;
	proc_end(g);
	for (int i = 0; i < 3; i++)
		if (g->socks[i] >= 0) {
			close(g->socks[i]);
			g->socks[i] = -1;
		}
	al_uidrange_drop(&g->uid);
	al_gateway_state_remove(g->cfg->run_dir, g->sandbox);
	g->on = 0;
}
