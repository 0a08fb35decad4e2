/* airlock-agent's EXEC "user" field: the real binary (AIRLOCK_AGENT or
 * build/airlock-agent) on a socketpair at fd 3, unjailed on the host, so
 * it resolves users from the host's /etc/passwd and /etc/group. Switching
 * users needs root: without it the tests are skipped, and say so. */
#include <errno.h>
#include <json-c/json.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/agentproto.h"

#define DEADLINE_MS 10000

typedef struct ctx {
	pid_t pid;
	int fd;
	al_frame_reader rd;
} ctx;

static int setup(void **state)
{
	const char *bin = getenv("AIRLOCK_AGENT");
	if (bin == NULL)
		bin = access("build/airlock-agent", X_OK) == 0
			      ? "build/airlock-agent"
			      : "build-san/airlock-agent";
	if (access(bin, X_OK) < 0) {
		fprintf(stderr, "agent binary %s: %s\n", bin, strerror(errno));
		return -1;
	}
	ctx *c = calloc(1, sizeof *c);
	assert_non_null(c);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (c->pid == 0) {
		if (dup2(sv[1], 3) < 0)
			_exit(99);
		execl(bin, "airlock-agent", (char *)NULL);
		_exit(98);
	}
	close(sv[1]);
	c->fd = sv[0];
	al_frame_reader_init(&c->rd);
	al_frame f;
	al_err err = {0};
	assert_int_equal(al_frame_recv(c->fd, &c->rd, &f,
				       al_now_ms() + DEADLINE_MS, &err),
			 0);
	assert_int_equal(f.type, AL_F_HELLO);
	al_frame_free(&f);
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	ctx *c = *state;
	if (c == NULL)
		return 0;
	close(c->fd);
	int st;
	waitpid(c->pid, &st, 0);
	al_frame_reader_free(&c->rd);
	free(c);
	return 0;
}

typedef struct result {
	char out[4096];
	size_t out_len;
	int exit_code; /* -1 if no EXIT */
	char error_code[64];
	char error_msg[512];
} result;

/* EXEC cmd as user (NULL: no field) and collect until EXIT or ERROR. */
static void run_as(ctx *c, uint32_t id, const char *user, const char *cmd,
		   const char *env_home, result *r)
{
	memset(r, 0, sizeof *r);
	r->exit_code = -1;
	json_object *o = json_object_new_object();
	json_object *argv = json_object_new_array();
	json_object_array_add(argv, json_object_new_string("/bin/sh"));
	json_object_array_add(argv, json_object_new_string("-c"));
	json_object_array_add(argv, json_object_new_string(cmd));
	json_object_object_add(o, "cmd", argv);
	json_object_object_add(o, "cwd", json_object_new_string("/"));
	if (env_home != NULL) {
		json_object *env = json_object_new_object();
		json_object_object_add(env, "HOME",
				       json_object_new_string(env_home));
		json_object_object_add(o, "env", env);
	}
	if (user != NULL)
		json_object_object_add(o, "user", json_object_new_string(user));
	const char *s = json_object_to_json_string_ext(o,
						       JSON_C_TO_STRING_PLAIN);
	al_err err = {0};
	assert_int_equal(al_frame_send(c->fd, AL_F_EXEC, id, s, strlen(s),
				       &err),
			 0);
	json_object_put(o);
	for (;;) {
		al_frame f;
		assert_int_equal(al_frame_recv(c->fd, &c->rd, &f,
					       al_now_ms() + DEADLINE_MS, &err),
				 0);
		assert_int_equal(f.id, id);
		if (f.type == AL_F_STDOUT) {
			size_t n = f.len;
			if (n > sizeof r->out - 1 - r->out_len)
				n = sizeof r->out - 1 - r->out_len;
			memcpy(r->out + r->out_len, f.payload, n);
			r->out_len += n;
		} else if (f.type == AL_F_EXIT || f.type == AL_F_ERROR) {
			json_object *p =
				json_tokener_parse((const char *)f.payload);
			assert_non_null(p);
			json_object *v;
			if (f.type == AL_F_EXIT) {
				assert_true(json_object_object_get_ex(
					p, "exit_code", &v));
				r->exit_code = json_object_get_int(v);
			} else {
				assert_true(json_object_object_get_ex(p, "code",
								      &v));
				snprintf(r->error_code, sizeof r->error_code,
					 "%s", json_object_get_string(v));
				if (json_object_object_get_ex(p, "message", &v))
					snprintf(r->error_msg,
						 sizeof r->error_msg, "%s",
						 json_object_get_string(v));
			}
			json_object_put(p);
			al_frame_free(&f);
			return;
		}
		al_frame_free(&f);
	}
}

#define NEED_ROOT()                                                            \
	do {                                                                   \
		if (geteuid() != 0) {                                          \
			fprintf(stderr, "not root: cannot switch users\n");    \
			skip();                                                \
		}                                                              \
	} while (0)

static void test_user_by_name(void **state)
{
	NEED_ROOT();
	result r;
	run_as(*state, 1, "nobody", "id -u; id -g", NULL, &r);
	assert_string_equal(r.error_code, "");
	assert_int_equal(r.exit_code, 0);
	assert_string_equal(r.out, "65534\n65534\n");
}

static void test_no_user_is_root(void **state)
{
	NEED_ROOT();
	result r;
	run_as(*state, 2, NULL, "id -u", NULL, &r);
	assert_int_equal(r.exit_code, 0);
	assert_string_equal(r.out, "0\n");
}

static void test_uid_gid_numeric(void **state)
{
	NEED_ROOT();
	result r;
	/* Not in passwd: taken as is. */
	run_as(*state, 3, "12345:54321", "id -u; id -g; id -G", NULL, &r);
	assert_int_equal(r.exit_code, 0);
	assert_string_equal(r.out, "12345\n54321\n54321\n");
}

static void test_name_and_group(void **state)
{
	NEED_ROOT();
	result r;
	/* The test needs a group named "nogroup" (Debian: 65534). */
	run_as(*state, 4, "nobody:nogroup", "id -g", NULL, &r);
	assert_int_equal(r.exit_code, 0);
	assert_string_equal(r.out, "65534\n");
}

static void test_unknown_user_refused(void **state)
{
	NEED_ROOT();
	result r;
	run_as(*state, 5, "no-such-user-airlock", "id -u", NULL, &r);
	assert_string_equal(r.error_code, "invalid_request");
	assert_non_null(strstr(r.error_msg, "no-such-user-airlock"));
	assert_int_equal(r.exit_code, -1);
	run_as(*state, 6, "nobody:no-such-group-airlock", "id -u", NULL, &r);
	assert_string_equal(r.error_code, "invalid_request");
	run_as(*state, 7, "nobody:", "id -u", NULL, &r);
	assert_string_equal(r.error_code, "invalid_request");
	run_as(*state, 8, "a b", "id -u", NULL, &r);
	assert_string_equal(r.error_code, "invalid_request");
}

static void test_home_follows_user(void **state)
{
	NEED_ROOT();
	result r;
	run_as(*state, 9, "nobody", "echo $HOME", NULL, &r);
	assert_int_equal(r.exit_code, 0);
	assert_string_equal(r.out, "/nonexistent\n");
	/* An explicit HOME wins. */
	run_as(*state, 10, "nobody", "echo $HOME", "/tmp", &r);
	assert_string_equal(r.out, "/tmp\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_user_by_name, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_no_user_is_root, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_uid_gid_numeric, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_name_and_group, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unknown_user_refused,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_home_follows_user, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
