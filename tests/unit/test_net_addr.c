/* net/addr: prefixes and the address plan of network slots (pool + 4i:
 * .1 the gateway, .2 the sandbox, MAC 02:a1:<i>), and the never-list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/addr.h"

#define IP(a, b, c, d)                                                         \
	(((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) |                       \
	 ((uint32_t)(c) << 8) | (uint32_t)(d))

static al_net_prefix parse_ok(const char *t)
{
	al_net_prefix p;
	al_err err;
	if (al_net_prefix_parse(t, &p, &err) != 0)
		fail_msg("'%s' rejected: %s", t, err.msg);
	return p;
}

static void test_parse(void **state)
{
	(void)state;
	al_net_prefix p = parse_ok("10.200.0.0/16");
	assert_int_equal(p.addr, IP(10, 200, 0, 0));
	assert_int_equal(p.len, 16);
	p = parse_ok("0.0.0.0/0");
	assert_int_equal(p.addr, 0);
	assert_int_equal(p.len, 0);
	p = parse_ok("192.0.2.7/32");
	assert_int_equal(p.addr, IP(192, 0, 2, 7));
	char s[AL_NET_PREFIX_STRLEN];
	al_net_prefix_format(&(al_net_prefix){IP(255, 255, 255, 255), 32}, s);
	assert_string_equal(s, "255.255.255.255/32");

	static const char *const bad[] = {
		"10.200.0.0",	 "10.200.0.0/",
		"10.200.0.0/33", "10.200.0.0/-1",
		"10.200.0.1/16", "10.200.0/16",
		"/16",		 "",
		"10.200.0.0/1x", "10.200.0.0/ 16",
		"a.b.c.d/8",	 "10.200.0.0.0/16",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		al_err err;
		al_err_clear(&err);
		if (al_net_prefix_parse(bad[i], &p, &err) != -1)
			fail_msg("'%s' accepted", bad[i]);
		assert_int_equal(err.code, AL_EINVAL);
	}
	al_err err;
	assert_int_equal(al_net_prefix_parse(NULL, &p, &err), -1);
}

static void test_overlap(void **state)
{
	(void)state;
	al_net_prefix pool = parse_ok("10.200.0.0/16");
	assert_true(al_net_prefix_overlap(&pool,
					  &(al_net_prefix){IP(10, 0, 0, 0),
							   8}));
	assert_true(al_net_prefix_overlap(&pool,
					  &(al_net_prefix){IP(10, 200, 5, 0),
							   24}));
	assert_false(al_net_prefix_overlap(&pool,
					   &(al_net_prefix){IP(10, 201, 0, 0),
							    16}));
	assert_true(al_net_prefix_contains(&pool, IP(10, 200, 255, 255)));
	assert_false(al_net_prefix_contains(&pool, IP(10, 201, 0, 0)));
	assert_int_equal(al_net_prefix_mask(0), 0);
	assert_int_equal(al_net_prefix_mask(30), 0xfffffffc);
	assert_int_equal(al_net_prefix_mask(32), 0xffffffff);
}

static void test_slots(void **state)
{
	(void)state;
	assert_int_equal(al_net_pool_slots(&(al_net_prefix){0, 16}), 16384);
	assert_int_equal(al_net_pool_slots(&(al_net_prefix){0, 30}), 1);
	assert_int_equal(al_net_pool_slots(&(al_net_prefix){0, 31}), 0);
	assert_int_equal(al_net_pool_slots(&(al_net_prefix){0, 8}),
			 AL_NET_SLOTS_MAX);

	al_net_prefix pool = parse_ok(AL_NET_POOL_DEFAULT);
	al_net_slot_addr a;
	al_err err;
	assert_int_equal(al_net_slot_addr_of(&pool, 0, &a, &err), 0);
	assert_int_equal(a.gateway, IP(10, 200, 0, 1));
	assert_int_equal(a.guest, IP(10, 200, 0, 2));
	assert_memory_equal(a.guest_mac, ((uint8_t[6]){2, 0xa1, 0, 0, 0, 0}),
			    6);
	assert_int_equal(al_net_slot_addr_of(&pool, 16383, &a, &err), 0);
	assert_int_equal(a.gateway, IP(10, 200, 255, 253));
	assert_int_equal(a.guest, IP(10, 200, 255, 254));
	assert_memory_equal(a.guest_mac,
			    ((uint8_t[6]){2, 0xa1, 0, 0, 0x3f, 0xff}), 6);
	/* Locally administered, unicast. */
	assert_int_equal(a.guest_mac[0] & 3, 2);
	assert_int_equal(al_net_slot_addr_of(&pool, 16384, &a, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	/* No two slots share an address. */
	for (uint32_t i = 1; i < 16384; i++) {
		al_net_slot_addr b;
		al_net_slot_addr_of(&pool, i - 1, &a, NULL);
		al_net_slot_addr_of(&pool, i, &b, NULL);
		assert_int_equal(b.gateway - a.gateway, 4);
	}
}

static int never(uint32_t addr)
{
	for (size_t i = 0; i < al_net_never_count; i++)
		if (al_net_prefix_contains(&al_net_never[i], addr))
			return 1;
	return 0;
}

static void test_never_list(void **state)
{
	(void)state;
	assert_true(never(IP(169, 254, 169, 254)));
	assert_true(never(IP(10, 1, 2, 3)));
	assert_true(never(IP(172, 31, 0, 1)));
	assert_true(never(IP(192, 168, 0, 1)));
	assert_true(never(IP(100, 64, 0, 1)));
	assert_true(never(IP(127, 0, 0, 1)));
	assert_true(never(IP(0, 0, 0, 0)));
	assert_true(never(IP(224, 0, 0, 251)));
	assert_true(never(IP(255, 255, 255, 255)));
	/* The gateway's synthetic range and public addresses pass on to
	 * the gateway, which decides. */
	assert_false(never(IP(198, 18, 0, 1)));
	assert_false(never(IP(198, 19, 255, 254)));
	assert_false(never(IP(198, 51, 100, 7)));
	assert_false(never(IP(1, 1, 1, 1)));
	assert_false(never(IP(172, 32, 0, 1)));
	for (size_t i = 0; i < al_net_never_count; i++)
		assert_int_equal(
			al_net_never[i].addr &
				~al_net_prefix_mask(al_net_never[i].len),
			0);
}

/* What a pool may be, before the host's routes are looked at. */
static void test_pool_parse(void **state)
{
	(void)state;
	al_net_prefix p;
	al_err err;
	assert_int_equal(al_net_pool_parse("10.77.0.0/16", &p, &err), 0);
	assert_int_equal(p.addr, IP(10, 77, 0, 0));
	assert_int_equal(p.len, 16);
	assert_int_equal(al_net_pool_parse("100.64.0.0/30", &p, &err), 0);
	static const struct {
		const char *text, *says;
	} bad[] = {
		{"10.77.0.1/16", "host bits"},
		{"10.77.0.4/31", "smaller than one /30"},
		{"198.19.0.0/16", "overlaps 198.18.0.0/15"},
		{"0.0.0.0/9", "overlaps 0.0.0.0/8"},
		{"127.1.0.0/16", "overlaps 127.0.0.0/8"},
		{"169.254.0.0/24", "overlaps 169.254.0.0/16"},
		{"239.0.0.0/8", "overlaps 224.0.0.0/4"},
		{"250.0.0.0/8", "overlaps 240.0.0.0/4"},
		{"pool", "not an IPv4 prefix"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		p = (al_net_prefix){1, 1};
		if (al_net_pool_parse(bad[i].text, &p, &err) != -1)
			fail_msg("pool %s accepted", bad[i].text);
		assert_int_equal(err.code, AL_EINVAL);
		if (strstr(err.msg, bad[i].says) == NULL)
			fail_msg("pool %s: \"%s\" does not say \"%s\"",
				 bad[i].text, err.msg, bad[i].says);
		/* Untouched on failure. */
		assert_int_equal(p.addr, 1);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_overlap),
		cmocka_unit_test(test_slots),
		cmocka_unit_test(test_never_list),
		cmocka_unit_test(test_pool_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
