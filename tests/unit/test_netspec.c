/* The network object (core/net/netspec.h) and the frames that carry it: what
 * the API accepts is canonical, what it refuses says which entry and
 * why, and every payload packs and unpacks to itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/dnsname.h"
#include "net/netspec.h"

static int parse(const char *text, bool require_mode, al_netspec *out,
		 al_err *err)
{
	json_object *o = json_tokener_parse(text);
	assert_non_null(o);
	int r = al_netspec_from_json(o, "network", require_mode, out, err);
	json_object_put(o);
	return r;
}

static void test_parse_canonical(void **state)
{
	(void)state;
	al_netspec ns;
	al_err err = {0};
	assert_int_equal(parse("{\"mode\":\"open\",\"allow\":[\"PyPI.org.\","
			       "\"*.GitHubUserContent.com\",\"*\"],"
			       "\"deny\":[\"evil.example\"]}",
			       true, &ns, &err),
			 0);
	assert_int_equal(ns.mode, AL_NET_OPEN);
	assert_int_equal(ns.n_allow, 3);
	assert_string_equal(ns.allow[0], "pypi.org");
	assert_string_equal(ns.allow[1], "*.githubusercontent.com");
	assert_string_equal(ns.allow[2], "*");
	assert_null(ns.allow[3]);
	assert_int_equal(ns.n_deny, 1);
	assert_true(al_dnsname_match("a.githubusercontent.com", ns.allow[1]));
	al_netspec_free(&ns);
	/* Without a mode: the default, allowlist with nothing allowed. */
	assert_int_equal(parse("{}", false, &ns, &err), 0);
	assert_int_equal(ns.mode, AL_NET_ALLOWLIST);
	assert_int_equal(ns.n_allow, 0);
	assert_null(ns.allow);
	al_netspec_free(&ns);
}

static void expect_refused(const char *text, const char *msg_part)
{
	al_netspec ns;
	al_err err = {0};
	assert_int_equal(parse(text, true, &ns, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	if (strstr(err.msg, msg_part) == NULL)
		fail_msg("'%s': message '%s' lacks '%s'", text, err.msg,
			 msg_part);
	assert_null(ns.allow);
}

static void test_parse_refusals(void **state)
{
	(void)state;
	expect_refused("{\"allow\":[]}", "network.mode is required");
	expect_refused("{\"mode\":\"closed\"}", "network.mode must be");
	expect_refused("{\"mode\":1}", "network.mode must be");
	expect_refused("{\"mode\":\"open\",\"ports\":[]}", "unknown member");
	expect_refused("{\"mode\":\"open\",\"allow\":\"pypi.org\"}",
		       "network.allow must be an array");
	expect_refused("{\"mode\":\"open\",\"allow\":[\"a.com\",5]}",
		       "network.allow[1] must be a string");
	expect_refused("{\"mode\":\"open\",\"deny\":[\"a..com\"]}",
		       "network.deny[0]: name pattern must be");
	expect_refused("{\"mode\":\"open\",\"deny\":[\"a*.com\"]}",
		       "network.deny[0]");
	expect_refused("{\"mode\":\"open\",\"deny\":[\"*.*.com\"]}",
		       "network.deny[0]");
	expect_refused("{\"mode\":\"open\",\"allow\":[\"\"]}",
		       "empty name pattern");
	expect_refused("{\"mode\":\"open\",\"allow\":[\"b\\u00fccher.de\"]}",
		       "punycode");
	expect_refused("{\"mode\":\"open\",\"allow\":[\"a\\u0000b\"]}", "NUL");
	expect_refused("{\"mode\":\"open\",\"allow\":[\"1.2.3.4:80\"]}",
		       "network.allow[0]");
	char label[70];
	memset(label, 'a', 64);
	label[64] = '\0';
	char text[200];
	snprintf(text, sizeof text,
		 "{\"mode\":\"open\",\"allow\":[\"%s.com\"]}", label);
	expect_refused(text, "network.allow[0]");
	/* 257 entries: one past the bound. */
	size_t cap = 257 * 8 + 64;
	char *big = malloc(cap);
	size_t n = (size_t)snprintf(big, cap, "{\"mode\":\"open\",\"allow\":[");
	for (int i = 0; i < 257; i++)
		n += (size_t)snprintf(big + n, cap - n, "%s\"a%d\"",
				      i ? "," : "", i);
	snprintf(big + n, cap - n, "]}");
	expect_refused(big, "more than 256 entries");
	/* 256 is fine. */
	char *c = strstr(big, ",\"a256\"");
	assert_non_null(c);
	strcpy(c, "]}");
	al_netspec ns;
	al_err err = {0};
	assert_int_equal(parse(big, true, &ns, &err), 0);
	assert_int_equal(ns.n_allow, 256);
	al_netspec_free(&ns);
	free(big);
}

static void test_net_update_roundtrip(void **state)
{
	(void)state;
	al_netspec ns, back;
	al_err err = {0};
	assert_int_equal(parse("{\"mode\":\"allowlist\",\"allow\":[\"a.com\"],"
			       "\"deny\":[\"*.b.com\"]}",
			       true, &ns, &err),
			 0);
	char *s = al_net_update_pack(&ns, &err);
	assert_non_null(s);
	assert_int_equal(al_net_update_unpack(s, strlen(s), &back, &err), 0);
	assert_int_equal(back.mode, AL_NET_ALLOWLIST);
	assert_string_equal(back.allow[0], "a.com");
	assert_string_equal(back.deny[0], "*.b.com");
	free(s);
	al_netspec_free(&back);
	al_netspec_free(&ns);
	assert_int_equal(al_net_update_unpack("{\"network\":{}}", 14, &back,
					      &err),
			 -1);
	assert_non_null(strstr(err.msg, "mode is required"));
	bool gw = false;
	s = al_net_result_pack(true, &err);
	assert_int_equal(al_net_result_unpack(s, strlen(s), &gw, &err), 0);
	assert_true(gw);
	free(s);
	assert_int_equal(al_net_result_unpack("{}", 2, &gw, &err), -1);
}

static void test_gw_config_roundtrip(void **state)
{
	(void)state;
	al_policy_kv meta[] = {{"team", "ml"}, {"k", "v w"}};
	al_gw_config c = {
		.sandbox = "sbx1",
		.template_name = "minimal",
		.project = "default",
		.metadata = meta,
		.n_metadata = 2,
		.build = true,
		.gateway = "10.200.3.1",
	};
	al_netspec_default(&c.network);
	al_err err = {0};
	char *s = al_gw_config_pack(&c, &err);
	assert_non_null(s);
	al_gw_config b;
	assert_int_equal(al_gw_config_unpack(s, strlen(s), &b, &err), 0);
	assert_string_equal(b.sandbox, "sbx1");
	assert_string_equal(b.template_name, "minimal");
	assert_string_equal(b.project, "default");
	assert_int_equal(b.n_metadata, 2);
	assert_string_equal(b.metadata[0].key, "team");
	assert_string_equal(b.metadata[1].value, "v w");
	assert_true(b.build);
	assert_string_equal(b.gateway, "10.200.3.1");
	assert_int_equal(b.network.mode, AL_NET_ALLOWLIST);
	al_gw_config_free(&b);
	free(s);

	static const char *const bad[] = {
		"{}",
		"{\"sandbox\":\"../x\",\"template\":\"m\",\"project\":\"p\","
		"\"gateway\":\"10.0.0.1\",\"network\":{\"mode\":\"open\"}}",
		"{\"sandbox\":\"s\",\"template\":\"m\",\"project\":\"p\","
		"\"gateway\":\"10.0.0.1:53\",\"network\":{\"mode\":\"open\"}}",
		"{\"sandbox\":\"s\",\"template\":\"m\",\"project\":\"p\","
		"\"gateway\":\"10.0.0.1\"}",
		"{\"sandbox\":\"s\",\"template\":\"m\",\"project\":\"p\","
		"\"gateway\":\"10.0.0.1\",\"network\":{\"mode\":\"open\"},"
		"\"metadata\":{\"a\":1}}",
		"{\"sandbox\":\"s\",\"template\":\"m\",\"project\":\"p\","
		"\"gateway\":\"10.0.0.1\",\"network\":{\"mode\":\"open\"},"
		"\"uid\":0}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err.code = AL_OK;
		assert_int_equal(al_gw_config_unpack(bad[i], strlen(bad[i]), &b,
						     &err),
				 -1);
		assert_int_equal(err.code, AL_EINVAL);
		assert_null(b.root);
	}
}

static void test_gw_ack(void **state)
{
	(void)state;
	al_err err = {0};
	al_gw_ack a;
	char *s = al_gw_ack_pack(true, NULL, &err);
	assert_int_equal(al_gw_ack_unpack(s, strlen(s), &a, &err), 0);
	assert_true(a.ok);
	free(s);
	s = al_gw_ack_pack(false,
			   "sandbox \x01"
			   "changed",
			   &err);
	assert_int_equal(al_gw_ack_unpack(s, strlen(s), &a, &err), 0);
	assert_false(a.ok);
	assert_string_equal(a.error, "sandbox ?changed");
	free(s);
	assert_int_equal(al_gw_ack_unpack("{\"ok\":false}", 12, &a, &err), -1);
	/* A refusal says why: an empty error is refused (fuzz_gw_config
	 * found it taken), and the pack never writes one. */
	assert_int_equal(al_gw_ack_unpack("{\"ok\":false,\"error\":\"\"}", 23,
					  &a, &err),
			 -1);
	s = al_gw_ack_pack(false, "", &err);
	assert_int_equal(al_gw_ack_unpack(s, strlen(s), &a, &err), 0);
	assert_string_equal(a.error, "refused");
	free(s);
	assert_int_equal(al_gw_ack_unpack("{\"ok\":\"yes\"}", 12, &a, &err),
			 -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_canonical),
		cmocka_unit_test(test_parse_refusals),
		cmocka_unit_test(test_net_update_roundtrip),
		cmocka_unit_test(test_gw_config_roundtrip),
		cmocka_unit_test(test_gw_ack),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
