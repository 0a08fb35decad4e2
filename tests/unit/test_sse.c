/* core/sse: the event text of exec streams and build logs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/sse.h"

static char *text(al_buf *b)
{
	static char out[4096];
	size_t n = al_buf_pending(b);
	assert_true(n < sizeof out);
	memcpy(out, b->data + b->off, n);
	out[n] = '\0';
	b->off = b->len = 0;
	return out;
}

static void test_event_and_keepalive(void **state)
{
	(void)state;
	al_buf b;
	al_err err = {0};
	al_buf_init(&b, 0);
	json_object *o = json_tokener_parse("{\"path\":\"/a/b\",\"n\":1}");
	assert_int_equal(al_sse_event(&b, "step", o, &err), 0);
	assert_string_equal(
		text(&b), "event: step\ndata: {\"path\":\"/a/b\",\"n\":1}\n\n");
	json_object_put(o);
	assert_int_equal(al_sse_keepalive(&b, &err), 0);
	assert_string_equal(text(&b), ": keepalive\n\n");
	assert_int_equal(al_sse_start(&b, 42, &err), 0);
	assert_string_equal(text(&b), "event: start\ndata: {\"pid\":42}\n\n");
	al_buf_free(&b);
}

static void test_output_keeps_characters_whole(void **state)
{
	(void)state;
	al_buf b;
	al_err err = {0};
	al_sse_text t = {0};
	al_buf_init(&b, 0);
	/* "é" is c3 a9: split across two chunks, it arrives once, whole. */
	assert_int_equal(al_sse_output(&t, &b, 0, (const uint8_t *)"a\xc3", 2,
				       &err),
			 0);
	assert_string_equal(text(&b),
			    "event: stdout\ndata: {\"data\":\"a\"}\n\n");
	assert_int_equal(al_sse_output(&t, &b, 0, (const uint8_t *)"\xa9", 1,
				       &err),
			 0);
	assert_string_equal(text(&b),
			    "event: stdout\ndata: {\"data\":\"\xc3\xa9\"}\n\n");
	/* An invalid byte: the text before it, then the rest as base64. */
	assert_int_equal(al_sse_output(&t, &b, 1, (const uint8_t *)"ok\xff!", 4,
				       &err),
			 0);
	assert_string_equal(text(&b),
			    "event: stderr\ndata: {\"data\":\"ok\"}\n\n"
			    "event: stderr\ndata: {\"data_b64\":\"/yE=\"}\n\n");
	/* A truncated character at the end goes out as base64. */
	assert_int_equal(al_sse_output(&t, &b, 0, (const uint8_t *)"\xe2\x82",
				       2, &err),
			 0);
	assert_string_equal(text(&b), "");
	assert_int_equal(al_sse_output_flush(&t, &b, &err), 0);
	assert_string_equal(text(&b),
			    "event: stdout\ndata: {\"data_b64\":\"4oI=\"}\n\n");
	al_buf_free(&b);
}

static void test_exit_and_error(void **state)
{
	(void)state;
	al_buf b;
	al_err err = {0};
	al_buf_init(&b, 0);
	al_exit_msg code = {.exit_code = 3};
	assert_int_equal(al_sse_exit(&b, &code, 12, &err), 0);
	assert_string_equal(
		text(&b),
		"event: exit\ndata: {\"exit_code\":3,\"duration_ms\":12}\n\n");
	al_exit_msg sig = {.exit_code = -1,
			   .signal = "SIGKILL",
			   .timed_out = 1};
	assert_int_equal(al_sse_exit(&b, &sig, 5, &err), 0);
	assert_string_equal(text(&b),
			    "event: exit\ndata: {\"signal\":\"SIGKILL\","
			    "\"timed_out\":true,\"duration_ms\":5}\n\n");
	assert_int_equal(al_sse_error(&b, AL_EAUTH, "key revoked", &err), 0);
	assert_string_equal(text(&b),
			    "event: error\ndata: {\"code\":\"unauthorized\","
			    "\"message\":\"key revoked\"}\n\n");
	al_buf_free(&b);
}

static void test_full_buffer_fails(void **state)
{
	(void)state;
	al_buf b;
	al_err err = {0};
	al_buf_init(&b, 16);
	assert_int_equal(al_sse_error(&b, AL_EAUTH, "a longer message", &err),
			 -1);
	assert_int_equal(err.code, AL_ETOOBIG);
	al_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_event_and_keepalive),
		cmocka_unit_test(test_output_keeps_characters_whole),
		cmocka_unit_test(test_exit_and_error),
		cmocka_unit_test(test_full_buffer_fails),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
