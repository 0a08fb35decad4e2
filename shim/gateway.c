/* shim gateway: the sandbox's egress gateway (gateway.h). */
#include "gateway.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "net/addr.h"

/* What the gateway gets of the shim's environment (RULES: the gateway
 * process contract), and nothing else. */
static const char *const gw_env_names[] = {
	"AIRLOCK_STATE",	  "AIRLOCK_POLICIES",
	"AIRLOCK_UPSTREAM_DNS",	  "AIRLOCK_UPSTREAM_HOSTS",
	"AIRLOCK_UPSTREAM_CA",	  "AIRLOCK_UPSTREAM_ALLOW_CIDRS",
};
#define GW_ENV_N (sizeof gw_env_names / sizeof gw_env_names[0])

void shim_gw_init(shim_gw *g)
{
	memset(g, 0, sizeof *g);
	g->uid.lock_fd = -1;
	g->proc.pidfd = -1;
	g->proc.control_fd = -1;
	al_frame_reader_init(&g->in);
}

/* GW_CONFIG of sandbox sb: its names, string metadata and network. */
static char *config_pack(const al_netslot *slot, const al_sandbox *sb,
			 const al_netspec *ns, al_err *err)
{
	al_policy_kv meta[AL_GW_META_MAX];
	al_gw_config c = {.n_metadata = 0, .metadata = meta};
	snprintf(c.sandbox, sizeof c.sandbox, "%s", sb->id);
	snprintf(c.template_name, sizeof c.template_name, "%s",
		 sb->template_name);
	snprintf(c.project, sizeof c.project, "%s", sb->project);
	al_net_addr_format(slot->addr.gateway, c.gateway);
	if (sb->metadata != NULL &&
	    json_object_is_type(sb->metadata, json_type_object)) {
		json_object_object_foreach(sb->metadata, k, v)
		{
			if (c.n_metadata == AL_GW_META_MAX)
				break;
			if (!json_object_is_type(v, json_type_string))
				continue;
			meta[c.n_metadata++] = (al_policy_kv){
				.key = k, .value = json_object_get_string(v)};
		}
	}
	c.network = *ns;
	return al_gw_config_pack(&c, err);
}

/* Kill and reap the running one (if any), close its fds. */
static void proc_end(shim_gw *g)
{
	if (g->proc.pid > 0) {
		syscall(SYS_pidfd_send_signal, g->proc.pidfd, SIGKILL, NULL, 0);
		/* ECHILD: the relay's SIGCHLD loop reaped it already. */
		siginfo_t si;
		waitid(P_PIDFD, (id_t)g->proc.pidfd, &si, WEXITED);
	}
	if (g->proc.pidfd >= 0)
		close(g->proc.pidfd);
	if (g->proc.control_fd >= 0)
		close(g->proc.control_fd);
	g->proc = (al_gateway_proc){.pidfd = -1, .control_fd = -1};
	al_frame_reader_free(&g->in);
	al_frame_reader_init(&g->in);
}

/* The next start, later each time (bounded restarts). */
static void schedule(shim_gw *g)
{
	g->next_start_ms = al_now_ms() + g->backoff_ms;
	g->backoff_ms *= 2;
	if (g->backoff_ms > SHIM_GW_BACKOFF_MAX_MS)
		g->backoff_ms = SHIM_GW_BACKOFF_MAX_MS;
}

/* Start it now; a failure is logged and the next try scheduled. */
static void launch(shim_gw *g)
{
	char envbuf[GW_ENV_N][AL_PATH_MAX + 64];
	char *env[GW_ENV_N + 1];
	size_t ne = 0;
	for (size_t i = 0; i < GW_ENV_N; i++) {
		const char *v = getenv(gw_env_names[i]);
		if (v == NULL)
			continue;
		int w = snprintf(envbuf[ne], sizeof envbuf[ne], "%s=%s",
				 gw_env_names[i], v);
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
		.sandbox = g->sandbox,
		.prog = g->prog,
		.env = env,
		.run_dir = g->run_dir,
		/* Not the sandbox's cgroup: the guest would share the
		 * gateway's memory and pids limits, and could starve it. */
		.cgroup_fd = -1,
	};
	al_err err = {0};
	g->starts++;
	g->next_start_ms = 0;
	if (al_gateway_launch(&spec, &g->proc, &err) < 0 ||
	    al_frame_send(g->proc.control_fd, AL_F_GW_CONFIG, ++g->next_id,
			  g->config, strlen(g->config), &err) < 0) {
		al_warn("sandbox %s: gateway: %s (again in %d ms; no egress "
			"until then)",
			g->sandbox, err.msg, g->backoff_ms);
		proc_end(g);
		schedule(g);
		return;
	}
	g->started_ms = al_now_ms();
}

/* It died (or its control channel did): no egress until the next start,
 * which waits longer each time unless the last one ran for a while. */
static void died(shim_gw *g, const char *how)
{
	int64_t ran = al_now_ms() - g->started_ms;
	if (ran >= SHIM_GW_STABLE_MS)
		g->backoff_ms = SHIM_GW_BACKOFF_MIN_MS;
	al_warn("sandbox %s: gateway (pid %d) %s after %lld ms; restarting "
		"in %d ms, no egress until then",
		g->sandbox, (int)g->proc.pid, how, (long long)ran,
		g->backoff_ms);
	proc_end(g);
	schedule(g);
}

int shim_gw_begin(shim_gw *g, const al_config *cfg, const al_netslot *slot,
		  const al_sandbox *sb, const al_netspec *ns, al_err *err)
{
	if (g->on)
		return 0;
	g->slot = slot;
	snprintf(g->sandbox, sizeof g->sandbox, "%s", sb->id);
	const char *prog = getenv(SHIM_GW_PROG_ENV);
	int w = prog != NULL && prog[0] == '/'
			? snprintf(g->prog, sizeof g->prog, "%s", prog)
			: snprintf(g->prog, sizeof g->prog,
				   "%s/airlock-gateway", cfg->libexec_dir);
	if (w < 0 || (size_t)w >= sizeof g->prog)
		return al_err_set(err, AL_EINVAL, 0, "gateway path too long");
	snprintf(g->run_dir, sizeof g->run_dir, "%s", cfg->run_dir);
	g->config = config_pack(slot, sb, ns, err);
	if (g->config == NULL)
		return -1;
	if (al_uidrange_take(&al_uidrange_gw, sb->id, &g->uid, err) < 0) {
		free(g->config);
		g->config = NULL;
		return -1;
	}
	g->on = 1;
	g->backoff_ms = SHIM_GW_BACKOFF_MIN_MS;
	launch(g);
	return 0;
}

int shim_gw_poll(shim_gw *g, struct pollfd *pfd, int *who, int n)
{
	if (g->proc.pid <= 0)
		return n;
	pfd[n] = (struct pollfd){.fd = g->proc.pidfd, .events = POLLIN};
	who[n++] = SHIM_WHO_GW;
	pfd[n] = (struct pollfd){.fd = g->proc.control_fd, .events = POLLIN};
	who[n++] = SHIM_WHO_GW_CTL;
	return n;
}

/* Its ACKs: a refused config is logged (the gateway then keeps denying:
 * it fails closed itself). */
static void read_control(shim_gw *g)
{
	al_err err = {0};
	int rc = al_frame_reader_fill(&g->in, g->proc.control_fd, &err);
	int bad = 0;
	for (;;) {
		al_frame f;
		int got = al_frame_next(&g->in, &f, &err);
		if (got < 0)
			bad = 1;
		if (got <= 0)
			break;
		if (f.type == AL_F_GW_ACK) {
			al_gw_ack ack;
			al_err e2 = {0};
			if (al_gw_ack_unpack(f.payload, f.len, &ack, &e2) < 0)
				al_warn("sandbox %s: gateway: bad ACK: %s",
					g->sandbox, e2.msg);
			else if (!ack.ok)
				al_warn("sandbox %s: gateway refused its "
					"config: %s",
					g->sandbox, ack.error);
		}
		al_frame_free(&f);
	}
	/* A gateway that breaks the protocol is not trusted any more. */
	if (rc <= 0 || bad)
		died(g, bad ? "broke the control protocol"
			    : "closed its control channel");
}

void shim_gw_event(shim_gw *g, int who, short revents)
{
	if (g->proc.pid <= 0 || revents == 0)
		return;
	if (who == SHIM_WHO_GW)
		died(g, "exited");
	else if (who == SHIM_WHO_GW_CTL)
		read_control(g);
}

int shim_gw_timeout(const shim_gw *g, int64_t now)
{
	if (!g->on || g->proc.pid > 0 || g->next_start_ms == 0)
		return -1;
	return g->next_start_ms <= now ? 0 : (int)(g->next_start_ms - now);
}

void shim_gw_tick(shim_gw *g, int64_t now)
{
	if (g->on && g->proc.pid <= 0 && g->next_start_ms != 0 &&
	    g->next_start_ms <= now)
		launch(g);
}

pid_t shim_gw_pid(const shim_gw *g)
{
	return g->proc.pid > 0 ? g->proc.pid : 0;
}

void shim_gw_end(shim_gw *g)
{
	if (!g->on)
		return;
	proc_end(g);
	al_uidrange_drop(&g->uid);
	free(g->config);
	g->config = NULL;
	g->on = 0;
}
