/* gw/urlpath: the path the policy judges is the normal form (dot
 * segments, encoded dots, duplicate slashes gone; unreserved encodings
 * decoded, the others in upper case; the query as it came); forms that
 * servers read differently are refused; the normal form of a normal
 * form is itself; and a request's path, judged and sent upstream, is
 * that normal form (gw/http). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gw/http.h"
#include "gw/urlpath.h"

/* The normal form of in, or NULL when it is refused. */
static const char *norm(const char *in, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s", in);
	size_t n = 0;
	const char *why = NULL;
	if (al_urlpath_normalize(buf, strlen(buf), &n, &why) < 0) {
		assert_non_null(why);
		return NULL;
	}
	assert_int_equal(n, strlen(buf));
	/* Idempotent. */
	char again[512];
	snprintf(again, sizeof again, "%s", buf);
	size_t n2 = 0;
	assert_int_equal(al_urlpath_normalize(again, n, &n2, &why), 0);
	assert_string_equal(again, buf);
	return buf;
}

static void test_normal_forms(void **state)
{
	(void)state;
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"/", "/"},
		{"/a/b", "/a/b"},
		{"/a/b/", "/a/b/"},
		{"/allowed/../forbidden", "/forbidden"},
		{"/allowed/%2e%2e/forbidden", "/forbidden"},
		{"/allowed/%2E%2E/forbidden", "/forbidden"},
		{"/allowed/.%2e/forbidden", "/forbidden"},
		{"/allowed/%2e./forbidden", "/forbidden"},
		{"//forbidden", "/forbidden"},
		{"/allowed//x///y", "/allowed/x/y"},
		{"/a/./b/.", "/a/b/"},
		{"/a/b/..", "/a/"},
		{"/..", "/"},
		{"/../../etc", "/etc"},
		{"/a/%2e", "/a/"},
		{"/./", "/"},
		{"/a/...", "/a/..."},
		{"/a/.b/..c", "/a/.b/..c"},
		{"/%61%62%7e%2D%5f", "/ab~-_"},
		{"/a%3fb%23c%25", "/a%3Fb%23c%25"},
		{"/a%20b", "/a%20b"},
		{"/caf%c3%a9", "/caf%C3%A9"},
		{"/%e2%82%ac/%f0%9f%98%80", "/%E2%82%AC/%F0%9F%98%80"},
		{"/a/../b?x=/../y&z=%2f%2e", "/b?x=/../y&z=%2f%2e"},
		{"/?q", "/?q"},
		{"/a/..?q", "/?q"},
		{"/a;b=1/c", "/a;b=1/c"},
	};
	char buf[512];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *got = norm(cases[i].in, buf, sizeof buf);
		if (got == NULL || strcmp(got, cases[i].out) != 0)
			fail_msg("%s: got %s, want %s", cases[i].in,
				 got != NULL ? got : "(refused)", cases[i].out);
	}
}

static void test_ambiguous_forms_refused(void **state)
{
	(void)state;
	static const char *const refused[] = {
		"/allowed/..%2fforbidden",
		"/allowed/%2F",
		"/allowed/%2e%2e%2fforbidden",
		"/allowed/..%5cforbidden",
		"/allowed/%5C..%5Cforbidden",
		"/allowed/%00/../../forbidden",
		"/allowed/%c0%ae%c0%ae/forbidden", /* overlong '.' */
		"/allowed/%c0%af",		   /* overlong '/' */
		"/%e0%80%ae",			   /* overlong, 3 bytes */
		"/%ed%a0%80",			   /* a surrogate */
		"/%f4%90%80%80",		   /* past U+10FFFF */
		"/%ff",
		"/%c3",	    /* cut short */
		"/%c3a",    /* a raw byte inside a sequence */
		"/%c3%41",  /* an encoded ASCII byte inside one */
		"/%c3/%a9", /* across a '/' */
		"/allowed/..;/forbidden",
		"/allowed/.;x/forbidden",
		"/allowed/%2e%2e;/forbidden",
		"/allowed/..%3b/forbidden",
		"/allowed/%252e%252e/forbidden",
		"/a%25%32%65", /* %25 then 2e once decoded */
		"relative",
		"",
	};
	char buf[512];
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
		if (norm(refused[i], buf, sizeof buf) != NULL)
			fail_msg("%s: accepted as %s", refused[i], buf);
}

/* What the parser gives the policy is what it writes upstream. */
static void test_request_path_judged_is_sent(void **state)
{
	(void)state;
	static const struct {
		const char *head, *path;
		int status;
	} cases[] = {
		{"GET /allowed/%2e%2e/forbidden HTTP/1.1\r\nHost: a.test\r\n\r\n",
		 "/forbidden", 0},
		{"GET //forbidden?x=1 HTTP/1.1\r\nHost: a.test\r\n\r\n",
		 "/forbidden?x=1", 0},
		{"GET https://a.test/allowed/./../forbidden HTTP/1.1\r\n"
		 "Host: a.test\r\n\r\n",
		 "/forbidden", 0},
		{"GET https://a.test HTTP/1.1\r\nHost: a.test\r\n\r\n", "/", 0},
		{"GET /allowed/..%2Fforbidden HTTP/1.1\r\nHost: a.test\r\n\r\n",
		 NULL, 400},
		{"GET /a%00 HTTP/1.1\r\nHost: a.test\r\n\r\n", NULL, 400},
		{"GET /a\\..\\b HTTP/1.1\r\nHost: a.test\r\n\r\n", NULL, 400},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		al_http_parser p;
		al_http_req_parser_init(&p, true);
		al_http_req req;
		size_t hl = 0;
		al_err err = {0};
		const char *h = cases[i].head;
		int rc = al_http_req_parse(&p, h, strlen(h), &req, &hl, &err);
		if (cases[i].path == NULL) {
			assert_int_equal(rc, -1);
			assert_int_equal(p.status, cases[i].status);
			continue;
		}
		assert_int_equal(rc, 0);
		assert_string_equal(req.path, cases[i].path);
		size_t len = 0;
		char *out = al_http_req_serialize(&req, false, &len, &err);
		assert_non_null(out);
		char line[256];
		snprintf(line, sizeof line, "GET %s HTTP/1.1\r\n",
			 cases[i].path);
		assert_memory_equal(out, line, strlen(line));
		free(out);
		al_http_req_free(&req);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_normal_forms),
		cmocka_unit_test(test_ambiguous_forms_refused),
		cmocka_unit_test(test_request_path_judged_is_sent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
