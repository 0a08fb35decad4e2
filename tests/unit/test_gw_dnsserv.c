/* gw/dnsserv: the guest's DNS server over real loopback sockets on a real
 * event_base: answers per policy and type, the same synthetic address on
 * UDP and TCP, strangers ignored, TCP connections bounded and timed out,
 * and every answer logged. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <resolv.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "gw/dns.h"
#include "gw/dnsserv.h"

#define LO 0x7f000001u	/* 127.0.0.1: the "guest" */
#define LO2 0x7f000002u /* 127.0.0.2: someone else */
#define LOG_MAX 64

typedef struct fixture {
	struct event_base *base;
	al_fakeip *map;
	al_dnsserv *srv;
	int udp, tcp;
	struct sockaddr_in udp_addr, tcp_addr;
	al_dnsserv_event log[LOG_MAX];
	char log_names[LOG_MAX][64];
	size_t n_log;
} fixture;

static void decide(void *arg, const char *name, al_dnsserv_decision *out)
{
	(void)arg;
	out->allow = strcmp(name, "pypi.org") == 0 ||
		     strcmp(name, "files.pythonhosted.org") == 0;
	snprintf(out->reason, sizeof out->reason, "%s",
		 out->allow ? "allowed by test" : "not on the test's list");
}

static void logged(void *arg, const al_dnsserv_event *ev)
{
	fixture *f = arg;
	if (f->n_log >= LOG_MAX)
		return;
	f->log[f->n_log] = *ev;
	snprintf(f->log_names[f->n_log], 64, "%s", ev->name);
	f->log[f->n_log].name = f->log_names[f->n_log];
	f->log[f->n_log].reason = NULL; /* valid during the call only */
	f->n_log++;
}

static int bound(int type, struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	memset(sa, 0, sizeof *sa);
	sa->sin_family = AF_INET;
	sa->sin_addr.s_addr = htonl(LO);
	assert_int_equal(bind(fd, (struct sockaddr *)sa, sizeof *sa), 0);
	socklen_t l = sizeof *sa;
	assert_int_equal(getsockname(fd, (struct sockaddr *)sa, &l), 0);
	if (type == SOCK_STREAM)
		assert_int_equal(listen(fd, 64), 0);
	return fd;
}

static fixture *setup_with(uint32_t guest, unsigned max_tcp, unsigned idle,
			   uint32_t cap)
{
	static fixture f;
	memset(&f, 0, sizeof f);
	f.base = event_base_new();
	f.map = al_fakeip_new(cap, NULL);
	f.udp = bound(SOCK_DGRAM, &f.udp_addr);
	f.tcp = bound(SOCK_STREAM, &f.tcp_addr);
	al_dnsserv_config cfg = {
		.udp_fd = f.udp,
		.tcp_fd = f.tcp,
		.guest = guest,
		.map = f.map,
		.decide = decide,
		.log = logged,
		.arg = &f,
		.max_tcp = max_tcp,
		.tcp_idle_ms = idle,
	};
	al_err err;
	f.srv = al_dnsserv_new(f.base, &cfg, &err);
	if (f.srv == NULL)
		fail_msg("%s", err.msg);
	return &f;
}

static void teardown(fixture *f)
{
	al_dnsserv_free(f->srv);
	al_fakeip_free(f->map);
	close(f->udp);
	close(f->tcp);
	event_base_free(f->base);
}

static size_t query(uint8_t *b, uint16_t id, const char *name, unsigned qtype)
{
	size_t n = 0;
	b[n++] = (uint8_t)(id >> 8);
	b[n++] = (uint8_t)id;
	b[n++] = 0x01; /* RD */
	b[n++] = 0;
	const uint8_t counts[8] = {0, 1, 0, 0, 0, 0, 0, 0};
	memcpy(b + n, counts, 8);
	n += 8;
	while (*name) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);
		b[n++] = (uint8_t)l;
		memcpy(b + n, name, l);
		n += l;
		name += l + (dot != NULL);
	}
	b[n++] = 0;
	b[n++] = (uint8_t)(qtype >> 8);
	b[n++] = (uint8_t)qtype;
	b[n++] = 0;
	b[n++] = 1;
	return n;
}

/* Run the loop until fd is readable (or ms pass); true when readable. */
static bool pump_until(fixture *f, int fd, int ms)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 5) > 0)
			return true;
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		long el = (t.tv_sec - t0.tv_sec) * 1000 +
			  (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (el > ms)
			return false;
	}
}

static int udp_client(uint32_t from)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(from)};
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	return fd;
}

/* One UDP exchange; the answer's length, or 0 when none came. */
static size_t udp_ask(fixture *f, int fd, const uint8_t *q, size_t qn,
		      uint8_t *ans)
{
	assert_int_equal(sendto(fd, q, qn, 0, (struct sockaddr *)&f->udp_addr,
				sizeof f->udp_addr),
			 (ssize_t)qn);
	if (!pump_until(f, fd, 300))
		return 0;
	ssize_t n = recv(fd, ans, 1024, 0);
	assert_true(n > 0);
	return (size_t)n;
}

static unsigned rcode_of(const uint8_t *a)
{
	return a[3] & 0xf;
}

static unsigned ancount(const uint8_t *a)
{
	return (unsigned)a[6] << 8 | a[7];
}

/* The address of the one A record after the question (0 if none). */
static uint32_t a_record(const uint8_t *a, size_t n)
{
	size_t o = 12;
	while (o < n && a[o] != 0)
		o += 1 + a[o];
	o += 1 + 4; /* root, type, class */
	if (ancount(a) != 1 || o + 16 > n)
		return 0;
	const uint8_t *rd = a + o +
			    12; /* name pointer, type, class, ttl, len */
	return (uint32_t)rd[0] << 24 | (uint32_t)rd[1] << 16 |
	       (uint32_t)rd[2] << 8 | rd[3];
}

static void test_udp_answers(void **state)
{
	(void)state;
	fixture *f = setup_with(LO, 0, 0, AL_FAKEIP_CAP_DEFAULT);
	int c = udp_client(LO);
	uint8_t q[512], a[1024];
	size_t qn = query(q, 7, "PyPI.org", AL_DNS_T_A);
	size_t an = udp_ask(f, c, q, qn, a);
	assert_true(an > 0);
	assert_int_equal(a[0] << 8 | a[1], 7);
	assert_int_equal(rcode_of(a), AL_DNS_NOERROR);
	assert_int_equal(ancount(a), 1);
	assert_int_equal(a_record(a, an), 0xc6120001u);
	assert_string_equal(al_fakeip_name(f->map, 0xc6120001u), "pypi.org");
	/* Asked again: the same address */
	an = udp_ask(f, c, q, qn, a);
	assert_int_equal(a_record(a, an), 0xc6120001u);
	/* Another allowed name: the next address */
	qn = query(q, 8, "files.pythonhosted.org", AL_DNS_T_A);
	an = udp_ask(f, c, q, qn, a);
	assert_int_equal(a_record(a, an), 0xc6120002u);
	/* AAAA and HTTPS of an allowed name: NODATA */
	qn = query(q, 9, "pypi.org", AL_DNS_T_AAAA);
	an = udp_ask(f, c, q, qn, a);
	assert_int_equal(rcode_of(a), AL_DNS_NOERROR);
	assert_int_equal(ancount(a), 0);
	qn = query(q, 10, "pypi.org", AL_DNS_T_HTTPS);
	an = udp_ask(f, c, q, qn, a);
	assert_int_equal(rcode_of(a), AL_DNS_NOERROR);
	assert_int_equal(ancount(a), 0);
	/* Not allowed: NXDOMAIN, for A and AAAA alike, and no address
	 * handed out for it */
	qn = query(q, 11, "evil.example", AL_DNS_T_A);
	an = udp_ask(f, c, q, qn, a);
	assert_int_equal(rcode_of(a), AL_DNS_NXDOMAIN);
	assert_int_equal(ancount(a), 0);
	qn = query(q, 12, "evil.example", AL_DNS_T_AAAA);
	an = udp_ask(f, c, q, qn, a);
	assert_int_equal(rcode_of(a), AL_DNS_NXDOMAIN);
	assert_int_equal(al_fakeip_count(f->map), 2);
	/* Malformed: FORMERR; a response: nothing */
	qn = query(q, 13, "pypi.org", AL_DNS_T_A);
	q[5] = 2; /* QDCOUNT 2 */
	an = udp_ask(f, c, q, qn, a);
	assert_int_equal(rcode_of(a), AL_DNS_FORMERR);
	q[5] = 1;
	q[2] |= 0x80;
	assert_int_equal(udp_ask(f, c, q, qn, a), 0);
	/* The log saw each one, allowed or not, with the reason. */
	assert_int_equal(f->n_log, 9);
	assert_string_equal(f->log[0].name, "pypi.org");
	assert_true(f->log[0].allow);
	assert_int_equal(f->log[0].addr, 0xc6120001u);
	assert_false(f->log[0].tcp);
	assert_string_equal(f->log[5].name, "evil.example");
	assert_false(f->log[5].allow);
	assert_int_equal(f->log[5].rcode, AL_DNS_NXDOMAIN);
	assert_int_equal(f->log[7].rcode, AL_DNS_FORMERR);
	assert_int_equal(f->log[8].rcode, -1);
	close(c);
	teardown(f);
}

static void test_udp_stranger_ignored(void **state)
{
	(void)state;
	fixture *f = setup_with(LO2, 0, 0, 16);
	int c = udp_client(LO); /* not the guest */
	uint8_t q[512], a[1024];
	size_t qn = query(q, 1, "pypi.org", AL_DNS_T_A);
	assert_int_equal(udp_ask(f, c, q, qn, a), 0);
	assert_int_equal(f->n_log, 0);
	assert_int_equal(al_fakeip_count(f->map), 0);
	close(c);
	int g = udp_client(LO2);
	assert_true(udp_ask(f, g, q, qn, a) > 0);
	close(g);
	teardown(f);
}

static void test_map_full(void **state)
{
	(void)state;
	fixture *f = setup_with(LO, 0, 0, 1);
	int c = udp_client(LO);
	uint8_t q[512], a[1024];
	size_t qn = query(q, 1, "pypi.org", AL_DNS_T_A);
	size_t an = udp_ask(f, c, q, qn, a);
	assert_int_equal(a_record(a, an), 0xc6120001u);
	qn = query(q, 2, "files.pythonhosted.org", AL_DNS_T_A);
	an = udp_ask(f, c, q, qn, a);
	assert_int_equal(rcode_of(a), AL_DNS_SERVFAIL);
	assert_false(f->log[1].allow);
	/* The known name still answers */
	qn = query(q, 3, "pypi.org", AL_DNS_T_A);
	an = udp_ask(f, c, q, qn, a);
	assert_int_equal(a_record(a, an), 0xc6120001u);
	close(c);
	teardown(f);
}

static int tcp_client(fixture *f)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&f->tcp_addr,
				 sizeof f->tcp_addr),
			 0);
	return fd;
}

/* Read one framed answer; its length, 0 on EOF or timeout. */
static size_t tcp_read(fixture *f, int fd, uint8_t *a)
{
	size_t got = 0, need = 2;
	while (got < need) {
		if (!pump_until(f, fd, 500))
			return 0;
		ssize_t n = recv(fd, a + got, need - got, MSG_DONTWAIT);
		if (n == 0)
			return 0;
		if (n < 0 && errno == EAGAIN)
			continue;
		assert_true(n > 0);
		got += (size_t)n;
		if (got == 2)
			need = 2 + al_dns_tcp_len(a);
	}
	memmove(a, a + 2, got - 2);
	return got - 2;
}

static bool closed_by_server(fixture *f, int fd, int ms)
{
	uint8_t b[64];
	while (pump_until(f, fd, ms)) {
		ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
		if (n < 0 && errno != EAGAIN)
			return true;
	}
	return false;
}

static void test_tcp(void **state)
{
	(void)state;
	fixture *f = setup_with(LO, 0, 0, 16);
	int c = tcp_client(f);
	/* Two pipelined queries, the first in two pieces. */
	uint8_t buf[1024], a[1024];
	size_t n1 = query(buf + 2, 21, "pypi.org", AL_DNS_T_A);
	al_dns_tcp_prefix(n1, buf);
	size_t n2 = query(buf + 2 + n1 + 2, 22, "evil.example", AL_DNS_T_A);
	al_dns_tcp_prefix(n2, buf + 2 + n1);
	assert_int_equal(send(c, buf, 5, 0), 5);
	event_base_loop(f->base, EVLOOP_NONBLOCK);
	size_t rest = 2 + n1 + 2 + n2 - 5;
	assert_int_equal(send(c, buf + 5, rest, 0), (ssize_t)rest);
	size_t an = tcp_read(f, c, a);
	assert_true(an > 0);
	assert_int_equal(a[0] << 8 | a[1], 21);
	assert_int_equal(a_record(a, an), 0xc6120001u);
	an = tcp_read(f, c, a);
	assert_int_equal(a[0] << 8 | a[1], 22);
	assert_int_equal(rcode_of(a), AL_DNS_NXDOMAIN);
	assert_true(f->log[0].tcp);
	/* UDP gives the same address as TCP did */
	int u = udp_client(LO);
	uint8_t q[512];
	size_t qn = query(q, 23, "pypi.org", AL_DNS_T_A);
	an = udp_ask(f, u, q, qn, a);
	assert_int_equal(a_record(a, an), 0xc6120001u);
	close(u);
	assert_int_equal(al_dnsserv_tcp_count(f->srv), 1);
	/* A length past AL_DNS_QUERY_MAX: closed, not buffered */
	al_dns_tcp_prefix(AL_DNS_QUERY_MAX + 1, buf);
	assert_int_equal(send(c, buf, 2, 0), 2);
	assert_true(closed_by_server(f, c, 500));
	assert_int_equal(al_dnsserv_tcp_count(f->srv), 0);
	close(c);
	/* A response sent over TCP: closed too */
	c = tcp_client(f);
	n1 = query(buf + 2, 24, "pypi.org", AL_DNS_T_A);
	buf[4] |= 0x80;
	al_dns_tcp_prefix(n1, buf);
	assert_int_equal(send(c, buf, n1 + 2, 0), (ssize_t)(n1 + 2));
	assert_true(closed_by_server(f, c, 500));
	close(c);
	teardown(f);
}

static void test_tcp_bounds(void **state)
{
	(void)state;
	fixture *f = setup_with(LO, 2, 200, 16);
	int c1 = tcp_client(f), c2 = tcp_client(f);
	pump_until(f, c1, 50);
	assert_int_equal(al_dnsserv_tcp_count(f->srv), 2);
	/* A third connection is closed at once. */
	int c3 = tcp_client(f);
	assert_true(closed_by_server(f, c3, 500));
	assert_int_equal(al_dnsserv_tcp_count(f->srv), 2);
	close(c3);
	/* Half a query and then silence: closed after the idle time. */
	uint8_t buf[512];
	size_t n = query(buf + 2, 1, "pypi.org", AL_DNS_T_A);
	al_dns_tcp_prefix(n, buf);
	assert_int_equal(send(c1, buf, 6, 0), 6);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_true(closed_by_server(f, c1, 1000));
	assert_true(closed_by_server(f, c2, 1000));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long ms = (t1.tv_sec - t0.tv_sec) * 1000 +
		  (t1.tv_nsec - t0.tv_nsec) / 1000000;
	assert_true(ms >= 20 && ms < 1000);
	assert_int_equal(al_dnsserv_tcp_count(f->srv), 0);
	close(c1);
	close(c2);
	/* A stranger's TCP connection is closed at once. */
	al_dnsserv_free(f->srv);
	al_dnsserv_config cfg = {
		.udp_fd = -1,
		.tcp_fd = f->tcp,
		.guest = LO2,
		.map = f->map,
		.decide = decide,
	};
	f->srv = al_dnsserv_new(f->base, &cfg, NULL);
	assert_non_null(f->srv);
	int s = tcp_client(f);
	assert_true(closed_by_server(f, s, 500));
	close(s);
	teardown(f);
}

/* Out of descriptors: the listener pauses instead of spinning, and picks
 * the waiting connection up once descriptors are back. */
static void test_accept_out_of_fds(void **state)
{
	(void)state;
	fixture *f = setup_with(LO, 0, 0, 16);
	int c = tcp_client(f);
	struct rlimit old;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	int lowest = dup(0);
	assert_true(lowest >= 0);
	close(lowest);
	struct rlimit low = {(rlim_t)lowest, old.rlim_max};
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	pump_until(f, c, 150);
	assert_int_equal(al_dnsserv_tcp_count(f->srv), 0);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	uint8_t buf[512], a[1024];
	size_t n = query(buf + 2, 31, "pypi.org", AL_DNS_T_A);
	al_dns_tcp_prefix(n, buf);
	assert_int_equal(send(c, buf, n + 2, 0), (ssize_t)(n + 2));
	size_t an = tcp_read(f, c, a);
	assert_true(an > 0);
	assert_int_equal(a_record(a, an), 0xc6120001u);
	close(c);
	teardown(f);
}

/* glibc's own stub resolver, over UDP, EDNS and TCP, against the server:
 * it takes the answers as valid (ids, question echo, flags, framing). */
typedef struct stub_run {
	struct sockaddr_in server;
	unsigned long options;
	int len_a, len_nx, len_aaaa;
	int herr_nx, herr_aaaa;
	uint8_t a[512];
	_Atomic bool done;
} stub_run;

static void *stub_thread(void *arg)
{
	stub_run *r = arg;
	struct __res_state st;
	memset(&st, 0, sizeof st);
	res_ninit(&st);
	st.nscount = 1;
	st.nsaddr_list[0] = r->server;
	st.retrans = 1;
	st.retry = 1;
	st.options |= r->options;
	uint8_t ans[512];
	r->len_a = res_nquery(&st, "PyPI.org", C_IN, T_A, r->a, sizeof r->a);
	r->len_nx = res_nquery(&st, "evil.example", C_IN, T_A, ans, sizeof ans);
	r->herr_nx = st.res_h_errno;
	r->len_aaaa = res_nquery(&st, "pypi.org", C_IN, T_AAAA, ans,
				 sizeof ans);
	r->herr_aaaa = st.res_h_errno;
	res_nclose(&st);
	r->done = true;
	return NULL;
}

static void test_glibc_stub(void **state)
{
	(void)state;
	static const unsigned long modes[] = {0, RES_USE_EDNS0, RES_USEVC};
	for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
		fixture *f = setup_with(LO, 0, 0, 16);
		stub_run r = {.options = modes[i]};
		r.server = modes[i] == RES_USEVC ? f->tcp_addr : f->udp_addr;
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, stub_thread, &r), 0);
		for (int ms = 0; !r.done && ms < 10000; ms++) {
			event_base_loop(f->base, EVLOOP_NONBLOCK);
			usleep(1000);
		}
		pthread_join(t, NULL);
		if (r.len_a <= 0)
			fail_msg("mode %zu: A query failed", i);
		assert_int_equal(a_record(r.a, (size_t)r.len_a), 0xc6120001u);
		assert_int_equal(r.len_nx, -1);
		assert_int_equal(r.herr_nx, HOST_NOT_FOUND);
		assert_int_equal(r.len_aaaa, -1);
		assert_int_equal(r.herr_aaaa, NO_DATA);
		assert_int_equal(f->n_log, 3);
		assert_int_equal(f->log[0].tcp, modes[i] == RES_USEVC);
		teardown(f);
	}
}

static void test_handle_without_sockets(void **state)
{
	(void)state;
	struct event_base *base = event_base_new();
	al_fakeip *map = al_fakeip_new(16, NULL);
	al_dnsserv_config cfg = {.udp_fd = -1,
				 .tcp_fd = -1,
				 .map = map,
				 .decide = decide};
	al_dnsserv *s = al_dnsserv_new(base, &cfg, NULL);
	assert_non_null(s);
	uint8_t q[512], a[AL_DNS_ANSWER_MAX];
	size_t qn = query(q, 5, "pypi.org", AL_DNS_T_A), an;
	assert_int_equal(al_dnsserv_handle(s, q, qn, false, a, sizeof a, &an,
					   NULL),
			 0);
	assert_int_equal(a_record(a, an), 0xc6120001u);
	/* No decide callback, no server */
	cfg.decide = NULL;
	al_err err;
	assert_null(al_dnsserv_new(base, &cfg, &err));
	assert_int_equal(err.code, AL_EINVAL);
	al_dnsserv_free(s);
	al_fakeip_free(map);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_udp_answers),
		cmocka_unit_test(test_udp_stranger_ignored),
		cmocka_unit_test(test_map_full),
		cmocka_unit_test(test_tcp),
		cmocka_unit_test(test_tcp_bounds),
		cmocka_unit_test(test_accept_out_of_fds),
		cmocka_unit_test(test_glibc_stub),
		cmocka_unit_test(test_handle_without_sockets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
