/* gw/credscan: a placeholder is found in every encoding the issue lists
 * (plain, URL-encoded in any mix and case, JSON-escaped, Base64 and
 * Basic auth at every alignment, base64url), split across feeds at any
 * point, with its name as written; text without one gives no hit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "gw/credscan.h"

typedef struct found {
	int n;
	al_credscan_hit last;
} found;

static void on_hit(void *arg, const al_credscan_hit *h)
{
	found *f = arg;
	f->n++;
	f->last = *h;
}

/* Scan s in one feed, then in pieces of every size 1..7, then as one
 * last piece (al_credscan_last): all agree. */
static found scan(const char *s)
{
	size_t len = strlen(s);
	found one = {0};
	al_credscan sc;
	al_credscan_init(&sc, on_hit, &one);
	al_credscan_feed(&sc, s, len);
	al_credscan_end(&sc);
	for (size_t step = 1; step <= 7; step++) {
		found f = {0};
		al_credscan_init(&sc, on_hit, &f);
		for (size_t i = 0; i < len; i += step)
			al_credscan_feed(&sc, s + i,
					 len - i < step ? len - i : step);
		al_credscan_end(&sc);
		assert_int_equal(f.n, one.n);
		if (f.n > 0)
			assert_string_equal(f.last.name, one.last.name);
	}
	found last = {0};
	al_credscan_init(&sc, on_hit, &last);
	al_credscan_last(&sc, s, len);
	assert_int_equal(last.n, one.n);
	if (last.n > 0)
		assert_string_equal(last.last.name, one.last.name);
	return one;
}

static void b64(const char *in, char *out)
{
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)in,
			(int)strlen(in));
}

static void test_plain_and_case(void **state)
{
	(void)state;
	found f = scan("Authorization: Bearer airlock-cred:github");
	assert_int_equal(f.n, 1);
	assert_string_equal(f.last.name, "github");
	assert_int_equal(f.last.how, 0);
	f = scan("x=AIRLOCK-Cred:GitHub_2.x&y=1");
	assert_int_equal(f.n, 1);
	assert_string_equal(f.last.name, "GitHub_2.x");
	assert_true(f.last.how & AL_CREDSCAN_CASE);
	f = scan("aairlock-cred:a airlock-cred:b");
	assert_int_equal(f.n, 2);
	assert_string_equal(f.last.name, "b");
	f = scan("airlock-cred: spaced");
	assert_int_equal(f.n, 1);
	assert_string_equal(f.last.name, "");
	assert_int_equal(scan("airlock-cre:github airlockcred:x").n, 0);
	assert_int_equal(scan("nothing here at all, ordinary text").n, 0);
}

static void test_long_name_is_truncated(void **state)
{
	(void)state;
	char s[200] = "airlock-cred:";
	memset(s + 13, 'n', 100);
	found f = scan(s);
	assert_int_equal(f.n, 1);
	assert_true(f.last.truncated);
	assert_int_equal(strlen(f.last.name), AL_CREDSCAN_NAME_MAX);
}

static void test_percent_and_json(void **state)
{
	(void)state;
	found f = scan("/q?t=airlock-cred%3Agithub");
	assert_int_equal(f.n, 1);
	assert_string_equal(f.last.name, "github");
	assert_true(f.last.how & AL_CREDSCAN_PERCENT);
	f = scan("%61%69%72%6C%6f%63%6B%2d%63%72%65%64%3a%67ithub");
	assert_int_equal(f.n, 1);
	assert_string_equal(f.last.name, "github");
	f = scan("%%61irlock-cred%3agh");
	assert_int_equal(f.n, 1);
	assert_string_equal(f.last.name, "gh");
	f = scan("{\"t\":\"\\u0061irlock\\u002dcred\\u003Agithub\"}");
	assert_int_equal(f.n, 1);
	assert_string_equal(f.last.name, "github");
	assert_true(f.last.how & AL_CREDSCAN_JSON);
	f = scan("{\"t\":\"airlock-cred:git\\u0068ub\\/x\"}");
	assert_int_equal(f.n, 1);
	assert_string_equal(f.last.name, "github");
	/* A broken escape passes its bytes: no false name. */
	f = scan("airlock-cred:ab%zz");
	assert_int_equal(f.n, 1);
	assert_string_equal(f.last.name, "ab");
}

static void test_base64_every_alignment(void **state)
{
	(void)state;
	const char *pre[] = {"", "u", "us", "use", "user:", "user:x"};
	for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++) {
		char plain[128], enc[256], s[300];
		snprintf(plain, sizeof plain, "%sairlock-cred:github", pre[i]);
		b64(plain, enc);
		/* Basic auth, and embedded after other base64 characters
		 * (every phase of a run). */
		for (size_t lead = 0; lead < 4; lead++) {
			snprintf(s, sizeof s, "Authorization: Basic %.*s%s",
				 (int)lead, "QUJD", enc);
			found f = scan(s);
			assert_true(f.n >= 1);
			assert_true(f.last.how & AL_CREDSCAN_BASE64);
			assert_non_null(strstr(f.last.name, "github"));
		}
		/* base64url, and MIME line breaks inside the run. */
		for (char *p = enc; *p != '\0'; p++)
			*p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
		size_t el = strlen(enc);
		snprintf(s, sizeof s, "%.*s\r\n%s", (int)(el / 2), enc,
			 enc + el / 2);
		assert_true(scan(s).n >= 1);
	}
	char enc[64];
	b64("airlock-cred:github", enc);
	char s[128];
	/* Three line breaks end the run: the halves are not joined. */
	snprintf(s, sizeof s, "%.8s\r\n\r\n%s", enc, enc + 8);
	assert_int_equal(scan(s).n, 0);
}

/* The scanner passes over base64 runs too short for the prefix (13
 * bytes: 18 characters): the shortest run that holds it is still read,
 * among short runs, at a piece's end too. */
static void test_shortest_base64_run_is_read(void **state)
{
	(void)state;
	char enc[64], s[160];
	b64("airlock-cred:", enc); /* 18 characters, then "==" */
	assert_int_equal(strcspn(enc, "="), 18);
	enc[18] = '\0';
	snprintf(s, sizeof s, "ab cd.QUJD %s", enc);
	assert_int_equal(scan(s).n, 1);
	snprintf(s, sizeof s, "%s;x", enc);
	assert_int_equal(scan(s).n, 1);
	/* One character fewer decodes 12 bytes: no prefix. */
	enc[17] = '\0';
	snprintf(s, sizeof s, "ab cd.QUJD %s", enc);
	assert_int_equal(scan(s).n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_and_case),
		cmocka_unit_test(test_long_name_is_truncated),
		cmocka_unit_test(test_percent_and_json),
		cmocka_unit_test(test_base64_every_alignment),
		cmocka_unit_test(test_shortest_base64_run_is_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
