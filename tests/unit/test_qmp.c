/* qmp: the reply parser on its own, and the client against a scripted
 * fake QEMU on a unix socket (a thread of this process). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/agentproto.h"
#include "vm/qmp.h"

/* ---- parser ---- */

static int parse(const char *s, json_object **out, int64_t *id, al_err *err)
{
	return al_qmp_parse_reply(s, strlen(s), out, id, err);
}

static void test_parse_return(void **state)
{
	(void)state;
	json_object *o;
	int64_t id;
	al_err err = {0};
	assert_int_equal(parse("{\"return\": {\"status\": \"completed\"}, "
			       "\"id\": 7}\r",
			       &o, &id, &err),
			 AL_QMP_RETURN);
	assert_int_equal(id, 7);
	json_object *st;
	assert_true(json_object_object_get_ex(o, "status", &st));
	assert_string_equal(json_object_get_string(st), "completed");
	json_object_put(o);

	assert_int_equal(parse("{\"return\": {}}", &o, &id, &err),
			 AL_QMP_RETURN);
	assert_int_equal(id, -1);
	json_object_put(o);
}

static void test_parse_event_and_greeting(void **state)
{
	(void)state;
	json_object *o;
	int64_t id;
	al_err err = {0};
	assert_int_equal(parse("{\"timestamp\": {\"seconds\": 1}, \"event\": "
			       "\"STOP\"}",
			       &o, &id, &err),
			 AL_QMP_EVENT);
	assert_null(o);
	assert_int_equal(parse("{\"QMP\": {\"version\": {}, "
			       "\"capabilities\": [\"oob\"]}}",
			       &o, &id, &err),
			 AL_QMP_GREETING);
	assert_null(o);
}

static void test_parse_error_reply(void **state)
{
	(void)state;
	json_object *o;
	int64_t id;
	al_err err = {0};
	assert_int_equal(parse("{\"id\": 3, \"error\": {\"class\": "
			       "\"GenericError\", \"desc\": \"no such fd\"}}",
			       &o, &id, &err),
			 -1);
	assert_int_equal(err.code, AL_EINTERNAL);
	assert_int_equal(id, 3);
	assert_non_null(strstr(err.msg, "no such fd"));
	assert_non_null(strstr(err.msg, "GenericError"));
	assert_null(o);
}

static void test_parse_rejects_garbage(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"",
		"\r",
		"not json",
		"[1,2]",
		"\"return\"",
		"{\"return\": {}",
		"{\"return\": {}} trailing",
		"{\"id\": \"7\", \"return\": {}}",
		"{\"event\": 5}",
		"{\"QMP\": 1}",
		"{\"error\": \"x\"}",
		"{\"error\": {\"class\": 1, \"desc\": \"d\"}}",
		"{\"something\": {}}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		json_object *o = (json_object *)1;
		int64_t id;
		al_err err = {0};
		assert_int_equal(parse(bad[i], &o, &id, &err), -1);
		assert_int_equal(err.code, AL_EPROTO);
		assert_null(o);
	}
}

/* ---- client against a fake QEMU ---- */

typedef enum scenario {
	SC_NORMAL,    /* greeting, caps, event + answer, error, fd */
	SC_SILENT,    /* greeting and caps, then never answers */
	SC_HUGE_LINE, /* a reply line past AL_QMP_LINE_MAX */
	SC_HANGUP,    /* closes after the greeting */
	SC_WRONG_ID,  /* answers with another id */
} scenario;

typedef struct fake {
	char path[108];
	int lfd;
	scenario sc;
	pthread_t th;
	char got_fd_data[32]; /* what the passed fd held */
	char last_cmd[4096];
} fake;

static void say(int fd, const char *s)
{
	size_t n = strlen(s);
	while (n > 0) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* One command line from the client (QMP clients send one JSON object;
 * ours sends no newline, so read until the braces balance). Also takes a
 * passed fd. */
static int hear(int fd, char *buf, size_t len, int *passed)
{
	size_t have = 0;
	int depth = 0, started = 0;
	*passed = -1;
	while (have + 1 < len) {
		union {
			char b[CMSG_SPACE(sizeof(int))];
			struct cmsghdr a;
		} ctl;
		struct iovec iov = {.iov_base = buf + have, .iov_len = 1};
		struct msghdr m = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = ctl.b,
				   .msg_controllen = sizeof ctl.b};
		ssize_t n = recvmsg(fd, &m, 0);
		if (n <= 0)
			return -1;
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		if (c != NULL && c->cmsg_type == SCM_RIGHTS)
			memcpy(passed, CMSG_DATA(c), sizeof(int));
		char ch = buf[have++];
		if (ch == '{') {
			depth++;
			started = 1;
		} else if (ch == '}') {
			depth--;
		}
		if (started && depth == 0)
			break;
	}
	buf[have] = '\0';
	return 0;
}

static int cmd_id(const char *line)
{
	const char *p = strstr(line, "\"id\":");
	if (p == NULL)
		p = strstr(line, "\"id\": ");
	return p != NULL ? atoi(strchr(p, ':') + 1) : -1;
}

static void *fake_main(void *arg)
{
	fake *f = arg;
	int c = accept(f->lfd, NULL, NULL);
	if (c < 0)
		return NULL;
	char line[4096], reply[512];
	int passed;
	say(c, "{\"QMP\": {\"version\": {\"qemu\": {\"major\": 7}}, "
	       "\"capabilities\": []}}\r\n");
	if (f->sc == SC_HANGUP)
		goto out;
	if (hear(c, line, sizeof line, &passed) < 0)
		goto out;
	snprintf(reply, sizeof reply, "{\"return\": {}, \"id\": %d}\r\n",
		 cmd_id(line));
	say(c, reply);
	while (hear(c, line, sizeof line, &passed) == 0) {
		snprintf(f->last_cmd, sizeof f->last_cmd, "%s", line);
		int id = cmd_id(line);
		if (f->sc == SC_SILENT)
			continue;
		if (f->sc == SC_WRONG_ID) {
			snprintf(reply, sizeof reply,
				 "{\"return\": {}, \"id\": %d}\r\n", id + 100);
			say(c, reply);
			continue;
		}
		if (f->sc == SC_HUGE_LINE) {
			size_t n = AL_QMP_LINE_MAX + 10;
			char *big = malloc(n + 1);
			memset(big, ' ', n);
			big[n] = '\0';
			say(c, big);
			free(big);
			continue;
		}
		if (strstr(line, "\"getfd\"") != NULL) {
			ssize_t r = passed >= 0
					    ? read(passed, f->got_fd_data,
						   sizeof f->got_fd_data - 1)
					    : -1;
			if (r > 0)
				f->got_fd_data[r] = '\0';
			if (passed >= 0)
				close(passed);
			snprintf(reply, sizeof reply,
				 "{\"return\": {}, \"id\": %d}\r\n", id);
		} else if (strstr(line, "\"bogus\"") != NULL) {
			snprintf(reply, sizeof reply,
				 "{\"id\": %d, \"error\": {\"class\": "
				 "\"CommandNotFound\", \"desc\": \"The command "
				 "bogus has not been found\"}}\r\n",
				 id);
		} else {
			/* An event first: the client must skip it. */
			say(c, "{\"timestamp\": {\"seconds\": 1, "
			       "\"microseconds\": 2}, \"event\": \"RESUME\"}"
			       "\r\n");
			snprintf(reply, sizeof reply,
				 "{\"return\": {\"status\": \"running\", "
				 "\"running\": true}, \"id\": %d}\r\n",
				 id);
		}
		say(c, reply);
	}
out:
	close(c);
	return NULL;
}

static void fake_start(fake *f, scenario sc)
{
	memset(f, 0, sizeof *f);
	f->sc = sc;
	snprintf(f->path, sizeof f->path, "/tmp/al-qmp-test-%d-%d.sock",
		 (int)getpid(), (int)sc);
	unlink(f->path);
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(f->lfd >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, f->path, strlen(f->path) + 1);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(f->lfd, 1), 0);
	assert_int_equal(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_stop(fake *f)
{
	pthread_join(f->th, NULL);
	close(f->lfd);
	unlink(f->path);
}

static void test_client_exec(void **state)
{
	(void)state;
	fake f;
	fake_start(&f, SC_NORMAL);
	al_err err = {0};
	al_qmp *q = al_qmp_connect(f.path, al_now_ms() + 5000, &err);
	if (q == NULL)
		fail_msg("connect: %s", err.msg);

	json_object *r = al_qmp_exec(q, "query-status", NULL, -1,
				     al_now_ms() + 5000, &err);
	if (r == NULL)
		fail_msg("query-status: %s", err.msg);
	json_object *st;
	assert_true(json_object_object_get_ex(r, "status", &st));
	assert_string_equal(json_object_get_string(st), "running");
	json_object_put(r);
	assert_non_null(strstr(f.last_cmd, "\"execute\":\"query-status\""));

	/* A failed command reports QEMU's reason and leaves the
	 * connection usable. */
	assert_int_equal(al_qmp_run(q, "bogus", NULL, al_now_ms() + 5000, &err),
			 -1);
	assert_int_equal(err.code, AL_EINTERNAL);
	assert_non_null(strstr(err.msg, "has not been found"));

	/* Arguments go out; an fd travels with the command. */
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(write(p[1], "state-bytes", 11), 11);
	close(p[1]);
	json_object *args = json_object_new_object();
	json_object_object_add(args, "fdname", json_object_new_string("mig"));
	r = al_qmp_exec(q, "getfd", args, p[0], al_now_ms() + 5000, &err);
	json_object_put(args);
	close(p[0]);
	if (r == NULL)
		fail_msg("getfd: %s", err.msg);
	json_object_put(r);
	assert_string_equal(f.got_fd_data, "state-bytes");
	assert_non_null(strstr(f.last_cmd, "\"fdname\":\"mig\""));

	al_qmp_close(q);
	fake_stop(&f);
}

static void test_client_deadline(void **state)
{
	(void)state;
	fake f;
	fake_start(&f, SC_SILENT);
	al_err err = {0};
	al_qmp *q = al_qmp_connect(f.path, al_now_ms() + 5000, &err);
	assert_non_null(q);
	int64_t t0 = al_now_ms();
	assert_int_equal(al_qmp_run(q, "cont", NULL, t0 + 200, &err), -1);
	int64_t took = al_now_ms() - t0;
	assert_int_equal(err.code, AL_ETIMEDOUT);
	assert_true(took >= 200 && took < 2000);
	/* Out of step now: refused rather than mismatched. */
	assert_int_equal(al_qmp_run(q, "cont", NULL, al_now_ms() + 200, &err),
			 -1);
	assert_int_equal(err.code, AL_EPROTO);
	al_qmp_close(q);
	fake_stop(&f);
}

static void test_client_rejects_huge_line(void **state)
{
	(void)state;
	fake f;
	fake_start(&f, SC_HUGE_LINE);
	al_err err = {0};
	al_qmp *q = al_qmp_connect(f.path, al_now_ms() + 5000, &err);
	assert_non_null(q);
	assert_int_equal(al_qmp_run(q, "cont", NULL, al_now_ms() + 5000, &err),
			 -1);
	assert_int_equal(err.code, AL_EPROTO);
	assert_non_null(strstr(err.msg, "longer than"));
	al_qmp_close(q);
	fake_stop(&f);
}

static void test_client_hangup_and_wrong_id(void **state)
{
	(void)state;
	fake f;
	al_err err = {0};
	fake_start(&f, SC_HANGUP);
	assert_null(al_qmp_connect(f.path, al_now_ms() + 5000, &err));
	assert_int_equal(err.code, AL_EPROTO);
	fake_stop(&f);

	fake_start(&f, SC_WRONG_ID);
	al_qmp *q = al_qmp_connect(f.path, al_now_ms() + 5000, &err);
	assert_non_null(q);
	assert_int_equal(al_qmp_run(q, "cont", NULL, al_now_ms() + 5000, &err),
			 -1);
	assert_int_equal(err.code, AL_EPROTO);
	al_qmp_close(q);
	fake_stop(&f);
}

static void test_connect_no_socket_times_out(void **state)
{
	(void)state;
	al_err err = {0};
	int64_t t0 = al_now_ms();
	assert_null(al_qmp_connect("/tmp/al-qmp-test-does-not-exist.sock",
				   t0 + 100, &err));
	assert_int_equal(err.code, AL_ETIMEDOUT);
	assert_true(al_now_ms() - t0 < 2000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_return),
		cmocka_unit_test(test_parse_event_and_greeting),
		cmocka_unit_test(test_parse_error_reply),
		cmocka_unit_test(test_parse_rejects_garbage),
		cmocka_unit_test(test_client_exec),
		cmocka_unit_test(test_client_deadline),
		cmocka_unit_test(test_client_rejects_huge_line),
		cmocka_unit_test(test_client_hangup_and_wrong_id),
		cmocka_unit_test(test_connect_no_socket_times_out),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
