/* gw/resolve: the gateway's upstream lookups against a small fake DNS
 * server on 127.0.0.1 in the same event loop: addresses (A and AAAA)
 * come back classified, the hosts file wins over DNS, failures and timeouts are
 * told apart, lookups are bounded and cancellable, configuration errors
 * show at start. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "gw/dns.h"
#include "gw/resolve.h"

#define IP(a, b, c, d)                                                         \
	(((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) |                       \
	 ((uint32_t)(c) << 8) | (uint32_t)(d))

typedef struct world {
	struct event_base *base;
	int fd;
	struct event *ev;
	char addr[32]; /* "127.0.0.1:port" */
	unsigned queries;
	unsigned qtypes[2]; /* A, AAAA queries seen */
	char last[AL_DNS_NAME_MAX * 4 + 1];
	al_upaddr *classify;
	char dir[64];
} world;

typedef struct outcome {
	bool called;
	al_resolve_result r;
	size_t first; /* index of first_allowed, or SIZE_MAX */
} outcome;

static void put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* The upstream world: two.test has a private and a public address,
 * private.test only a private one, nx.test does not exist, fail.test
 * fails, slow.test never answers, hosts.test says 93.184.216.34. */
static void on_query(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	world *w = arg;
	uint8_t q[512], a[512];
	struct sockaddr_storage from;
	socklen_t fl = sizeof from;
	ssize_t n = recvfrom(fd, q, sizeof q, 0, (struct sockaddr *)&from, &fl);
	if (n <= 0)
		return;
	al_dns_query dq;
	if (al_dns_query_parse(q, (size_t)n, &dq, NULL) != AL_DNS_ASK)
		return;
	w->queries++;
	snprintf(w->last, sizeof w->last, "%s", dq.name);
	uint32_t addrs[4];
	size_t na = 0;
	uint8_t addrs6[4][16];
	size_t na6 = 0;
	unsigned rcode = 0;
	w->qtypes[dq.qtype == AL_DNS_T_AAAA]++;
	if (strcmp(dq.name, "two.test") == 0) {
		addrs[na++] = IP(10, 0, 0, 1);
		addrs[na++] = IP(93, 184, 216, 34);
		addrs[na++] = IP(10, 0, 0, 1); /* a duplicate */
	} else if (strcmp(dq.name, "private.test") == 0) {
		addrs[na++] = IP(10, 1, 2, 3);
	} else if (strcmp(dq.name, "hosts.test") == 0) {
		addrs[na++] = IP(93, 184, 216, 34);
	} else if (strcmp(dq.name, "v6.test") == 0) {
		/* IPv6 only: a global address after the refused forms. */
		static const char *const v6[] = {"::1", "64:ff9b::a00:1",
						 "::ffff:93.184.216.34",
						 "2606:4700:4700::1111"};
		for (size_t i = 0; i < 4; i++)
			inet_pton(AF_INET6, v6[i], addrs6[na6++]);
	} else if (strcmp(dq.name, "dual.test") == 0) {
		addrs[na++] = IP(93, 184, 216, 34);
		inet_pton(AF_INET6, "2606:2800:220:1::1", addrs6[na6++]);
	} else if (strcmp(dq.name, "inward6.test") == 0) {
		static const char *const v6[] = {"fe80::1", "fd00::1",
						 "2002:a00:1::1"};
		for (size_t i = 0; i < 3; i++)
			inet_pton(AF_INET6, v6[i], addrs6[na6++]);
	} else if (strcmp(dq.name, "fail.test") == 0) {
		rcode = AL_DNS_SERVFAIL;
	} else if (strcmp(dq.name, "slow.test") == 0) {
		return;
	} else {
		rcode = AL_DNS_NXDOMAIN;
	}
	if (dq.qtype != AL_DNS_T_A)
		na = 0;
	if (dq.qtype != AL_DNS_T_AAAA)
		na6 = 0;
	put16(a, dq.id);
	put16(a + 2, 0x8180u | rcode);
	put16(a + 4, 1);
	put16(a + 6, (unsigned)(na + na6));
	put16(a + 8, 0);
	put16(a + 10, 0);
	size_t o = 12;
	memcpy(a + o, dq.wire_name, dq.wire_name_len);
	o += dq.wire_name_len;
	put16(a + o, dq.qtype);
	put16(a + o + 2, 1);
	o += 4;
	for (size_t i = 0; i < na; i++) {
		put16(a + o, 0xc00c);
		put16(a + o + 2, 1);
		put16(a + o + 4, 1);
		put16(a + o + 6, 0);
		put16(a + o + 8, 30);
		put16(a + o + 10, 4);
		put16(a + o + 12, addrs[i] >> 16);
		put16(a + o + 14, addrs[i] & 0xffff);
		o += 16;
	}
	for (size_t i = 0; i < na6; i++) {
		put16(a + o, 0xc00c);
		put16(a + o + 2, AL_DNS_T_AAAA);
		put16(a + o + 4, 1);
		put16(a + o + 6, 0);
		put16(a + o + 8, 30);
		put16(a + o + 10, 16);
		memcpy(a + o + 12, addrs6[i], 16);
		o += 28;
	}
	sendto(fd, a, o, 0, (struct sockaddr *)&from, fl);
}

static int setup(void **state)
{
	world *w = calloc(1, sizeof *w);
	w->base = event_base_new();
	w->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(IP(127, 0, 0, 1))};
	assert_int_equal(bind(w->fd, (struct sockaddr *)&sa, sizeof sa), 0);
	socklen_t l = sizeof sa;
	getsockname(w->fd, (struct sockaddr *)&sa, &l);
	snprintf(w->addr, sizeof w->addr, "127.0.0.1:%u", ntohs(sa.sin_port));
	w->ev = event_new(w->base, w->fd, EV_READ | EV_PERSIST, on_query, w);
	event_add(w->ev, NULL);
	w->classify = al_upaddr_new(NULL, NULL, NULL);
	snprintf(w->dir, sizeof w->dir, "/tmp/gw-dns-resolve-XXXXXX");
	assert_non_null(mkdtemp(w->dir));
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	world *w = *state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", w->dir);
	if (system(cmd) != 0)
		return -1;
	event_free(w->ev);
	close(w->fd);
	event_base_free(w->base);
	al_upaddr_free(w->classify);
	free(w);
	return 0;
}

static void on_done(const al_resolve_result *r, void *arg)
{
	outcome *o = arg;
	assert_false(o->called);
	o->called = true;
	o->r = *r;
	o->first = r->first_allowed ? (size_t)(r->first_allowed - r->addrs)
				    : SIZE_MAX;
}

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Run the loop until *flag or ms pass. */
static void pump(world *w, const bool *flag, int ms)
{
	long end = now_ms() + ms;
	while ((flag == NULL || !*flag) && now_ms() < end) {
		event_base_loop(w->base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
}

static al_resolver *resolver(world *w, const char *hosts, unsigned max,
			     unsigned timeout_ms)
{
	al_resolver_config cfg = {
		.upstream_dns = w->addr,
		.hosts = hosts,
		.classify = w->classify,
		.max_inflight = max,
		.timeout_ms = timeout_ms,
	};
	al_err err;
	al_resolver *r = al_resolver_new(w->base, &cfg, &err);
	if (r == NULL)
		fail_msg("%s", err.msg);
	return r;
}

static outcome lookup(world *w, al_resolver *r, const char *name)
{
	outcome o = {0};
	al_err err;
	if (al_resolve(r, name, on_done, &o, &err) == NULL)
		fail_msg("%s: %s", name, err.msg);
	/* never from inside al_resolve */
	assert_false(o.called);
	pump(w, &o.called, 5000);
	assert_true(o.called);
	return o;
}

static void test_classified_answers(void **state)
{
	world *w = *state;
	al_resolver *r = resolver(w, NULL, 0, 2000);
	outcome o = lookup(w, r, "two.test");
	assert_int_equal(o.r.status, 0);
	assert_int_equal(o.r.n, 2); /* the duplicate folded */
	assert_int_equal(o.r.addrs[0].addr, IP(10, 0, 0, 1));
	assert_non_null(o.r.addrs[0].deny);
	assert_non_null(strstr(o.r.addrs[0].deny, "rfc1918"));
	assert_int_equal(o.r.addrs[1].addr, IP(93, 184, 216, 34));
	assert_null(o.r.addrs[1].deny);
	assert_int_equal(o.first, 1);
	/* A name that resolves only inward: nothing may be dialled. */
	o = lookup(w, r, "private.test");
	assert_int_equal(o.r.status, 0);
	assert_int_equal(o.r.n, 1);
	assert_int_equal(o.first, SIZE_MAX);
	assert_non_null(strstr(o.r.addrs[0].deny, "rfc1918"));
	o = lookup(w, r, "nx.test");
	assert_int_equal(o.r.status, AL_ENOENT);
	assert_int_equal(o.r.n, 0);
	assert_non_null(o.r.error);
	o = lookup(w, r, "fail.test");
	assert_int_equal(o.r.status, AL_EUNAVAIL);
	/* The search list is never applied: one query per name and type
	 * (A, AAAA). */
	unsigned before = w->queries;
	o = lookup(w, r, "nx.test");
	assert_int_equal(w->queries, before + 2);
	assert_string_equal(w->last, "nx.test");
	assert_int_equal(al_resolver_inflight(r), 0);
	/* Only canonical names */
	al_err err;
	assert_null(al_resolve(r, "Two.test", on_done, &o, &err));
	assert_int_equal(err.code, AL_EINVAL);
	assert_null(al_resolve(r, "two.test.", on_done, &o, &err));
	al_resolver_free(r);
}

static const char *addr6_text(const al_resolve_addr *a, char *buf)
{
	assert_int_equal(a->family, AF_INET6);
	return inet_ntop(AF_INET6, a->addr6, buf, INET6_ADDRSTRLEN);
}

/* AAAA answers are asked for and classified like A ones: an IPv6-only
 * name is dialled at its global address, past loopback, NAT64 and
 * mapped forms; IPv4 comes first where a name has both; an inward-only
 * IPv6 name has nothing to dial; the operator's IPv6 range lifts the
 * denial for its addresses. */
static void test_ipv6_answers(void **state)
{
	world *w = *state;
	al_resolver *r = resolver(w, NULL, 0, 2000);
	unsigned aaaa = w->qtypes[1];
	outcome o = lookup(w, r, "v6.test");
	assert_true(w->qtypes[1] > aaaa);
	assert_int_equal(o.r.status, 0);
	assert_int_equal(o.r.n, 4);
	char t[INET6_ADDRSTRLEN];
	assert_string_equal(addr6_text(&o.r.addrs[0], t), "::1");
	assert_string_equal(o.r.addrs[0].deny, "loopback");
	assert_non_null(strstr(o.r.addrs[1].deny, "nat64"));
	assert_non_null(strstr(o.r.addrs[2].deny, "mapped"));
	assert_null(o.r.addrs[3].deny);
	assert_int_equal(o.first, 3);
	struct sockaddr_storage ss;
	socklen_t sl = al_resolve_addr_sockaddr(&o.r.addrs[3], 443, &ss);
	assert_int_equal(sl, sizeof(struct sockaddr_in6));
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ss;
	assert_int_equal(s6->sin6_family, AF_INET6);
	assert_int_equal(ntohs(s6->sin6_port), 443);
	assert_string_equal(inet_ntop(AF_INET6, &s6->sin6_addr, t, sizeof t),
			    "2606:4700:4700::1111");
	o = lookup(w, r, "dual.test");
	assert_int_equal(o.r.n, 2);
	assert_int_equal(o.r.addrs[0].family, AF_INET);
	assert_int_equal(o.r.addrs[0].addr, IP(93, 184, 216, 34));
	assert_string_equal(addr6_text(&o.r.addrs[1], t), "2606:2800:220:1::1");
	assert_int_equal(o.first, 0);
	sl = al_resolve_addr_sockaddr(&o.r.addrs[0], 80, &ss);
	assert_int_equal(sl, sizeof(struct sockaddr_in));
	o = lookup(w, r, "inward6.test");
	assert_int_equal(o.r.n, 3);
	assert_string_equal(o.r.addrs[0].deny, "link-local");
	assert_non_null(strstr(o.r.addrs[1].deny, "unique local"));
	assert_non_null(strstr(o.r.addrs[2].deny, "6to4"));
	assert_int_equal(o.first, SIZE_MAX);
	al_resolver_free(r);
	/* An operator's range: its addresses may be dialled, no others. */
	al_upaddr *mine = al_upaddr_new("fd00::/64", NULL, NULL);
	assert_non_null(mine);
	al_resolver_config cfg = {.upstream_dns = w->addr,
				  .classify = mine,
				  .timeout_ms = 2000};
	r = al_resolver_new(w->base, &cfg, NULL);
	assert_non_null(r);
	o = lookup(w, r, "inward6.test");
	assert_int_equal(o.first, 1);
	assert_null(o.r.addrs[1].deny);
	assert_string_equal(o.r.addrs[0].deny, "link-local");
	al_resolver_free(r);
	pump(w, NULL, 50);
	al_upaddr_free(mine);
}

static void test_timeout(void **state)
{
	world *w = *state;
	al_resolver *r = resolver(w, NULL, 0, 300);
	long t0 = now_ms();
	outcome o = lookup(w, r, "slow.test");
	long took = now_ms() - t0;
	assert_int_equal(o.r.status, AL_ETIMEDOUT);
	assert_true(took >= 250 && took < 2000);
	/* evdns's side of the lookup is gone too (ASan would see it) */
	pump(w, NULL, 50);
	al_resolver_free(r);
}

static void test_hosts_first(void **state)
{
	world *w = *state;
	char path[128];
	snprintf(path, sizeof path, "%s/hosts", w->dir);
	FILE *f = fopen(path, "w");
	fputs("# test world\n203.0.113.5 hosts.test alias.test\n"
	      "127.0.0.1 inward.test\n",
	      f);
	fclose(f);
	al_resolver *r = resolver(w, path, 0, 2000);
	unsigned before = w->queries;
	outcome o = lookup(w, r, "hosts.test");
	assert_int_equal(o.r.status, 0);
	assert_int_equal(o.r.n, 1);
	assert_int_equal(o.r.addrs[0].addr, IP(203, 0, 113, 5));
	o = lookup(w, r, "alias.test");
	assert_int_equal(o.r.addrs[0].addr, IP(203, 0, 113, 5));
	/* Classified like any other answer */
	o = lookup(w, r, "inward.test");
	assert_string_equal(o.r.addrs[0].deny, "loopback");
	assert_int_equal(o.first, SIZE_MAX);
	assert_int_equal(w->queries, before); /* DNS never asked */
	/* Names not in it go to DNS */
	o = lookup(w, r, "two.test");
	assert_int_equal(o.r.n, 2);
	assert_int_equal(w->queries, before + 2);
	al_resolver_free(r);
}

static void test_bounded_and_cancel(void **state)
{
	world *w = *state;
	al_resolver *r = resolver(w, NULL, 2, 400);
	outcome a = {0}, b = {0}, c = {0};
	al_err err;
	al_resolve_req *qa = al_resolve(r, "slow.test", on_done, &a, &err);
	al_resolve_req *qb = al_resolve(r, "slow.test", on_done, &b, &err);
	assert_non_null(qa);
	assert_non_null(qb);
	assert_int_equal(al_resolver_inflight(r), 2);
	assert_null(al_resolve(r, "two.test", on_done, &c, &err));
	assert_int_equal(err.code, AL_EQUOTA);
	/* A cancelled lookup never calls back, and frees its place. */
	al_resolve_cancel(qa);
	assert_int_equal(al_resolver_inflight(r), 1);
	assert_non_null(al_resolve(r, "two.test", on_done, &c, &err));
	pump(w, &c.called, 2000);
	assert_int_equal(c.r.status, 0);
	pump(w, &b.called, 2000);
	assert_int_equal(b.r.status, AL_ETIMEDOUT);
	pump(w, NULL, 100);
	assert_false(a.called);
	(void)qb;
	/* Freeing with lookups pending: none calls back, and nothing
	 * leaks once the loop has turned (ASan checks). */
	outcome d = {0};
	assert_non_null(al_resolve(r, "slow.test", on_done, &d, &err));
	assert_non_null(al_resolve(r, "two.test", on_done, &d, &err));
	al_resolver_free(r);
	pump(w, NULL, 600);
	assert_false(d.called);
}

static void test_config_errors(void **state)
{
	world *w = *state;
	static const char *const bad[] = {
		"127.0.0.1",	 "127.0.0.1:",	    "127.0.0.1:0",
		"127.0.0.1:053", "127.0.0.1:65536", "localhost:53",
		":53",		 "[::1]53",	    "[::1]:",
		"127.0.0.1:53 ", "1.2.3:53",	    "127.0.0.1:-1",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		al_resolver_config cfg = {.upstream_dns = bad[i],
					  .classify = w->classify};
		al_err err;
		al_err_clear(&err);
		al_resolver *r = al_resolver_new(w->base, &cfg, &err);
		if (r != NULL)
			fail_msg("accepted '%s'", bad[i]);
		assert_int_equal(err.code, AL_EINVAL);
		assert_non_null(strstr(err.msg, "AIRLOCK_UPSTREAM_DNS"));
	}
	al_resolver_config cfg = {.upstream_dns = "[::1]:53",
				  .classify = w->classify};
	al_resolver *r = al_resolver_new(w->base, &cfg, NULL);
	assert_non_null(r);
	al_resolver_free(r);
	/* A hosts file that cannot be read */
	char path[128];
	snprintf(path, sizeof path, "%s/missing", w->dir);
	cfg = (al_resolver_config){.upstream_dns = w->addr,
				   .hosts = path,
				   .classify = w->classify};
	al_err err;
	assert_null(al_resolver_new(w->base, &cfg, &err));
	assert_non_null(strstr(err.msg, "AIRLOCK_UPSTREAM_HOSTS"));
	/* A resolv.conf without nameservers */
	snprintf(path, sizeof path, "%s/resolv.conf", w->dir);
	FILE *f = fopen(path, "w");
	fputs("search example.com\noptions ndots:5\n", f);
	fclose(f);
	cfg = (al_resolver_config){.resolv_conf = path,
				   .classify = w->classify};
	assert_null(al_resolver_new(w->base, &cfg, &err));
	assert_int_equal(err.code, AL_EINVAL);
	/* No classifier */
	cfg = (al_resolver_config){.upstream_dns = w->addr};
	assert_null(al_resolver_new(w->base, &cfg, &err));
}

static void test_resolv_conf(void **state)
{
	world *w = *state;
	char path[128];
	snprintf(path, sizeof path, "%s/resolv.conf", w->dir);
	FILE *f = fopen(path, "w");
	/* Its search list must not turn nx.test into nx.test.example.com */
	fprintf(f, "search example.com\nnameserver %s\n", w->addr);
	fclose(f);
	al_resolver_config cfg = {.resolv_conf = path,
				  .classify = w->classify,
				  .timeout_ms = 2000};
	al_err err;
	al_resolver *r = al_resolver_new(w->base, &cfg, &err);
	if (r == NULL)
		fail_msg("%s", err.msg);
	unsigned before = w->queries;
	outcome o = lookup(w, r, "nx.test");
	assert_int_equal(o.r.status, AL_ENOENT);
	assert_int_equal(w->queries, before + 2);
	assert_string_equal(w->last, "nx.test");
	o = lookup(w, r, "two.test");
	assert_int_equal(o.first, 1);
	al_resolver_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_classified_answers, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ipv6_answers, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hosts_first, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bounded_and_cancel, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_config_errors, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_resolv_conf, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
