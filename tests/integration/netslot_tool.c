/* netslot-tool: drives core/net for tests/integration/test_netslot.py.
 *
 *   netslot-tool STATE prepare ns|vm [N]   prepare N ready slots
 *   netslot-tool STATE ready ns|vm         how many are ready
 *   netslot-tool STATE hold ns|vm [MAC]    lease one (preparing it if none
 *                                           is ready), print it as JSON, act
 *                                           as its gateway side, release on
 *                                           EOF of stdin
 *   netslot-tool STATE reconcile           clean leaked slots
 *   netslot-tool STATE drain ns|vm         remove ready slots
 *   netslot-tool STATE gateway PROG ID     lease an ns slot, run the mint
 *                                           service (as the controller
 *                                           does) and start the gateway
 *                                           PROG for sandbox ID on it
 *                                           (al_gateway_launch, its own
 *                                           uid, the environment a shim
 *                                           gives it: al_gateway_env_fill
 *                                           of the configuration in ours,
 *                                           AIRLOCK_STATE=STATE); print
 *                                           the slot as JSON;
 *                                           then each stdin line is a
 *                                           "network" object sent as
 *                                           GW_CONFIG, and the ACK is
 *                                           printed; EOF stops it all
 * As the gateway side, hold listens in the slot (al_netslot_socket, as the
 * gateway will) on UDP and TCP 53 of the gateway's address and on the
 * transparent TCP port every other connection is sent to, and prints one
 * JSON line per datagram or connection, with the local address the
 * kernel gives it (getsockname: the guest's original destination). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gwhost.h"
#include "host/uidrange.h"
#include "net/nft.h"
#include "net/pool.h"
#include "net/slot.h"

static void die(const char *what, const al_err *e)
{
	fprintf(stderr, "netslot-tool: %s: %s\n", what, e->msg);
	exit(111);
}

static const char *ip(uint32_t a, char *buf)
{
	struct in_addr in = {htonl(a)};
	return inet_ntop(AF_INET, &in, buf, INET_ADDRSTRLEN);
}

static const char *sa(const struct sockaddr_in *s, char *buf)
{
	char a[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &s->sin_addr, a, sizeof a);
	snprintf(buf, 32, "%s:%u", a, ntohs(s->sin_port));
	return buf;
}

static int listener(const al_netslot *s, int type, uint16_t port,
		    int transparent)
{
	al_err e;
	int fd = al_netslot_socket(s, AF_INET, type, 0, &e);
	if (fd < 0)
		die("socket in slot", &e);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (transparent &&
	    setsockopt(fd, SOL_IP, IP_TRANSPARENT, &one, sizeof one) < 0) {
		perror("IP_TRANSPARENT");
		exit(111);
	}
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr = {htonl(s->addr.gateway)}};
	if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
	    (type == SOCK_STREAM && listen(fd, 16) < 0)) {
		perror("bind/listen in slot");
		exit(111);
	}
	return fd;
}

static void gateway_side(const al_netslot *s)
{
	struct pollfd p[4] = {
		{.fd = 0, .events = POLLIN},
		{.fd = listener(s, SOCK_DGRAM, 53, 0), .events = POLLIN},
		{.fd = listener(s, SOCK_STREAM, 53, 0), .events = POLLIN},
		{.fd = listener(s, SOCK_STREAM, AL_NFT_TPROXY_PORT, 1),
		 .events = POLLIN},
	};
	printf("{\"listening\":true}\n");
	fflush(stdout);
	for (;;) {
		if (poll(p, 4, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents != 0) {
			char b[64];
			if (read(0, b, sizeof b) <= 0)
				break;
		}
		char from[32], to[32];
		struct sockaddr_in peer, local;
		socklen_t pl = sizeof peer, ll = sizeof local;
		if (p[1].revents & POLLIN) {
			char buf[512];
			ssize_t n = recvfrom(p[1].fd, buf, sizeof buf - 1, 0,
					     (struct sockaddr *)&peer, &pl);
			if (n >= 0) {
				buf[n] = '\0';
				for (ssize_t i = 0; i < n; i++)
					if (buf[i] < 32 || buf[i] > 126 ||
					    buf[i] == '"' || buf[i] == '\\')
						buf[i] = '.';
				printf("{\"udp\":\"%s\",\"data\":\"%s\"}\n",
				       sa(&peer, from), buf);
				sendto(p[1].fd, "ok", 2, 0,
				       (struct sockaddr *)&peer, pl);
			}
		}
		for (int i = 2; i < 4; i++) {
			if (!(p[i].revents & POLLIN))
				continue;
			int c = accept(p[i].fd, (struct sockaddr *)&peer, &pl);
			if (c < 0)
				continue;
			getsockname(c, (struct sockaddr *)&local, &ll);
			printf("{\"tcp\":\"%s\",\"local\":\"%s\"}\n",
			       sa(&peer, from), sa(&local, to));
			(void)!write(c, "gw\n", 3);
			close(c);
		}
		fflush(stdout);
	}
}

static int parse_mac(const char *t, uint8_t mac[6])
{
	unsigned v[6];
	if (sscanf(t, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4],
		   &v[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)v[i];
	return 0;
}

/* One network line from stdin as GW_CONFIG; the ACK as a JSON line. */
static void configure(gwhost *h, uint32_t id, const char *line)
{
	al_err e;
	al_gw_config c = {0};
	snprintf(c.template_name, sizeof c.template_name, "base");
	snprintf(c.project, sizeof c.project, "test");
	json_object *o = json_tokener_parse(line);
	if (o == NULL ||
	    al_netspec_from_json(o, "network", true, &c.network, &e) < 0) {
		printf("{\"ok\":false,\"error\":\"bad network line\"}\n");
		json_object_put(o);
		return;
	}
	json_object_put(o);
	al_frame f;
	int rc = gwhost_configure(h, &c, id, &f, &e);
	al_netspec_free(&c.network);
	if (rc < 0)
		die("GW_CONFIG", &e);
	printf("%.*s\n", (int)f.len, (const char *)f.payload);
	al_frame_free(&f);
}

static int gateway_cmd(al_netpool *pool, const char *state, const char *prog,
		       const char *sandbox)
{
	al_err e;
	al_config cfg;
	if (gwhost_config(&cfg, state, &e) < 0)
		die("configuration", &e);
	gwhost h;
	/* A test's credential channel (an fd it passed us) as fd 7. */
	const char *cred = getenv("AIRLOCK_TEST_CRED_FD");
	if (gwhost_start(&h, pool, &cfg, prog, sandbox,
			 cred != NULL ? atoi(cred) : -1, &e) < 0)
		die("gateway", &e);
	const al_netslot *sl = &h.lease.slot;
	char s[INET_ADDRSTRLEN];
	printf("{\"index\":%u,\"gw_ns\":\"%s\",\"guest_ns\":\"%s\","
	       "\"gateway\":\"%s\",\"guest\":\"%s\",\"pid\":%d,"
	       "\"uid\":%u,\"launch_ms\":%lld}\n",
	       sl->index, sl->gw_path, sl->guest_path, h.gateway,
	       ip(sl->addr.guest, s), (int)h.proc.pid, (unsigned)h.uid.base,
	       (long long)h.launch_ms);
	fflush(stdout);
	char line[65536];
	uint32_t id = 1;
	while (fgets(line, sizeof line, stdin) != NULL) {
		configure(&h, id++, line);
		fflush(stdout);
	}
	/* EOF of its control channel: the gateway exits by itself. */
	int status = gwhost_stop(&h, 0);
	fprintf(stderr, "netslot-tool: gateway exited, status %d\n", status);
	return status == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: netslot-tool STATE CMD [KIND] [ARG]\n");
		return 100;
	}
	al_err e;
	al_netpool pool;
	if (al_netpool_open(&pool, argv[1], NULL, &e) < 0)
		die("open pool", &e);
	const char *cmd = argv[2];
	al_netslot_kind kind = strcmp(cmd, "gateway") != 0 && argc > 3 &&
					       strcmp(argv[3], "vm") == 0
				       ? AL_NETSLOT_VM
				       : AL_NETSLOT_NS;
	if (strcmp(cmd, "prepare") == 0) {
		int n = argc > 4 ? atoi(argv[4]) : 1;
		for (int i = 0; i < n; i++) {
			long idx = al_netpool_prepare(&pool, kind, &e);
			if (idx < 0)
				die("prepare", &e);
			printf("%ld\n", idx);
		}
		return 0;
	}
	if (strcmp(cmd, "ready") == 0) {
		printf("%u\n", al_netpool_ready(&pool, kind));
		return 0;
	}
	if (strcmp(cmd, "reconcile") == 0) {
		unsigned cleaned;
		if (al_netpool_reconcile(&pool, &cleaned, &e) < 0)
			die("reconcile", &e);
		printf("%u\n", cleaned);
		return 0;
	}
	if (strcmp(cmd, "drain") == 0) {
		al_netpool_drain(&pool, kind);
		return 0;
	}
	if (strcmp(cmd, "gateway") == 0) {
		if (argc != 5) {
			fprintf(stderr,
				"usage: netslot-tool STATE gateway PROG "
				"ID\n");
			return 100;
		}
		return gateway_cmd(&pool, argv[1], argv[3], argv[4]);
	}
	if (strcmp(cmd, "hold") != 0) {
		fprintf(stderr, "netslot-tool: unknown command %s\n", cmd);
		return 100;
	}
	al_netlease l;
	int rc = al_netpool_take(&pool, kind, &l, &e);
	if (rc == AL_DECLINED) {
		if (al_netpool_prepare(&pool, kind, &e) < 0)
			die("prepare", &e);
		rc = al_netpool_take(&pool, kind, &l, &e);
	}
	if (rc != 0)
		die("take", &e);
	if (argc > 4) {
		uint8_t mac[6];
		if (parse_mac(argv[4], mac) < 0) {
			fprintf(stderr, "netslot-tool: bad MAC %s\n", argv[4]);
			return 100;
		}
		if (al_netslot_set_mac(&l.slot, mac, &e) < 0)
			die("set MAC", &e);
	}
	char g[INET_ADDRSTRLEN], s[INET_ADDRSTRLEN];
	const uint8_t *m = l.slot.addr.guest_mac;
	printf("{\"index\":%u,\"gw_ns\":\"%s\",\"guest_ns\":\"%s\","
	       "\"gateway\":\"%s\",\"guest\":\"%s\",\"link\":\"%s\","
	       "\"guest_mac\":\"%02x:%02x:%02x:%02x:%02x:%02x\","
	       "\"tproxy_port\":%d}\n",
	       l.slot.index, l.slot.gw_path, l.slot.guest_path,
	       ip(l.slot.addr.gateway, g), ip(l.slot.addr.guest, s),
	       AL_NETSLOT_LINK, m[0], m[1], m[2], m[3], m[4], m[5],
	       AL_NFT_TPROXY_PORT);
	fflush(stdout);
	gateway_side(&l.slot);
	al_netpool_release(&pool, &l);
	return 0;
}
