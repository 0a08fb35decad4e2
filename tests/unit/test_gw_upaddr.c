/* gw/upaddr: which upstream addresses the gateway refuses to dial, why,
 * and what an operator's AIRLOCK_UPSTREAM_ALLOW_CIDRS changes. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gw/upaddr.h"

/* NULL when text may be dialled, else the reason. */
static const char *check(const al_upaddr *u, const char *text)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	if (strchr(text, ':') != NULL) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		assert_int_equal(inet_pton(AF_INET6, text, &s6->sin6_addr), 1);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, text, &s4->sin_addr), 1);
	}
	return al_upaddr_check(u, (struct sockaddr *)&ss);
}

typedef struct row {
	const char *addr;
	const char *reason; /* substring, NULL: allowed */
} row;

static void expect(const al_upaddr *u, const row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *got = check(u, rows[i].addr);
		if (rows[i].reason == NULL && got != NULL)
			fail_msg("%s denied (%s)", rows[i].addr, got);
		if (rows[i].reason != NULL &&
		    (got == NULL || strstr(got, rows[i].reason) == NULL))
			fail_msg("%s: got %s, want %s", rows[i].addr,
				 got ? got : "allowed", rows[i].reason);
	}
}

static const row defaults[] = {
	{"93.184.216.34", NULL},
	{"1.1.1.1", NULL},
	{"172.32.0.1", NULL},
	{"192.0.2.10", NULL}, /* TEST-NET: test worlds in netns use it */
	{"0.0.0.0", "unspecified"},
	{"0.1.2.3", "this network"},
	{"127.0.0.1", "loopback"},
	{"127.255.255.254", "loopback"},
	{"10.1.2.3", "rfc1918"},
	{"172.16.0.1", "rfc1918"},
	{"172.31.255.255", "rfc1918"},
	{"192.168.1.1", "rfc1918"},
	{"100.64.0.1", "cgnat"},
	{"100.127.255.255", "cgnat"},
	{"169.254.169.254", "metadata"},
	{"169.254.1.1", "link-local"},
	{"192.0.0.8", "ietf"},
	{"198.18.0.1", "synthetic"},
	{"198.19.255.254", "synthetic"},
	{"224.0.0.251", "multicast"},
	{"239.1.1.1", "multicast"},
	{"240.0.0.1", "reserved"},
	{"255.255.255.255", "broadcast"},
	{"10.200.0.1", "pool"}, /* the default pool, inside 10/8 */
	/* IPv6 */
	{"2606:4700::1111", NULL},
	{"::", "unspecified"},
	{"::1", "loopback"},
	{"::ffff:93.184.216.34", "mapped"},
	{"::ffff:127.0.0.1", "mapped"},
	{"::127.0.0.1", "compatible"},
	{"64:ff9b::a00:1", "nat64"},
	{"64:ff9b:1::1", "nat64"},
	{"2002:a00:1::1", "6to4"},
	{"2001:0:4136:e378::1", "teredo"},
	{"fc00::1", "unique local"},
	{"fd00:ec2::254", "unique local"},
	{"fe80::1", "link-local"},
	{"ff02::1", "multicast"},
	{"100::1", "not global"},
	{"fec0::1", "not global"},
	{"2001:db8::1", "documentation"},
	{"3fff:fff:ffff::1", "documentation"},
	{"3fff:1000::1", NULL},		  /* past 3fff::/20 */
	{"2001:2::1", "ietf"},		  /* benchmarking */
	{"2001:1ff:ffff::1", "ietf"},	  /* the end of 2001::/23 */
	{"2001:200::1", NULL},		  /* past it: global */
	{"2001:4860:4860::8888", NULL},	  /* a public resolver */
	{"::ffff:0:a00:1", "not global"}, /* IPv4-translated */
	{"::ffff:169.254.169.254", "mapped"},
	{"64:ff9b::a9fe:a9fe", "nat64"}, /* metadata, through NAT64 */
	{"2002:a9fe:a9fe::1", "6to4"},	 /* metadata, through 6to4 */
	{"5f00::1", "not global"},	 /* SRv6 SIDs */
	{"ff0e::1", "multicast"},
};

static void test_defaults(void **state)
{
	(void)state;
	al_err err;
	al_upaddr *u = al_upaddr_new(NULL, NULL, &err);
	assert_non_null(u);
	expect(u, defaults, sizeof defaults / sizeof *defaults);
	struct sockaddr sa = {.sa_family = AF_UNIX};
	assert_string_equal(al_upaddr_check(u, &sa), "not ip");
	assert_string_equal(al_upaddr_check(u, NULL), "not ip");
	al_upaddr_free(u);
	/* "" is none too */
	u = al_upaddr_new("", NULL, &err);
	assert_non_null(u);
	expect(u, defaults, sizeof defaults / sizeof *defaults);
	al_upaddr_free(u);
}

static void test_pool(void **state)
{
	(void)state;
	al_net_prefix pool;
	assert_int_equal(al_net_prefix_parse("192.0.2.0/24", &pool, NULL), 0);
	al_err err;
	/* The slot pool is refused even where the operator allows it. */
	al_upaddr *u = al_upaddr_new("192.0.2.0/24", &pool, &err);
	assert_non_null(u);
	const row rows[] = {
		{"192.0.2.1", "pool"},
		{"198.51.100.1", NULL},
	};
	expect(u, rows, 2);
	al_upaddr_free(u);
}

static void test_operator_ranges(void **state)
{
	(void)state;
	al_err err;
	al_upaddr *u = al_upaddr_new(
		"10.9.0.0/16,127.0.0.1/32,fd00:1::/32,0.0.0.0/0", NULL, &err);
	if (u == NULL)
		fail_msg("%s", err.msg);
	const row rows[] = {
		{"10.9.1.1", NULL},
		{"10.8.1.1", NULL}, /* 0.0.0.0/0 */
		{"127.0.0.1", NULL},
		{"169.254.169.254", NULL},
		{"fd00:1::5", NULL},
		{"fd00:2::5", "unique local"},
		/* never, whatever the ranges say */
		{"0.0.0.0", "unspecified"},
		{"198.18.0.9", "synthetic"},
		{"10.200.0.5", "pool"},
		{"224.0.0.1", "multicast"},
		{"255.255.255.255", "broadcast"},
		{"::ffff:10.9.1.1", "mapped"},
		{"::", "unspecified"},
	};
	expect(u, rows, sizeof rows / sizeof *rows);
	al_upaddr_free(u);

	u = al_upaddr_new("10.9.0.0/16", NULL, &err);
	const row narrow[] = {
		{"10.9.255.255", NULL},
		{"10.10.0.1", "rfc1918"},
	};
	expect(u, narrow, 2);
	assert_null(al_upaddr_check4(u, 0x0a090001u));
	al_upaddr_free(u);
}

static void test_bad_ranges(void **state)
{
	(void)state;
	static const char *const bad[] = {
		",",
		"10.0.0.0/8,",
		",10.0.0.0/8",
		"10.0.0.0/8,,192.168.0.0/16",
		"10.0.0.0/8 ",
		" 10.0.0.0/8",
		"10.0.0.0/8, 192.168.0.0/16",
		"10.0.0.1/8",
		"10.0.0.0",
		"10.0.0.0/33",
		"fd00::/129",
		"fd00::1/16",
		"fd00::/016",
		"fd00::",
		"fd00::/",
		"example.com/8",
		"10.0.0.0/8;192.168.0.0/16",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		al_err err;
		al_err_clear(&err);
		al_upaddr *u = al_upaddr_new(bad[i], NULL, &err);
		if (u != NULL)
			fail_msg("accepted '%s'", bad[i]);
		assert_int_equal(err.code, AL_EINVAL);
		assert_non_null(strstr(err.msg,
				       "AIRLOCK_UPSTREAM_ALLOW_CIDRS"));
	}
	/* At most AL_UPADDR_RANGES_MAX ranges */
	char many[AL_UPADDR_RANGES_MAX * 16 + 32] = "";
	for (int i = 0; i <= AL_UPADDR_RANGES_MAX; i++) {
		char one[24];
		snprintf(one, sizeof one, "%s10.%d.0.0/16", i ? "," : "", i);
		strcat(many, one);
	}
	al_err err;
	assert_null(al_upaddr_new(many, NULL, &err));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_pool),
		cmocka_unit_test(test_operator_ranges),
		cmocka_unit_test(test_bad_ranges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
