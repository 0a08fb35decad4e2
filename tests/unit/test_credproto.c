/* The credential channel's payloads (core/cred/credproto.h): what a peer
 * sends is taken only in its documented shape, a set packs and unpacks to
 * itself, and error messages never carry a value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cred/credproto.h"
#include "proto/agentproto.h"

static al_cred cred(const char *id, const char *name, const char *value)
{
	al_cred c;
	memset(&c, 0, sizeof c);
	snprintf(c.id, sizeof c.id, "%s", id);
	snprintf(c.name, sizeof c.name, "%s", name);
	c.value = (char *)value;
	c.value_len = strlen(value);
	c.nhosts = 2;
	snprintf(c.hosts[0], sizeof c.hosts[0], "api.github.com");
	snprintf(c.hosts[1], sizeof c.hosts[1], "*.github.com");
	snprintf(c.header, sizeof c.header, "Authorization");
	snprintf(c.format, sizeof c.format, "Bearer {value}");
	c.scope = AL_CRED_PROJECT;
	return c;
}

static void test_set_roundtrip(void **state)
{
	(void)state;
	al_cred_set s = {.version = 7}, back;
	al_err err = {0};
	al_cred a = cred("c1", "github", "ghp_secret-1");
	a.rate_requests = 100;
	a.rate_per_seconds = 60;
	al_cred b = cred("c2", "npm", "npm_2");
	b.header[0] = '\0';
	snprintf(b.format, sizeof b.format, "{value}");
	b.scope = AL_CRED_GLOBAL;
	assert_int_equal(al_cred_set_add(&s, &a, &err), 0);
	assert_int_equal(al_cred_set_add(&s, &b, &err), 0);
	/* Names are unique in a set. */
	assert_int_equal(al_cred_set_add(&s, &b, &err), -1);
	char *t = al_cred_set_pack(&s, &err);
	assert_non_null(t);
	assert_int_equal(al_cred_set_unpack(t, strlen(t), &back, &err), 0);
	free(t);
	assert_int_equal(back.version, 7);
	assert_int_equal(back.n, 2);
	const al_cred *g = al_cred_set_find(&back, "github");
	assert_non_null(g);
	assert_string_equal(g->value, "ghp_secret-1");
	assert_string_equal(g->hosts[1], "*.github.com");
	assert_int_equal(g->rate_requests, 100);
	assert_int_equal(g->rate_per_seconds, 60);
	assert_int_equal(g->scope, AL_CRED_PROJECT);
	const al_cred *n = al_cred_set_find_id(&back, "c2");
	assert_non_null(n);
	assert_string_equal(n->header, "");
	assert_int_equal(n->rate_requests, 0);
	assert_null(al_cred_set_find(&back, "nope"));
	al_cred_set_free(&back);
	al_cred_set_free(&s);
	assert_int_equal(s.n, 0);
	al_cred_set_free(&s); /* twice is fine */
}

static void test_set_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"",
		"[]",
		"{\"creds\":[]}",
		"{\"version\":-1,\"creds\":[]}",
		"{\"version\":1,\"creds\":[],\"x\":1}",
		"{\"version\":1,\"creds\":{}}",
		/* a value with a line break would split a header */
		"{\"version\":1,\"creds\":[{\"id\":\"c\",\"name\":\"n\","
		"\"value\":\"a\\r\\nX: y\",\"hosts\":[\"h.io\"],\"header\":null,"
		"\"format\":\"{value}\",\"rate\":null,\"scope\":\"global\"}]}",
		/* no host */
		"{\"version\":1,\"creds\":[{\"id\":\"c\",\"name\":\"n\","
		"\"value\":\"v\",\"hosts\":[],\"header\":null,"
		"\"format\":\"{value}\",\"rate\":null,\"scope\":\"global\"}]}",
		/* host not canonical */
		"{\"version\":1,\"creds\":[{\"id\":\"c\",\"name\":\"n\","
		"\"value\":\"v\",\"hosts\":[\"H.io\"],\"header\":null,"
		"\"format\":\"{value}\",\"rate\":null,\"scope\":\"global\"}]}",
		/* header not a token */
		"{\"version\":1,\"creds\":[{\"id\":\"c\",\"name\":\"n\","
		"\"value\":\"v\",\"hosts\":[\"h.io\"],\"header\":\"A b\","
		"\"format\":\"{value}\",\"rate\":null,\"scope\":\"global\"}]}",
		/* format without the value */
		"{\"version\":1,\"creds\":[{\"id\":\"c\",\"name\":\"n\","
		"\"value\":\"v\",\"hosts\":[\"h.io\"],\"header\":null,"
		"\"format\":\"Bearer\",\"rate\":null,\"scope\":\"global\"}]}",
		/* rate of zero */
		"{\"version\":1,\"creds\":[{\"id\":\"c\",\"name\":\"n\","
		"\"value\":\"v\",\"hosts\":[\"h.io\"],\"header\":null,"
		"\"format\":\"{value}\",\"rate\":{\"requests\":0,"
		"\"per_seconds\":1},\"scope\":\"global\"}]}",
		/* unknown scope */
		"{\"version\":1,\"creds\":[{\"id\":\"c\",\"name\":\"n\","
		"\"value\":\"v\",\"hosts\":[\"h.io\"],\"header\":null,"
		"\"format\":\"{value}\",\"rate\":null,\"scope\":\"world\"}]}",
		/* the same name twice */
		"{\"version\":1,\"creds\":[{\"id\":\"c\",\"name\":\"n\","
		"\"value\":\"v\",\"hosts\":[\"h.io\"],\"header\":null,"
		"\"format\":\"{value}\",\"rate\":null,\"scope\":\"global\"},"
		"{\"id\":\"d\",\"name\":\"n\","
		"\"value\":\"v\",\"hosts\":[\"h.io\"],\"header\":null,"
		"\"format\":\"{value}\",\"rate\":null,\"scope\":\"global\"}]}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		al_cred_set s;
		al_err err = {0};
		assert_int_equal(al_cred_set_unpack(bad[i], strlen(bad[i]), &s,
						    &err),
				 -1);
		assert_int_equal(s.n, 0);
		assert_null(strstr(err.msg, "X: y"));
	}
}

static void test_set_too_big(void **state)
{
	(void)state;
	al_cred_set s = {0};
	al_err err = {0};
	char *v = malloc(AL_CRED_VALUE_MAX + 1);
	memset(v, 'a', AL_CRED_VALUE_MAX);
	v[AL_CRED_VALUE_MAX] = '\0';
	for (int i = 0; i < AL_CRED_SET_MAX; i++) {
		char id[16];
		snprintf(id, sizeof id, "c%d", i);
		al_cred c = cred(id, id, v);
		assert_int_equal(al_cred_set_add(&s, &c, &err), 0);
	}
	al_cred c = cred("x", "x", v);
	assert_int_equal(al_cred_set_add(&s, &c, &err), -1);
	assert_int_equal(err.code, AL_ETOOBIG);
	/* 128 values of 4 KiB fit in a frame. */
	char *t = al_cred_set_pack(&s, &err);
	assert_non_null(t);
	assert_true(strlen(t) <= AL_FRAME_MAX_PAYLOAD);
	free(t);
	al_cred_set_free(&s);
	free(v);
}

static void test_alphabets(void **state)
{
	(void)state;
	assert_true(al_cred_name_valid("github_2.x-y"));
	assert_false(al_cred_name_valid("-x"));
	assert_false(al_cred_name_valid("a b"));
	assert_false(al_cred_name_valid("a:b"));
	assert_false(al_cred_name_valid(""));
	assert_true(al_cred_host_valid("*.github.com"));
	assert_false(al_cred_host_valid("*"));
	assert_false(al_cred_host_valid("a..b"));
	assert_true(al_cred_header_valid("X-Api-Key"));
	assert_false(al_cred_header_valid("X Api"));
	assert_false(al_cred_header_valid("X:"));
	assert_true(al_cred_format_valid("token {value}"));
	assert_false(al_cred_format_valid("{value}{value}"));
	assert_false(al_cred_format_valid("a\r\n{value}"));
	assert_false(al_cred_value_valid("a\nb", 3));
	assert_false(al_cred_value_valid("ab", 0));
	assert_true(al_cred_value_valid("a b~", 4));
}

static void test_small_messages(void **state)
{
	(void)state;
	al_err err = {0};
	char sb[64], project[64];
	char *t = al_cred_hello_pack("sb-1", &err);
	assert_int_equal(al_cred_hello_unpack(t, strlen(t), sb, &err), 0);
	assert_string_equal(sb, "sb-1");
	free(t);
	assert_int_equal(al_cred_hello_unpack("{\"sandbox\":\"../x\"}", 18, sb,
					      &err),
			 -1);
	assert_int_equal(al_cred_hello_unpack("{}", 2, sb, &err), -1);

	al_cred_take tk = {.req = 4000000000u}, tk2;
	snprintf(tk.id, sizeof tk.id, "cred-1");
	t = al_cred_take_pack(&tk, &err);
	assert_int_equal(al_cred_take_unpack(t, strlen(t), &tk2, &err), 0);
	assert_int_equal(tk2.req, 4000000000u);
	assert_string_equal(tk2.id, "cred-1");
	free(t);
	assert_int_equal(
		al_cred_take_unpack("{\"req\":4294967296,\"id\":\"c\"}", 27,
				    &tk2, &err),
		-1);

	al_cred_grant g = {.req = 3, .ok = false, .retry_after = 5}, g2;
	t = al_cred_grant_pack(&g, &err);
	assert_int_equal(al_cred_grant_unpack(t, strlen(t), &g2, &err), 0);
	assert_false(g2.ok);
	assert_int_equal(g2.retry_after, 5);
	free(t);

	uint64_t v = 0;
	t = al_cred_set_ack_pack(42, &err);
	assert_int_equal(al_cred_set_ack_unpack(t, strlen(t), &v, &err), 0);
	assert_int_equal(v, 42);
	free(t);

	t = al_cred_refresh_pack(NULL, &err);
	assert_string_equal(t, "{\"project\":null}");
	assert_int_equal(al_cred_refresh_unpack(t, strlen(t), project, &err),
			 0);
	assert_string_equal(project, "");
	free(t);
	t = al_cred_refresh_pack("acme", &err);
	assert_int_equal(al_cred_refresh_unpack(t, strlen(t), project, &err),
			 0);
	assert_string_equal(project, "acme");
	free(t);
	assert_int_equal(al_cred_refresh_unpack("{}", 2, project, &err), -1);

	al_cred_refresh_done d = {.pushed = 3, .acked = 2}, d2;
	t = al_cred_refresh_done_pack(&d, &err);
	assert_int_equal(al_cred_refresh_done_unpack(t, strlen(t), &d2, &err),
			 0);
	assert_int_equal(d2.pushed, 3);
	assert_int_equal(d2.acked, 2);
	free(t);
	assert_int_equal(al_cred_refresh_done_unpack(
				 "{\"pushed\":1,\"acked\":2}", 22, &d2, &err),
			 -1);

	bool ok = false;
	t = al_gw_credchan_pack(true, &err);
	assert_int_equal(al_gw_credchan_unpack(t, strlen(t), &ok, &err), 0);
	assert_true(ok);
	free(t);
	assert_int_equal(al_gw_credchan_req_unpack("", 0, &err), 0);
	assert_int_equal(al_gw_credchan_req_unpack("{}", 2, &err), -1);
}

static void test_use(void **state)
{
	(void)state;
	al_err err = {0};
	al_cred_use u = {.status = 200, .allow = true}, u2;
	snprintf(u.name, sizeof u.name, "github");
	snprintf(u.host, sizeof u.host, "api.github.com");
	snprintf(u.method, sizeof u.method, "GET");
	snprintf(u.path, sizeof u.path, "/a\x01\xff/b");
	snprintf(u.action, sizeof u.action, "use");
	snprintf(u.reason, sizeof u.reason, "header");
	char *t = al_cred_use_pack(&u, &err);
	assert_int_equal(al_cred_use_unpack(t, strlen(t), &u2, &err), 0);
	free(t);
	/* A guest's bytes in the path are made printable, not refused. */
	assert_string_equal(u2.path, "/a?"
				     "?/b");
	assert_int_equal(u2.status, 200);
	assert_true(u2.allow);
	u.status = -1;
	u.allow = false;
	snprintf(u.action, sizeof u.action, "denied_placeholder");
	t = al_cred_use_pack(&u, &err);
	assert_int_equal(al_cred_use_unpack(t, strlen(t), &u2, &err), 0);
	free(t);
	assert_int_equal(u2.status, -1);
	assert_false(u2.allow);
	assert_string_equal(u2.action, "denied_placeholder");
	static const char bad[] =
		"{\"name\":\"g\",\"host\":\"h.io\",\"method\":\"GET\",\"path\":"
		"\"/\",\"status\":700,\"action\":\"use\",\"decision\":\"allow\","
		"\"reason\":\"\"}";
	assert_int_equal(al_cred_use_unpack(bad, strlen(bad), &u2, &err), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_set_roundtrip),
		cmocka_unit_test(test_set_refused),
		cmocka_unit_test(test_set_too_big),
		cmocka_unit_test(test_alphabets),
		cmocka_unit_test(test_small_messages),
		cmocka_unit_test(test_use),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
