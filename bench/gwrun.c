/* gwrun: one sandbox's egress gateway, standing alone, for
 * bench/gateway.sh: what the controller and the shim do for it, and
 * nothing else.
 *
 *   gwrun STATE SANDBOX ALLOW_NAME
 *
 * Opens (or creates) the host CA in STATE/keys and serves the mint
 * service on STATE/run/mint.sock (controller/mint.c, linked in), leases
 * a network slot of STATE's pool (core/net), takes a gateway uid
 * (uidrange), starts build*\/airlock-gateway ($AIRLOCK_GATEWAY) on the
 * slot through core/net/gwlaunch (which makes its egress directory and
 * address journal under STATE/run) with AIRLOCK_STATE and the
 * AIRLOCK_POLICIES / AIRLOCK_UPSTREAM_* of its own environment, and
 * sends GW_CONFIG: mode allowlist, allow [ALLOW_NAME]. Once the gateway
 * acknowledges (and, with GWRUN_CRED_SET set to a CRED_SET payload, once
 * it acknowledged that set on its credential channel, fd 7, which gwrun
 * holds as the controller would), prints one JSON line
 *   {"pid":N,"guest_ns":"...","gateway":"10.200.x.1"}
 * and waits for EOF on stdin, TERM or INT (or the gateway's exit:
 * status 1); then stops the gateway and releases everything. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "../controller/mint.h"
#include "agentproto.h"
#include "gw/ca.h"
#include "net/gwlaunch.h"
#include "net/pool.h"
#include "netspec.h"
#include "uidrange.h"

#define ACK_TIMEOUT_MS 10000

static volatile sig_atomic_t stopping;

static void on_term(int sig)
{
	(void)sig;
	stopping = 1;
}

static void die(const char *what, const al_err *e)
{
	fprintf(stderr, "gwrun: %s: %s\n", what, e->msg);
	exit(1);
}

/* Env entries of ours passed on to the gateway. */
static const char *const passed[] = {
	"AIRLOCK_POLICIES",
	"AIRLOCK_UPSTREAM_DNS",
	"AIRLOCK_UPSTREAM_HOSTS",
	"AIRLOCK_UPSTREAM_CA",
	"AIRLOCK_UPSTREAM_ALLOW_CIDRS",
};
#define N_PASSED (sizeof passed / sizeof passed[0])

static char *env_entry(const char *k, const char *v)
{
	size_t n = strlen(k) + strlen(v) + 2;
	char *s = malloc(n);
	if (s == NULL) {
		fprintf(stderr, "gwrun: out of memory\n");
		exit(1);
	}
	snprintf(s, n, "%s=%s", k, v);
	return s;
}

static void send_config(int fd, const char *sandbox, const char *gateway,
			const char *allow_name)
{
	al_err e;
	char *allow[2] = {(char *)allow_name, NULL};
	al_gw_config c = {
		.build = false,
		.network = {.mode = AL_NET_ALLOWLIST,
			    .allow = allow,
			    .n_allow = 1},
	};
	snprintf(c.sandbox, sizeof c.sandbox, "%s", sandbox);
	snprintf(c.template_name, sizeof c.template_name, "bench");
	snprintf(c.project, sizeof c.project, "default");
	snprintf(c.gateway, sizeof c.gateway, "%s", gateway);
	char *payload = al_gw_config_pack(&c, &e);
	if (payload == NULL)
		die("GW_CONFIG", &e);
	size_t len = strlen(payload);
	if (al_frame_send(fd, AL_F_GW_CONFIG, 1, payload, len, &e) < 0)
		die("send GW_CONFIG", &e);
	free(payload);
	al_frame_reader r;
	al_frame_reader_init(&r);
	al_frame f;
	if (al_frame_recv(fd, &r, &f, al_now_ms() + ACK_TIMEOUT_MS, &e) < 0)
		die("no GW_ACK", &e);
	al_gw_ack ack;
	if (f.type != AL_F_GW_ACK ||
	    al_gw_ack_unpack(f.payload, f.len, &ack, &e) < 0) {
		fprintf(stderr, "gwrun: answer to GW_CONFIG is not a GW_ACK\n");
		exit(1);
	}
	if (!ack.ok) {
		fprintf(stderr, "gwrun: gateway refused GW_CONFIG: %s\n",
			ack.error);
		exit(1);
	}
	al_frame_free(&f);
	al_frame_reader_free(&r);
}

/* The controller's side of the credential channel: one CRED_SET, its
 * ACK awaited. */
static void push_set(int fd, const char *payload)
{
	al_err e;
	if (al_frame_send(fd, AL_F_CRED_SET, 1, payload, strlen(payload), &e) <
	    0)
		die("send CRED_SET", &e);
	al_frame_reader r;
	al_frame_reader_init(&r);
	al_frame f;
	if (al_frame_recv(fd, &r, &f, al_now_ms() + ACK_TIMEOUT_MS, &e) < 0)
		die("no CRED_SET_ACK", &e);
	if (f.type != AL_F_CRED_SET_ACK) {
		fprintf(stderr, "gwrun: answer to CRED_SET is type %u\n",
			f.type);
		exit(1);
	}
	al_frame_free(&f);
	al_frame_reader_free(&r);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: gwrun STATE SANDBOX ALLOW_NAME\n");
		return 2;
	}
	const char *state = argv[1], *sandbox = argv[2], *name = argv[3];
	const char *prog = getenv("AIRLOCK_GATEWAY");
	if (prog == NULL) {
		fprintf(stderr, "gwrun: set AIRLOCK_GATEWAY\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	/* TERM and INT stop as EOF does: everything released (no
	 * SA_RESTART, so poll returns). */
	struct sigaction sa = {.sa_handler = on_term};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	al_err e;
	char path[AL_PATH_MAX];
	snprintf(path, sizeof path, "%s/keys", state);
	mkdir(path, 0700);
	snprintf(path, sizeof path, "%s/run", state);
	mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/keys", state);
	al_ca *ca = al_ca_open(path, &e);
	if (ca == NULL)
		die("CA", &e);
	al_mintd *mint = al_mintd_start(state, ca, &e);
	if (mint == NULL)
		die("mint service", &e);

	al_netpool pool;
	if (al_netpool_open(&pool, state, NULL, &e) < 0)
		die("net pool", &e);
	if (al_netpool_prepare(&pool, AL_NETSLOT_NS, &e) < 0)
		die("prepare slot", &e);
	al_netlease lease;
	if (al_netpool_take(&pool, AL_NETSLOT_NS, &lease, &e) != 0)
		die("take slot", &e);
	al_uidrange uid;
	if (al_uidrange_take(&al_uidrange_gw, sandbox, &uid, &e) < 0)
		die("gateway uid", &e);
	char run_dir[AL_PATH_MAX];
	snprintf(run_dir, sizeof run_dir, "%s/run", state);

	char *env[N_PASSED + 2];
	size_t n = 0;
	env[n++] = env_entry("AIRLOCK_STATE", state);
	for (size_t i = 0; i < N_PASSED; i++) {
		const char *v = getenv(passed[i]);
		if (v != NULL)
			env[n++] = env_entry(passed[i], v);
	}
	env[n] = NULL;
	al_gateway_spec spec = {
		.slot = &lease.slot,
		.uid = uid.base,
		.gid = uid.base,
		.sandbox = sandbox,
		.prog = prog,
		.env = env,
		.run_dir = run_dir, /* egress directory and address journal */
		.cgroup_fd = -1,
	};
	const char *cred_set = getenv("GWRUN_CRED_SET");
	int chan[2] = {-1, -1};
	if (cred_set != NULL) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, chan) <
		    0) {
			perror("gwrun: socketpair");
			return 1;
		}
		spec.cred_fd = chan[1];
	}
	al_gateway_proc gw;
	if (al_gateway_launch(&spec, &gw, &e) < 0)
		die("launch", &e);
	char gateway[INET_ADDRSTRLEN];
	struct in_addr ga = {htonl(lease.slot.addr.gateway)};
	inet_ntop(AF_INET, &ga, gateway, sizeof gateway);
	/* The control fd is non-blocking; the ACK is waited for here. */
	send_config(gw.control_fd, sandbox, gateway, name);
	if (cred_set != NULL) {
		close(chan[1]);
		push_set(chan[0], cred_set);
	}
	printf("{\"pid\":%d,\"guest_ns\":\"%s\",\"gateway\":\"%s\"}\n",
	       (int)gw.pid, lease.slot.guest_path, gateway);
	fflush(stdout);

	int status = 0;
	struct pollfd p[2] = {{.fd = 0, .events = POLLIN},
			      {.fd = gw.pidfd, .events = POLLIN}};
	while (!stopping) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents != 0) {
			fprintf(stderr, "gwrun: the gateway exited\n");
			status = 1;
			break;
		}
		char b[64];
		if (p[0].revents != 0 && read(0, b, sizeof b) <= 0)
			break;
	}
	kill(gw.pid, SIGTERM);
	waitpid(gw.pid, NULL, 0);
	close(gw.pidfd);
	close(gw.control_fd);
	if (chan[0] >= 0)
		close(chan[0]);
	al_gateway_state_remove(run_dir, sandbox);
	al_uidrange_drop(&uid);
	al_netpool_release(&pool, &lease);
	al_mintd_stop(mint);
	al_ca_close(ca);
	for (size_t i = 0; i < n; i++)
		free(env[i]);
	return status;
}
