/* policy credentials(req): the shipped file allows, a refining policy
 * sees method, path, metadata and form, and an error, a false or a bad
 * answer means not injected; a broken file does not load. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "policy/policy.h"

static al_cred_req req(const char *method, const char *team)
{
	static al_policy_kv meta[1];
	meta[0] = (al_policy_kv){"team", team};
	return (al_cred_req){.credential = "github",
			     .form = "placeholder",
			     .scope = "project",
			     .host = "api.github.com",
			     .port = 443,
			     .method = method,
			     .path = "/repos/a/b",
			     .sandbox = "sb1",
			     .template_name = "node",
			     .project = "ci",
			     .metadata = meta,
			     .n_metadata = 1};
}

static al_policy *open_src(const char *src)
{
	al_err err;
	return al_policy_open_source("test.lua", src, strlen(src),
				     &al_policy_credentials_kind, NULL, &err);
}

static void test_shipped_policy_allows(void **state)
{
	(void)state;
	al_err err;
	al_policy *p = al_policy_open("policies/credentials.lua",
				      &al_policy_credentials_kind, NULL, &err);
	assert_non_null(p);
	al_cred_req r = req("POST", "x");
	al_egress_decision d;
	assert_int_equal(al_policy_credentials(p, &r, &d), 0);
	assert_true(d.allow);
	al_policy_close(p);
}

static void test_refinement_by_method_and_metadata(void **state)
{
	(void)state;
	al_policy *p = open_src(
		"function credentials(req)\n"
		"  if req.method ~= 'GET' then return deny('read-only') end\n"
		"  if req.metadata.team ~= 'ml' then return false end\n"
		"  if req.form ~= 'placeholder' or req.path ~= '/repos/a/b'\n"
		"     or req.host ~= 'api.github.com' then\n"
		"    return deny('fields') end\n"
		"  return allow('ok')\n"
		"end\n");
	assert_non_null(p);
	al_egress_decision d;
	al_cred_req r = req("GET", "ml");
	assert_int_equal(al_policy_credentials(p, &r, &d), 0);
	assert_true(d.allow);
	assert_string_equal(d.reason, "ok");
	r = req("POST", "ml");
	assert_int_equal(al_policy_credentials(p, &r, &d), 0);
	assert_false(d.allow);
	assert_string_equal(d.reason, "read-only");
	r = req("GET", "web");
	assert_int_equal(al_policy_credentials(p, &r, &d), 0);
	assert_false(d.allow);
	al_policy_close(p);
}

/* Every field reaches the policy; a policy that changes req.metadata
 * in one call does not change what the next call sees (the table is
 * reused between calls only while it still holds the sandbox's). */
static void test_every_field_and_metadata_kept(void **state)
{
	(void)state;
	al_policy *p = open_src(
		"function credentials(req)\n"
		"  local seen = table.concat({req.credential, req.form,\n"
		"    req.scope, req.host, tostring(req.port), req.method,\n"
		"    req.path, req.sandbox, req.template, req.project,\n"
		"    tostring(req.metadata.team), tostring(req.metadata.x)},\n"
		"    ' ')\n"
		"  req.metadata.team = 'forged'\n"
		"  req.metadata.x = 'added'\n"
		"  return allow(seen)\n"
		"end\n");
	assert_non_null(p);
	for (int i = 0; i < 3; i++) {
		al_egress_decision d;
		al_cred_req r = req("GET", "ml");
		assert_int_equal(al_policy_credentials(p, &r, &d), 0);
		assert_true(d.allow);
		assert_string_equal(d.reason,
				    "github placeholder project api.github.com"
				    " 443 GET /repos/a/b sb1 node ci ml nil");
	}
	/* Absent fields are nil (table.concat fails on them: an error, so
	 * not injected). */
	al_cred_req r = req("GET", "ml");
	r.template_name = NULL;
	r.project = NULL;
	r.n_metadata = 0;
	al_egress_decision d;
	assert_int_equal(al_policy_credentials(p, &r, &d), -1);
	al_policy_close(p);
}

static void test_errors_mean_not_injected(void **state)
{
	(void)state;
	al_policy *p =
		open_src("function credentials(req)\n"
			 "  if req.method == 'PUT' then error('boom') end\n"
			 "  if req.method == 'POST' then return 'yes' end\n"
			 "  if req.method == 'PATCH' then\n"
			 "    while true do end end\n"
			 "  return allow()\n"
			 "end\n");
	assert_non_null(p);
	al_egress_decision d;
	const char *bad[] = {"PUT", "POST", "PATCH"};
	for (int i = 0; i < 3; i++) {
		al_cred_req r = req(bad[i], "x");
		assert_int_equal(al_policy_credentials(p, &r, &d), -1);
		assert_false(d.allow);
	}
	al_cred_req r = req("GET", "x");
	r.host = "Not A Name";
	assert_int_equal(al_policy_credentials(p, &r, &d), -1);
	assert_false(d.allow);
	al_policy_close(p);
	assert_null(open_src("function egress(req) return allow() end\n"));
	assert_null(open_src("function credentials(req) return 1 end\n"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shipped_policy_allows),
		cmocka_unit_test(test_refinement_by_method_and_metadata),
		cmocka_unit_test(test_every_field_and_metadata_kept),
		cmocka_unit_test(test_errors_mean_not_injected),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
