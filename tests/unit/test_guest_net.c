/* The guest's network as the host hands it over: al_vm_net_format (host,
 * core/vm/net.h) into the GO line and IDENTITY, agent_nic_net_parse (guest,
 * guest/nic.h) out of them, and IDENTITY's pack/unpack (agentproto). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../guest/nic.c"
#include "net/slot.h"
#include "proto/agentproto.h"
#include "vm/net.h"

static void test_slot_round_trip(void **state)
{
	(void)state;
	al_net_prefix pool;
	assert_int_equal(al_net_prefix_parse("10.200.0.0/16", &pool, NULL), 0);
	al_netslot s = {.index = 5};
	assert_int_equal(al_net_slot_addr_of(&pool, 5, &s.addr, NULL), 0);
	char text[AL_VM_NET_STRLEN];
	al_vm_net_format(&s, text);
	assert_string_equal(text, "10.200.0.22/30,10.200.0.21");
	al_nic_net n;
	assert_true(agent_nic_net_parse(text, &n));
	assert_true(n.on);
	assert_int_equal(n.addr, s.addr.guest);
	assert_int_equal(n.gateway, s.addr.gateway);
	assert_int_equal(n.prefix, 30);
}

static void test_none(void **state)
{
	(void)state;
	char text[AL_VM_NET_STRLEN];
	al_vm_net_format(NULL, text);
	assert_string_equal(text, "none");
	al_nic_net n = {.on = true};
	assert_true(agent_nic_net_parse(text, &n));
	assert_false(n.on);
	/* Nothing to apply: the NIC stays down. */
	const char *step = NULL;
	assert_int_equal(agent_nic_net_apply("eth0", &n, &step), 0);
}

static void test_bad_forms_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"",
		"None",
		"10.200.0.2/30",
		"10.200.0.2,10.200.0.1",
		"10.200.0.2/31,10.200.0.1",  /* no /31 or /32 */
		"10.200.0.2/7,10.200.0.1",   /* nor shorter than /8 */
		"10.200.0.2/30,10.200.0.5",  /* gateway off the prefix */
		"10.200.0.2/30,10.200.0.2",  /* the same host */
		"10.200.0.3/30,10.200.0.1",  /* the broadcast address */
		"10.200.0.2/30,10.200.0.0",  /* the network address */
		"10.200.0.2/030,10.200.0.1", /* three digits */
		"10.200.0.2/30,10.200.0.1 ", /* trailing bytes */
		"10.200.0.256/30,10.200.0.1",
		"10.200.0.2/3a,10.200.0.1",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		al_nic_net n;
		if (agent_nic_net_parse(bad[i], &n))
			fail_msg("accepted \"%s\"", bad[i]);
	}
}

static void test_identity_round_trip(void **state)
{
	(void)state;
	al_vm_identity id = {.time_ms = 1764600000123};
	snprintf(id.hostname, sizeof id.hostname, "sbx1");
	memset(id.entropy, 'a', 64);
	snprintf(id.mac, sizeof id.mac, "02:11:22:33:44:55");
	snprintf(id.net, sizeof id.net, "10.200.0.2/30,10.200.0.1");
	al_err err = {0};
	char *s = al_vm_identity_pack(&id, &err);
	assert_non_null(s);
	al_vm_identity back;
	assert_int_equal(al_vm_identity_unpack(s, strlen(s), &back, &err), 0);
	assert_memory_equal(&back, &id, sizeof id);
	free(s);
	/* mac and net are optional. */
	const char *bare = "{\"hostname\":\"h\",\"entropy\":\"00\","
			   "\"time_ms\":1}";
	assert_int_equal(al_vm_identity_unpack(bare, strlen(bare), &back, &err),
			 0);
	assert_string_equal(back.net, "");
	assert_string_equal(back.mac, "");
}

static void test_identity_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"{\"hostname\":\"h\",\"entropy\":\"00\"}",
		"{\"hostname\":\"h\",\"entropy\":\"00\",\"time_ms\":0}",
		"{\"hostname\":\"h\",\"entropy\":\"00\",\"time_ms\":1,"
		"\"extra\":1}",
		"{\"hostname\":\"h\",\"entropy\":\"00\",\"time_ms\":1,"
		"\"net\":5}",
		"{\"hostname\":\"h\",\"entropy\":\"00\",\"time_ms\":1,"
		"\"net\":\"0123456789012345678901234567890123456789\"}",
		"{\"entropy\":\"00\",\"time_ms\":1}",
		"{\"hostname\":\"h\",\"entropy\":\"00\",\"time_ms\":1,"
		"\"mac\":\"\"}",
		"[]",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		al_vm_identity id;
		al_err err = {0};
		if (al_vm_identity_unpack(bad[i], strlen(bad[i]), &id, &err) ==
		    0)
			fail_msg("accepted %s", bad[i]);
		assert_int_equal(err.code, AL_EINVAL);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slot_round_trip),
		cmocka_unit_test(test_none),
		cmocka_unit_test(test_bad_forms_refused),
		cmocka_unit_test(test_identity_round_trip),
		cmocka_unit_test(test_identity_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
