/* vmnet: a vm sandbox's MAC, derived from its id. Anything on the host
 * that knows the id (API, egress gateway) must compute the same address,
 * and no two sandboxes may share one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "vm/net.h"

static void mac_of(const char *id, uint8_t mac[6])
{
	al_err err;
	al_err_clear(&err);
	if (al_vm_mac_for_id(id, mac, &err) != 0)
		fail_msg("id '%s' rejected: %s", id, err.msg);
}

static void test_format(void **state)
{
	(void)state;
	char s[AL_VM_MAC_STRLEN];
	memset(s, 'x', sizeof s);
	al_vm_mac_format((const uint8_t[6]){0x02, 0xab, 0xcd, 0xef, 0x01, 0x9f},
			 s);
	assert_string_equal(s, "02:ab:cd:ef:01:9f");
	al_vm_mac_format((const uint8_t[6]){0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
			 s);
	assert_string_equal(s, "ff:ff:ff:ff:ff:ff");
	assert_int_equal(strlen(s), AL_VM_MAC_STRLEN - 1);
	al_vm_mac_format((const uint8_t[6]){0}, s);
	assert_string_equal(s, "00:00:00:00:00:00");
}

/* The derivation is a contract with the egress gateway: 0x02, then the
 * first 5 bytes of SHA-256(id). SHA-256("abc") = ba7816bf8f01... */
static void test_known_value(void **state)
{
	(void)state;
	uint8_t mac[6];
	char s[AL_VM_MAC_STRLEN];
	mac_of("abc", mac);
	al_vm_mac_format(mac, s);
	assert_string_equal(s, "02:ba:78:16:bf:8f");
}

static void test_deterministic(void **state)
{
	(void)state;
	uint8_t a[6], b[6];
	mac_of("kygbuk7f8x99y8g6b4i0", a);
	mac_of("kygbuk7f8x99y8g6b4i0", b);
	assert_memory_equal(a, b, 6);
}

static void test_locally_administered_unicast(void **state)
{
	(void)state;
	char id[32];
	for (int i = 0; i < 500; i++) {
		uint8_t mac[6];
		snprintf(id, sizeof id, "sbx-%d", i);
		mac_of(id, mac);
		assert_int_equal(mac[0], 0x02);
		/* bit 0: multicast (must be clear); bit 1: local (set) */
		assert_int_equal(mac[0] & 0x01, 0);
		assert_int_equal(mac[0] & 0x02, 0x02);
	}
}

static void test_distinct_ids_distinct_macs(void **state)
{
	(void)state;
	enum { N = 2000 };
	static uint8_t macs[N][6];
	char id[32];
	for (int i = 0; i < N; i++) {
		snprintf(id, sizeof id, "a%019d", i);
		mac_of(id, macs[i]);
	}
	/* 40 bits of hash: a collision among 2000 would be a bug, not bad
	 * luck (p ~ 2e-6). */
	for (int i = 0; i < N; i++)
		for (int j = i + 1; j < N; j++)
			if (memcmp(macs[i], macs[j], 6) == 0)
				fail_msg("ids %d and %d share a MAC", i, j);
	/* Ids that differ in one character only. */
	uint8_t x[6], y[6];
	mac_of("sandbox-a", x);
	mac_of("sandbox-b", y);
	assert_memory_not_equal(x, y, 6);
	/* Never the address QEMU gives every machine's NIC. */
	char s[AL_VM_MAC_STRLEN];
	al_vm_mac_format(x, s);
	assert_string_not_equal(s, AL_VM_TEMPLATE_MAC);
}

static void test_invalid_id_rejected(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", "-leading-dash", "Upper", "a.b", "a/b", "a b", "a\nb",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		uint8_t mac[6] = {0xee, 0xee, 0xee, 0xee, 0xee, 0xee};
		al_err err;
		al_err_clear(&err);
		if (al_vm_mac_for_id(bad[i], mac, &err) != -1)
			fail_msg("id %zu accepted: '%s'", i, bad[i]);
		assert_int_equal(err.code, AL_EINVAL);
		/* Nothing half-written for a caller that ignores -1. */
		assert_int_equal(mac[0], 0xee);
	}
	al_err err;
	uint8_t mac[6];
	assert_int_equal(al_vm_mac_for_id(NULL, mac, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	/* 63 characters is the longest valid id, 64 one too many. */
	char id[65];
	memset(id, 'a', 64);
	id[64] = '\0';
	assert_int_equal(al_vm_mac_for_id(id, mac, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	id[63] = '\0';
	mac_of(id, mac);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_known_value),
		cmocka_unit_test(test_deterministic),
		cmocka_unit_test(test_locally_administered_unicast),
		cmocka_unit_test(test_distinct_ids_distinct_macs),
		cmocka_unit_test(test_invalid_id_rejected),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
