/* netslot bench: what a network slot costs, and where.
 *
 *   prepare  al_netpool_prepare: two namespaces (ns) or one (vm), veth
 *            or tap, addresses, routes, sysctls, the nft batch
 *   take     al_netpool_take of a prepared slot: what a create pays
 *   release  al_netpool_release: namespaces unmounted (the kernel tears
 *            them down after, asynchronously)
 * beside the peer, the same ns slot made by hand: `ip netns add` (2),
 * `ip link add ... type veth peer ... netns`, `ip addr`, `ip link set
 * up`, `ip route` (local default, default via the gateway), the sysctls
 * through `ip netns exec ... sysctl`, and `nft -f` of the same ruleset
 * written as nft(8) text, then `ip netns del` (2).
 *
 *   netslot-bench [--rounds N] [--peer-rounds N]   (root)
 * Prints p50/p90/p99 in microseconds and the ratios. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net/pool.h"

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(const double *v, int n, double p)
{
	int k = (int)(p / 100.0 * n + 0.999999) - 1;
	return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static double row(const char *name, double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp);
	printf("  %-22s %10.1f %10.1f %10.1f   (n=%d)\n", name, pct(v, n, 50),
	       pct(v, n, 90), pct(v, n, 99), n);
	return pct(v, n, 50);
}

static al_netpool pool;
static char state[] = "/tmp/airlock-netbench-XXXXXX";

/* Whatever the bench leaves (a failure half-way too) goes. */
static void cleanup(void)
{
	unsigned cleaned;
	al_netpool_drain(&pool, AL_NETSLOT_NS);
	al_netpool_drain(&pool, AL_NETSLOT_VM);
	al_netpool_reconcile(&pool, &cleaned, NULL);
	char cmd[100];
	snprintf(cmd, sizeof cmd, "rm -rf %s", state);
	if (system(cmd) != 0)
		fprintf(stderr, "netslot-bench: %s left behind\n", state);
}

static void die(const char *what, const al_err *e)
{
	fprintf(stderr, "netslot-bench: %s: %s\n", what, e->msg);
	exit(111);
}

static int sh(const char *cmd)
{
	int rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : 111;
}

/* The same ruleset as nft(8) text, one rule per line as the library
 * makes them, for slot 0's addresses. */
static void write_rules(const al_netpool *p, const char *file)
{
	FILE *f = fopen(file, "w");
	if (f == NULL) {
		perror(file);
		exit(111);
	}
	fputs("table netdev airlock_l2 {\n"
	      " set guest_mac { type ether_addr; elements = { "
	      "02:a1:00:00:00:00 } }\n"
	      " chain ingress { type filter hook ingress device \"al-guest\" "
	      "priority 0; policy drop;\n"
	      "  ether saddr != @guest_mac counter drop\n"
	      "  ether type arp arp saddr ether @guest_mac arp saddr ip "
	      "10.200.0.2 accept\n"
	      "  ether type ip ip saddr 10.200.0.2 accept\n"
	      " }\n}\n"
	      "table inet airlock {\n"
	      " chain forward { type filter hook forward priority 0; "
	      "policy drop; }\n"
	      " chain prerouting { type filter hook prerouting priority -150; "
	      "policy accept;\n"
	      "  iifname != \"al-guest\" accept\n"
	      "  meta nfproto != ipv4 counter drop\n"
	      "  ip saddr != 10.200.0.2 counter drop\n"
	      "  ip daddr 10.200.0.1 udp dport 53 accept\n"
	      "  ip daddr 10.200.0.1 tcp dport 53 accept\n"
	      "  tcp dport 53 counter drop\n",
	      f);
	for (size_t i = 0; i < p->ndeny; i++) {
		char t[AL_NET_PREFIX_STRLEN];
		al_net_prefix_format(&p->deny[i], t);
		fprintf(f, "  ip daddr %s counter drop\n", t);
	}
	fputs("  meta l4proto tcp tproxy ip to 10.200.0.1:15001 accept\n"
	      "  counter drop\n }\n}\n",
	      f);
	if (fclose(f) != 0) {
		perror(file);
		exit(111);
	}
}

static const char peer_script[] =
	"set -e; G=alb-gw-$$; S=alb-gs-$$\n"
	"trap 'ip netns del $G 2>/dev/null; ip netns del $S 2>/dev/null' "
	"EXIT\n"
	"ip netns add $G; ip netns add $S\n"
	"ip netns exec $G sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 "
	"net.ipv6.conf.default.disable_ipv6=1 net.ipv4.ip_forward=0\n"
	"ip netns exec $S sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 "
	"net.ipv6.conf.default.disable_ipv6=1 net.ipv4.ip_forward=0\n"
	"ip -n $G link set lo up; ip -n $S link set lo up\n"
	"ip -n $G link add al-guest type veth peer name eth0 netns $S "
	"address 02:a1:00:00:00:00\n"
	"ip -n $G addr add 10.200.0.1/30 dev al-guest; "
	"ip -n $G link set al-guest up\n"
	"ip -n $G route add local default dev lo table main\n"
	"ip -n $S addr add 10.200.0.2/30 dev eth0; ip -n $S link set eth0 up\n"
	"ip -n $S route add default via 10.200.0.1\n"
	"ip netns exec $G nft -f %s\n";

int main(int argc, char **argv)
{
	int rounds = 200, peer_rounds = 50;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--rounds") == 0)
			rounds = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--peer-rounds") == 0)
			peer_rounds = atoi(argv[i + 1]);
	}
	if (rounds < 1 || peer_rounds < 1 || rounds > 10000 ||
	    peer_rounds > 10000) {
		fprintf(stderr, "usage: netslot-bench [--rounds N] "
				"[--peer-rounds N]\n");
		return 100;
	}
	if (mkdtemp(state) == NULL) {
		perror("mkdtemp");
		return 111;
	}
	al_err e;
	al_netpool *p = &pool;
	if (al_netpool_open(p, state, NULL, &e) < 0)
		die("open pool", &e);
	atexit(cleanup);
	double *prep = calloc((size_t)rounds, sizeof *prep);
	double *take = calloc((size_t)rounds, sizeof *take);
	double *rel = calloc((size_t)rounds, sizeof *rel);
	double *vprep = calloc((size_t)rounds, sizeof *vprep);
	double *peer = calloc((size_t)peer_rounds, sizeof *peer);
	al_netlease *l = calloc((size_t)rounds, sizeof *l);
	if (!prep || !take || !rel || !vprep || !peer || !l)
		return 111;

	printf("Network slots (core/net), %d rounds; peer %d rounds by hand "
	       "with ip(8) and nft(8).\nShared 2-core machine: figures are "
	       "noisy.\n\n",
	       rounds, peer_rounds);
	/* Prepare them all first, as the warm pool does, then take them
	 * (a create's cost) and release them. */
	for (int i = 0; i < rounds; i++) {
		double t = now_us();
		if (al_netpool_prepare(p, AL_NETSLOT_NS, &e) < 0)
			die("prepare", &e);
		prep[i] = now_us() - t;
	}
	for (int i = 0; i < rounds; i++) {
		double t = now_us();
		if (al_netpool_take(p, AL_NETSLOT_NS, &l[i], &e) != 0)
			die("take", &e);
		take[i] = now_us() - t;
	}
	for (int i = 0; i < rounds; i++) {
		double t = now_us();
		al_netpool_release(p, &l[i]);
		rel[i] = now_us() - t;
	}
	for (int i = 0; i < rounds; i++) {
		double t = now_us();
		if (al_netpool_prepare(p, AL_NETSLOT_VM, &e) < 0)
			die("prepare vm", &e);
		vprep[i] = now_us() - t;
	}
	al_netpool_drain(p, AL_NETSLOT_VM);

	char rules[300], script[2000];
	snprintf(rules, sizeof rules, "%s/peer.nft", state);
	write_rules(p, rules);
	snprintf(script, sizeof script, peer_script, rules);
	char cmd[2400];
	snprintf(cmd, sizeof cmd, "%s/peer.sh", state);
	FILE *f = fopen(cmd, "w");
	if (f == NULL || fputs(script, f) < 0 || fclose(f) != 0) {
		perror("peer script");
		return 111;
	}
	char run[2500];
	snprintf(run, sizeof run, "sh %s", cmd);
	for (int i = 0; i < peer_rounds; i++) {
		double t = now_us();
		if (sh(run) != 0) {
			fprintf(stderr, "netslot-bench: the peer failed\n");
			return 111;
		}
		peer[i] = now_us() - t;
	}

	printf("  %-22s %10s %10s %10s   (us)\n", "step", "p50", "p90", "p99");
	double pp = row("prepare ns slot", prep, rounds);
	double tk = row("take prepared slot", take, rounds);
	row("release", rel, rounds);
	row("prepare vm slot", vprep, rounds);
	double pe = row("peer: ip + nft by hand", peer, peer_rounds);
	printf("\nRatios (p50): peer by hand / prepare %.1fx; "
	       "prepare / take %.0fx\n",
	       pe / pp, pp / tk);
	printf("Issue 10 allows a create with a network +3 ms p50; taking a "
	       "prepared slot is %.3f ms of it (%.0f%%). The attach itself "
	       "(setns, or the tap fd to QEMU) is measured once the drivers "
	       "use slots.\n",
	       tk / 1000, tk / 30);
	return 0;
}
