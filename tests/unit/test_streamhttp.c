/* core/streamhttp: the request head nginx sends to a stream socket (a
 * shim's or a builder's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "proto/streamhttp.h"

#define TOKEN "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static enum al_streamhttp_result parse(const char *s, char *token)
{
	return al_streamhttp_parse(s, strlen(s), token);
}

static void test_what_nginx_sends(void **state)
{
	(void)state;
	char token[AL_STREAM_TOKEN_LEN + 1];
	assert_int_equal(parse("GET /stream/" TOKEN " HTTP/1.1\r\n"
			       "Host: airlock-shim\r\n"
			       "Connection: close\r\n\r\n",
			       token),
			 AL_STREAMHTTP_OK);
	assert_string_equal(token, TOKEN);
	assert_int_equal(parse("GET /stream/" TOKEN " HTTP/1.0\r\n"
			       "Content-Length: 0\r\n\r\n",
			       token),
			 AL_STREAMHTTP_OK);
}

static void test_incomplete_heads_wait(void **state)
{
	(void)state;
	char token[AL_STREAM_TOKEN_LEN + 1];
	static const char full[] = "GET /stream/" TOKEN " HTTP/1.1\r\n"
				   "Host: x\r\n\r\n";
	for (size_t n = 0; n < sizeof full - 1; n++)
		assert_int_equal(al_streamhttp_parse(full, n, token),
				 AL_STREAMHTTP_INCOMPLETE);
}

static void test_other_paths_are_404(void **state)
{
	(void)state;
	char token[AL_STREAM_TOKEN_LEN + 1];
	static const char *const heads[] = {
		"POST /stream/" TOKEN " HTTP/1.1\r\n\r\n",
		"GET /stream/" TOKEN "0 HTTP/1.1\r\n\r\n",
		"GET /stream/0123 HTTP/1.1\r\n\r\n",
		"GET /other/" TOKEN "ab HTTP/1.1\r\n\r\n",
		"GET /stream/0123456789ABCDEF0123456789abcdef0123456789abcdef"
		"0123456789abcdef HTTP/1.1\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++)
		assert_int_equal(parse(heads[i], token),
				 AL_STREAMHTTP_NOT_FOUND);
}

static void test_malformed_is_400(void **state)
{
	(void)state;
	char token[AL_STREAM_TOKEN_LEN + 1];
	static const char *const heads[] = {
		"GET /stream/" TOKEN " HTTP/1.1\n\n",
		"GET /stream/" TOKEN " HTTP/1.1\r\r\n\r\n",
		"GET /stream/" TOKEN " HTTP/2\r\n\r\n",
		"GET  /stream/" TOKEN " HTTP/1.1\r\n\r\n",
		"GET /stream/" TOKEN "\r\n\r\n",
		"\r\n\r\n",
		"GET /stream/" TOKEN " HTTP/1.1\r\nNo colon\r\n\r\n",
		"GET /stream/" TOKEN " HTTP/1.1\r\n: empty name\r\n\r\n",
		"GET /stream/" TOKEN " HTTP/1.1\r\nX: a\x01\r\n\r\n",
		"GET /stream/" TOKEN " HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
		"GET /stream/" TOKEN " HTTP/1.1\r\n"
		"Transfer-Encoding: chunked\r\n\r\n",
		"GET /stream/" TOKEN " HTTP/1.1\r\n\r\nbody",
		"POST /x HTTP/1.1\r\nBad\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++)
		assert_int_equal(parse(heads[i], token), AL_STREAMHTTP_BAD);
	static const char nul[] = "GET /stream/" TOKEN
				  " HTTP/1.1\r\nX: \0\r\n\r\n";
	assert_int_equal(al_streamhttp_parse(nul, sizeof nul - 1, token),
			 AL_STREAMHTTP_BAD);
}

static void test_size_cap(void **state)
{
	(void)state;
	char token[AL_STREAM_TOKEN_LEN + 1];
	static char big[AL_STREAMHTTP_HEAD_MAX + 64];
	int n = snprintf(big, sizeof big, "GET /stream/" TOKEN " HTTP/1.1\r\n");
	while ((size_t)n + 12 < sizeof big)
		n += snprintf(big + n, sizeof big - (size_t)n, "X-A: b\r\n");
	assert_int_equal(al_streamhttp_parse(big, (size_t)n, token),
			 AL_STREAMHTTP_BAD);
	/* Too many header lines, even within the size. */
	char many[AL_STREAMHTTP_HEAD_MAX];
	n = snprintf(many, sizeof many, "GET /stream/" TOKEN " HTTP/1.1\r\n");
	for (int i = 0; i < AL_STREAMHTTP_HEADERS_MAX + 2; i++)
		n += snprintf(many + n, sizeof many - (size_t)n, "A: b\r\n");
	n += snprintf(many + n, sizeof many - (size_t)n, "\r\n");
	assert_int_equal(al_streamhttp_parse(many, (size_t)n, token),
			 AL_STREAMHTTP_BAD);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_what_nginx_sends),
		cmocka_unit_test(test_incomplete_heads_wait),
		cmocka_unit_test(test_other_paths_are_404),
		cmocka_unit_test(test_malformed_is_400),
		cmocka_unit_test(test_size_cap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
