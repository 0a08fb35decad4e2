/* core/buildlog: build-log lines as SSE events, and the one-time tokens
 * of the streams nginx carries from the builder. */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "template/buildlog.h"

/* out holds exactly want; it is emptied. */
static void expect(al_buf *out, const char *want)
{
	assert_int_equal(al_buf_pending(out), strlen(want));
	assert_memory_equal(out->data + out->off, want, strlen(want));
	out->off = out->len = 0;
}

static void test_lines_become_events(void **state)
{
	(void)state;
	al_buf b;
	al_err err = {0};
	al_buf_init(&b, 0);
	assert_int_equal(al_buildlog_event(&b,
					   "{\"event\":\"step\",\"step\":1}",
					   &err),
			 0);
	expect(&b, "event: step\ndata: {\"event\":\"step\",\"step\":1}\n\n");
	/* What the builder does not write is skipped. */
	assert_int_equal(al_buildlog_event(&b, "{\"event\":\"evil\"}", &err),
			 0);
	assert_int_equal(al_buildlog_event(&b, "not json", &err), 0);
	assert_int_equal(al_buildlog_event(&b, "[1]", &err), 0);
	assert_int_equal(al_buf_pending(&b), 0);
	/* A status that is not final does not end the stream. */
	assert_int_equal(al_buildlog_event(&b,
					   "{\"event\":\"status\","
					   "\"status\":\"running\"}",
					   &err),
			 0);
	b.off = b.len = 0;
	assert_int_equal(al_buildlog_event(&b,
					   "{\"event\":\"status\","
					   "\"status\":\"failed\"}",
					   &err),
			 1);
	expect(&b, "event: status\ndata: {\"event\":\"status\","
		   "\"status\":\"failed\"}\n\n");
	al_buf_free(&b);
}

static void test_tokens_are_one_time_and_expire(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_buildlog.XXXXXX";
	assert_non_null(mkdtemp(dir));
	al_err err = {0};
	char t1[AL_STREAM_TOKEN_LEN + 1], t2[AL_STREAM_TOKEN_LEN + 1];
	char l1[] = "11111111111111111111111111111111";
	char l2[] = "22222222222222222222222222222222";
	char l3[] = "33333333333333333333333333333333";
	char lease[AL_STREAM_LEASE_LEN + 1] = "";
	/* A lease that is no lease name gets no token. */
	assert_int_equal(al_buildlog_token_issue(dir, 7, "../x", t1, &err), -1);
	assert_int_equal(al_buildlog_token_issue(dir, 7, l1, t1, &err), 0);
	assert_int_equal(al_buildlog_token_issue(dir, 8, l2, t2, &err), 0);
	assert_int_equal(strlen(t1), AL_STREAM_TOKEN_LEN);
	assert_string_not_equal(t1, t2);
	char forged[AL_STREAM_TOKEN_LEN + 1];
	memset(forged, 'a', AL_STREAM_TOKEN_LEN);
	forged[AL_STREAM_TOKEN_LEN] = '\0';
	long long key = -1;
	char mark[600];
	snprintf(mark, sizeof mark, "%s/stream-leases/%s.issued", dir, l1);
	assert_int_equal(access(mark, F_OK), 0);
	assert_int_equal(al_buildlog_token_take(dir, forged, &key, lease), 0);
	assert_int_equal(al_buildlog_token_take(dir, t1, &key, lease), 1);
	/* The token says whose it was and which lease it holds, now open. */
	assert_int_equal(key, 7);
	assert_string_equal(lease, l1);
	assert_int_not_equal(access(mark, F_OK), 0);
	snprintf(mark, sizeof mark, "%s/stream-leases/%s.open", dir, l1);
	assert_int_equal(access(mark, F_OK), 0);
	assert_int_equal(al_buildlog_token_take(dir, t1, &key, lease), 0);
	/* The stream ended: its mark goes. */
	al_buildlog_lease_end(dir, l1);
	assert_int_not_equal(access(mark, F_OK), 0);
	/* The token's own text is nowhere on disk. */
	char path[600];
	snprintf(path, sizeof path, "%s/stream-tokens/%s", dir, t2);
	assert_int_not_equal(access(path, F_OK), 0);
	/* One left unused past its time is refused. */
	char t3[AL_STREAM_TOKEN_LEN + 1];
	assert_int_equal(al_buildlog_token_issue(dir, 9, l3, t3, &err), 0);
	char tokens[200];
	snprintf(tokens, sizeof tokens, "%s/stream-tokens", dir);
	struct timespec old[2] = {{.tv_sec = time(NULL) - 60},
				  {.tv_sec = time(NULL) - 60}};
	/* Age every token file. */
	DIR *d = opendir(tokens);
	assert_non_null(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", tokens, e->d_name);
		assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);
	}
	closedir(d);
	assert_int_equal(al_buildlog_token_take(dir, t3, &key, lease), 0);
	al_buildlog_tokens_clear(dir);
	assert_int_not_equal(access(tokens, F_OK), 0);
	snprintf(path, sizeof path, "%s/stream-leases", dir);
	assert_int_not_equal(access(path, F_OK), 0);
	assert_int_equal(rmdir(dir), 0);
}

static void test_revoked_keys_are_marked(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_buildlog_state.XXXXXX";
	assert_non_null(mkdtemp(dir));
	char run[600];
	snprintf(run, sizeof run, "%s/run", dir);
	assert_int_equal(mkdir(run, 0700), 0);
	al_config cfg = {0};
	snprintf(cfg.state_dir, sizeof cfg.state_dir, "%s", dir);
	al_err err = {0};
	assert_int_equal(al_buildlog_key_revoked(&cfg, 5), 0);
	assert_int_equal(al_buildlog_key_revoke(&cfg, 5, &err), 0);
	assert_int_equal(al_buildlog_key_revoke(&cfg, 5, &err), 0);
	assert_int_equal(al_buildlog_key_revoked(&cfg, 5), 1);
	/* Another key is not. */
	assert_int_equal(al_buildlog_key_revoked(&cfg, 6), 0);
	assert_int_equal(al_buildlog_key_revoke(&cfg, -1, &err), -1);
	char path[700];
	snprintf(path, sizeof path, "%s/revoked-keys/5", run);
	assert_int_equal(unlink(path), 0);
	snprintf(path, sizeof path, "%s/revoked-keys", run);
	assert_int_equal(rmdir(path), 0);
	assert_int_equal(rmdir(run), 0);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines_become_events),
		cmocka_unit_test(test_revoked_keys_are_marked),
		cmocka_unit_test(test_tokens_are_one_time_and_expire),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
