/* airlock-gateway: one sandbox's egress gateway.
 *
 *   airlock-gateway --sandbox <id>
 *
 * Started by core/net/gwlaunch (the shim, or a test) with fds 3 (DNS
 * UDP), 4 (DNS TCP), 5 (the transparent TCP listener) and 6 (control)
 * made in the sandbox's slot, and 7 (its credential channel, when the
 * shim could open one), its own uid and no capabilities. Env, as
 * al_gateway_env_fill (core/net/gwlaunch.h) passes it: AIRLOCK_STATE
 * (state dir: run/mint.sock, run/egress/<id>/, the address map's journal
 * run/gw/<id>.fakeip), AIRLOCK_POLICIES (egress.lua, and credentials.lua
 * when present), AIRLOCK_NET_POOL (the slots' prefix, never dialled:
 * required, so that a gateway never falls back to a pool the operator
 * moved away from), AIRLOCK_EGRESS_LOG_RATE, AIRLOCK_EGRESS_LOG_BURST,
 * AIRLOCK_GW_HEAD_TIMEOUT_MS, AIRLOCK_GW_IDLE_TIMEOUT_MS (core/base/config.h,
 * whose parser refuses a bad value here as in the starter),
 * AIRLOCK_UPSTREAM_DNS, AIRLOCK_UPSTREAM_HOSTS, AIRLOCK_UPSTREAM_CA,
 * AIRLOCK_UPSTREAM_ALLOW_CIDRS.
 *
 * Order: open everything it will need (policy, resolver, TLS contexts and
 * key, the egress log), install its syscall filter, then wait for the
 * first GW_CONFIG before it answers a single DNS query or connection.
 * Exit: 0 when the shim closes the control channel, 100 on usage, 111
 * when it cannot start. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/addr.h"
#include "base/config.h"
#include "credchan.h"
#include "gw.h"
#include "host/sysfilter.h"
#include "net/gwlaunch.h"
#include "net/pool.h"
#include "tlssess.h"

#if defined(__SANITIZE_ADDRESS__)
/* LeakSanitizer stops the world with a clone the syscall filter refuses
 * (no processes, no ptrace): a sanitizer build checks no leaks here. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}
#endif

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v != NULL && v[0] != '\0' ? v : NULL;
}

static void die(gw *g, const char *what, const al_err *e)
{
	gw_note(g, "%s: %s", what, e != NULL ? e->msg : strerror(errno));
	exit(111);
}

/* The first GW_CONFIG is in: answer DNS, accept connections. */
static int serve(gw *g, al_err *err)
{
	al_dnsserv_config dc = {
		.udp_fd = AL_GWLAUNCH_FD_DNS_UDP,
		.tcp_fd = AL_GWLAUNCH_FD_DNS_TCP,
		.guest = g->guest,
		.map = g->fakeip,
		.decide = gw_dns_decide,
		.log = gw_dns_log,
		.arg = g,
	};
	g->dns = al_dnsserv_new(g->base, &dc, err);
	if (g->dns == NULL)
		return -1;
	return gw_proxy_start(g, AL_GWLAUNCH_FD_TPROXY, err);
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	gw_log_flush(arg, false);
}

static void on_term(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopbreak(arg);
}

static int slot_address(gw *g)
{
	struct sockaddr_in a;
	socklen_t len = sizeof a;
	if (getsockname(AL_GWLAUNCH_FD_DNS_UDP, (struct sockaddr *)&a, &len) <
		    0 ||
	    a.sin_family != AF_INET)
		return -1;
	g->gateway = ntohl(a.sin_addr.s_addr);
	g->guest = g->gateway + 1; /* net/addr.h: .1 gateway, .2 guest */
	return 0;
}

int main(int argc, char **argv)
{
	static gw g;
	if (argc != 3 || strcmp(argv[1], "--sandbox") != 0 ||
	    !al_id_valid(argv[2])) {
		fprintf(stderr, "usage: airlock-gateway --sandbox <id>\n");
		return 100;
	}
	g.sandbox = argv[2];
	/* fd 7 when the shim had a channel for it (else credchan asks on
	 * fd 6), checked before anything here opens a descriptor that would
	 * take its number. */
	int cred_fd = fcntl(AL_GWLAUNCH_FD_CRED, F_GETFD) >= 0
			      ? AL_GWLAUNCH_FD_CRED
			      : -1;
	signal(SIGPIPE, SIG_IGN);
	al_err err;
	const char *state = env("AIRLOCK_STATE");
	const char *policies = env("AIRLOCK_POLICIES");
	if (state == NULL || policies == NULL) {
		gw_note(&g, "AIRLOCK_STATE and AIRLOCK_POLICIES are needed");
		return 111;
	}
	/* No default pool: a gateway that guessed one would dial into the
	 * slots of a pool the operator moved. */
	if (env(AL_NETPOOL_ENV) == NULL) {
		gw_note(&g,
			"%s is needed: the slots' prefix, which a gateway "
			"never dials (its launcher passes it)",
			AL_NETPOOL_ENV);
		return 111;
	}
	/* The settings' one parser: a value the starter would refuse is
	 * refused here too, naming it. */
	static al_config cfg;
	if (al_config_load(&cfg, &err) < 0)
		die(&g, "configuration", &err);
	g.head_ms = cfg.gw_head_timeout_ms;
	g.idle_ms = cfg.gw_idle_timeout_ms;
	if (slot_address(&g) < 0)
		die(&g, "fd 3 is not the slot's DNS socket", NULL);

	char path[AL_PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/egress.lua", policies);
	g.policy = al_policy_open(path, &al_policy_egress_kind, NULL, &err);
	if (g.policy == NULL)
		die(&g, "egress policy", &err);
	/* Optional: without it credentials go by their own records. */
	snprintf(path, sizeof path, "%s/credentials.lua", policies);
	if (access(path, F_OK) == 0) {
		g.cred_policy = al_policy_open(path,
					       &al_policy_credentials_kind,
					       NULL, &err);
		if (g.cred_policy == NULL)
			die(&g, "credentials policy", &err);
	}

	al_net_prefix pool;
	if (al_net_pool_parse(cfg.net_pool, &pool, &err) < 0)
		die(&g, AL_NETPOOL_ENV, &err);
	g.upaddr = al_upaddr_new(env("AIRLOCK_UPSTREAM_ALLOW_CIDRS"), &pool,
				 &err);
	if (g.upaddr == NULL)
		die(&g, "AIRLOCK_UPSTREAM_ALLOW_CIDRS", &err);

	/* epoll's changes gathered per loop turn: a request enables and
	 * disables each side's events several times, one epoll_ctl each
	 * without the changelist (about six per kept-alive request). No
	 * descriptor here is a dup of another under the loop, the case the
	 * changelist gets wrong. */
	struct event_config *ec = event_config_new();
	if (ec == NULL ||
	    event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST) < 0)
		die(&g, "event_config", NULL);
	g.base = event_base_new_with_config(ec);
	event_config_free(ec);
	if (g.base == NULL)
		die(&g, "event_base_new", NULL);
	al_resolver_config rc = {
		.upstream_dns = env("AIRLOCK_UPSTREAM_DNS"),
		.hosts = env("AIRLOCK_UPSTREAM_HOSTS"),
		.classify = g.upaddr,
	};
	g.resolver = al_resolver_new(g.base, &rc, &err);
	if (g.resolver == NULL)
		die(&g, "upstream resolver", &err);

	char mint[AL_PATH_MAX + 64];
	snprintf(mint, sizeof mint, "%s/run/mint.sock", state);
	al_gw_tls_config tc = {
		.mint_sock = mint,
		.upstream_ca = env("AIRLOCK_UPSTREAM_CA"),
	};
	g.tls = al_gw_tls_new(&tc, &err);
	if (g.tls == NULL)
		die(&g, "TLS", &err);
	gw_tlssess_init(al_gw_tls_upstream_ctx(g.tls));
	al_gw_uppool_config pc = {
		.max = GW_UPPOOL_MAX,
		.idle_ms = GW_UPPOOL_IDLE_MS < g.idle_ms ? GW_UPPOOL_IDLE_MS
							 : g.idle_ms,
		.classify = g.upaddr,
		.release = gw_tlssess_release,
	};
	g.uppool = al_gw_uppool_new(g.base, &pc, &err);
	if (g.uppool == NULL)
		die(&g, "upstream pool", &err);
	char run[AL_PATH_MAX + 8], map[AL_PATH_MAX + 96];
	snprintf(run, sizeof run, "%s/run", state);
	if (al_gateway_map_path(run, g.sandbox, map, sizeof map) < 0)
		die(&g, "state dir path too long", NULL);
	g.fakeip = al_fakeip_open(map, AL_FAKEIP_CAP_DEFAULT, &err);
	if (g.fakeip == NULL)
		die(&g, "synthetic address map", &err);
	al_egress_writer_limits lim = {
		.batch = AL_EGRESS_BATCH_MAX,
		.flush_ms = AL_EGRESS_FLUSH_MS,
		.files = AL_EGRESS_FILES_MAX,
		.rate = cfg.egress_log_rate,
		.burst = cfg.egress_log_burst,
	};
	g.egress = al_egress_writer_open(run, g.sandbox, &lim, &err);
	if (g.egress == NULL)
		die(&g, "egress log", &err);

	g.flush = event_new(g.base, -1, 0, on_flush, &g);
	struct event *term = evsignal_new(g.base, SIGTERM, on_term, g.base);
	if (g.flush == NULL || term == NULL || event_add(term, NULL) < 0)
		die(&g, "timers", NULL);
	if (gw_control_start(&g, AL_GWLAUNCH_FD_CONTROL, serve) < 0)
		die(&g, "control channel", NULL);
	if (gw_credchan_start(&g, cred_fd, &err) < 0)
		die(&g, "credential channel", &err);

	/* Everything is open: from here on the filter holds. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    al_sysfilter_install(al_sysfilter_gateway_prog()) < 0)
		die(&g, "syscall filter", NULL);

	event_base_dispatch(g.base);
	gw_log_flush(&g, true);
	gw_cred_audit_flush(&g);
	gw_note(&g, "%lu connections, %lu refused at the bound", g.conns_total,
		g.conns_refused);
	return 0;
}
