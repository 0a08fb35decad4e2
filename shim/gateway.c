/* shim gateway: the sandbox's egress gateway process (gateway.h). */
#include "gateway.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/addr.h"
#include "base/log.h"
#include "cred/credclient.h"
#include "shim.h"

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

/* Start it now and hand its control fd to netctl; a failure is logged
 * and the next try scheduled. */
static void launch(shim *s)
{
	shim_gwproc *g = &s->gwproc;
	/* AIRLOCK_STATE, AIRLOCK_POLICIES and the egress log's rate from the
	 * shim's configuration, their defaults resolved. */
	static al_gateway_env env;
	al_gateway_env_fill(&env, &s->cfg);
	al_gateway_spec spec = {
		.slot = g->slot,
		.uid = g->uid.base,
		.gid = g->uid.base,
		.sandbox = s->sb.id,
		.prog = g->prog,
		.env = env.env,
		.run_dir = s->cfg.run_dir,
		/* Charged to the sandbox: what its guest makes the gateway
		 * spend comes out of its own limits. Both drivers name the
		 * leaf after the sandbox (a claimed standby's is renamed
		 * before it goes live). */
		.cgroup = s->sb.id,
		.sockets = g->socks[0] >= 0 ? g->socks : NULL,
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
	if (al_gateway_prog(s->cfg.libexec_dir, g->prog, sizeof g->prog, err) <
	    0)
		return -1;
	if (al_uidrange_take(&al_uidrange_gw, s->sb.id, &g->uid, err) < 0)
		return -1;
	g->on = 1;
	g->backoff_ms = SHIM_GW_BACKOFF_MIN_MS;
	al_err sock_err = {0};
	if (al_gateway_sockets(slot, g->socks, &sock_err) < 0) {
		/* Each launch makes its own, the first at the relay's next
		 * turn (after the create is answered). */
		al_warn("sandbox %s: gateway sockets: %s (the gateway starts "
			"now)",
			s->sb.id, sock_err.msg);
		g->next_start_ms = al_now_ms();
	}
	return 0;
}

/* Not started yet: waiting for the guest's first use of the sockets. */
static int dormant(const shim_gwproc *g)
{
	return g->on && g->starts == 0 && g->pid <= 0 && g->socks[0] >= 0;
}

int shim_gwproc_wake(shim *s)
{
	shim_gwproc *g = &s->gwproc;
	if (!dormant(g))
		return 0;
	launch(s);
	return g->pid > 0;
}

int shim_gwproc_poll(shim *s, struct pollfd *pfd, int *who, int n)
{
	if (dormant(&s->gwproc)) {
		for (int i = 0; i < 3; i++) {
			pfd[n] = (struct pollfd){.fd = s->gwproc.socks[i],
						 .events = POLLIN};
			who[n++] = SHIM_WHO_GWPROC;
		}
		return n;
	}
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
	if (revents != 0 && dormant(g)) {
		/* The guest's first query or connection waits for it. */
		launch(s);
		return;
	}
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
	for (int i = 0; i < 3; i++)
		if (g->socks[i] >= 0) {
			close(g->socks[i]);
			g->socks[i] = -1;
		}
	al_uidrange_drop(&g->uid);
	al_gateway_state_remove(s->cfg.run_dir, s->sb.id);
	g->on = 0;
}
