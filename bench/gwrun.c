/* gwrun: one sandbox's egress gateway, standing alone, for
 * bench/gateway.sh: what the controller and the shim do for it, and
 * nothing else.
 *
 *   gwrun STATE SANDBOX ALLOW_NAME
 *
 * Through tests/integration/gwhost (what netslot-tool's gateway command
 * does too): leases a network slot of STATE's pool (core/net), opens (or
 * creates) the host CA in STATE/keys and serves the mint service on
 * STATE/run/mint.sock (controller/mint.c, linked in), takes a gateway
 * uid, starts build*\/airlock-gateway ($AIRLOCK_GATEWAY) on the slot
 * through core/net/gwlaunch with the environment a shim gives it
 * (al_gateway_env_fill of the configuration in its own environment,
 * AIRLOCK_STATE=STATE), and sends GW_CONFIG: mode
 * allowlist, allow [ALLOW_NAME]. Once the gateway acknowledges (and,
 * with GWRUN_CRED_SET set to a CRED_SET payload, once it acknowledged that
 * set on its credential channel, fd 7, which gwrun holds as the
 * controller would), prints one JSON line
 *   {"pid":N,"guest_ns":"...","gateway":"10.200.x.1"}
 * and waits for EOF on stdin, TERM or INT (or the gateway's exit:
 * status 1), reading and dropping what the gateway sends on the
 * credential channel meanwhile; then stops the gateway and releases
 * everything. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gwhost.h"

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

static void send_config(gwhost *h, const char *allow_name)
{
	al_err e;
	char *allow[2] = {(char *)allow_name, NULL};
	al_gw_config c = {
		.build = false,
		.network = {.mode = AL_NET_ALLOWLIST,
			    .allow = allow,
			    .n_allow = 1},
	};
	snprintf(c.template_name, sizeof c.template_name, "bench");
	snprintf(c.project, sizeof c.project, "default");
	al_frame f;
	if (gwhost_configure(h, &c, 1, &f, &e) < 0)
		die("GW_CONFIG", &e);
	al_gw_ack ack;
	if (al_gw_ack_unpack(f.payload, f.len, &ack, &e) < 0)
		die("GW_ACK", &e);
	al_frame_free(&f);
	if (!ack.ok) {
		fprintf(stderr, "gwrun: gateway refused GW_CONFIG: %s\n",
			ack.error);
		exit(1);
	}
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
	if (al_frame_recv(fd, &r, &f, al_now_ms() + GWHOST_ACK_TIMEOUT_MS, &e) <
	    0)
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
	al_config cfg;
	if (gwhost_config(&cfg, state, &e) < 0)
		die("configuration", &e);
	al_netpool pool;
	if (al_netpool_open(&pool, cfg.state_dir, cfg.net_pool, &e) < 0)
		die("net pool", &e);
	const char *cred_set = getenv("GWRUN_CRED_SET");
	int chan[2] = {-1, -1};
	if (cred_set != NULL &&
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, chan) < 0) {
		perror("gwrun: socketpair");
		return 1;
	}
	gwhost h;
	if (gwhost_start(&h, &pool, &cfg, prog, sandbox, chan[1], &e) < 0)
		die("gateway", &e);
	send_config(&h, name);
	if (cred_set != NULL) {
		close(chan[1]);
		push_set(chan[0], cred_set);
	}
	printf("{\"pid\":%d,\"guest_ns\":\"%s\",\"gateway\":\"%s\"}\n",
	       (int)h.proc.pid, h.lease.slot.guest_path, h.gateway);
	fflush(stdout);

	int status = 0;
	/* The audit records the gateway sends are read and dropped, as
	 * the controller reads them (into PostgreSQL, in batches): unread,
	 * the channel would fill and the gateway drop them unsent. */
	struct pollfd p[3] = {{.fd = 0, .events = POLLIN},
			      {.fd = h.proc.pidfd, .events = POLLIN},
			      {.fd = chan[0], .events = POLLIN}};
	while (!stopping) {
		if (poll(p, chan[0] >= 0 ? 3 : 2, -1) < 0) {
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
		char audit[65536];
		if (p[2].revents != 0 &&
		    read(chan[0], audit, sizeof audit) <= 0)
			p[2].fd = -1; /* the gateway closed it: poll the rest */
	}
	gwhost_stop(&h, SIGTERM);
	if (chan[0] >= 0)
		close(chan[0]);
	return status;
}
