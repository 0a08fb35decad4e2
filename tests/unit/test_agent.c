/* airlock-agent driven over its channel, as the shim drives it: the real
 * binary (AIRLOCK_AGENT or build/airlock-agent) on a socketpair at fd 3.
 * It runs unjailed on the host here, so file tests stay in a mkdtemp
 * directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <json-c/json.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/agentproto.h"

#define DEADLINE_MS 10000

typedef struct ctx {
	pid_t pid;
	int fd;
	al_frame_reader rd;
	char dir[64];
} ctx;

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	ctx *c = calloc(1, sizeof *c);
	assert_non_null(c);
	const char *bin = getenv("AIRLOCK_AGENT");
	if (bin == NULL)
		bin = access("build/airlock-agent", X_OK) == 0
			      ? "build/airlock-agent"
			      : "build-san/airlock-agent";
	if (access(bin, X_OK) < 0) {
		fprintf(stderr, "agent binary %s: %s\n", bin, strerror(errno));
		free(c);
		return -1;
	}
	snprintf(c->dir, sizeof c->dir, "/tmp/airlock-agent-test-XXXXXX");
	assert_non_null(mkdtemp(c->dir));
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
	*state = c;
	return 0;
}

/* Namespaces setup_userns adds to the user and uts ones (CLONE_NEWNET
 * for the MAC tests: the host's own NICs stay out of the agent's reach
 * twice over). */
static int userns_extra;

/* The agent in its own user and uts namespaces: IDENTITY may then set
 * only that namespace's hostname, and the clock and the kernel RNG stay
 * out of its reach (they need privileges in the host's user namespace).
 * This test must never change the host it runs on. */
static int setup_userns(void **state)
{
	pid_t probe = fork();
	assert_true(probe >= 0);
	if (probe == 0)
		_exit(unshare(CLONE_NEWUSER | CLONE_NEWUTS | userns_extra) == 0
			      ? 0
			      : 1);
	int st;
	assert_int_equal(waitpid(probe, &st, 0), probe);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		*state = NULL;
		return 0; /* the test reports the skip */
	}
	ctx *c = calloc(1, sizeof *c);
	assert_non_null(c);
	const char *bin = getenv("AIRLOCK_AGENT");
	if (bin == NULL)
		bin = access("build/airlock-agent", X_OK) == 0
			      ? "build/airlock-agent"
			      : "build-san/airlock-agent";
	if (access(bin, X_OK) < 0) {
		fprintf(stderr, "agent binary %s: %s\n", bin, strerror(errno));
		free(c);
		return -1;
	}
	snprintf(c->dir, sizeof c->dir, "/tmp/airlock-agent-test-XXXXXX");
	assert_non_null(mkdtemp(c->dir));
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (c->pid == 0) {
		if (unshare(CLONE_NEWUSER | CLONE_NEWUTS | userns_extra) < 0 ||
		    dup2(sv[1], 3) < 0)
			_exit(99);
		execl(bin, "airlock-agent", (char *)NULL);
		_exit(98);
	}
	close(sv[1]);
	c->fd = sv[0];
	al_frame_reader_init(&c->rd);
	*state = c;
	return 0;
}

static int setup_userns_net(void **state)
{
	userns_extra = CLONE_NEWNET;
	int rc = setup_userns(state);
	userns_extra = 0;
	return rc;
}

static int teardown(void **state)
{
	if (*state == NULL)
		return 0;
	ctx *c = *state;
	if (c->fd >= 0)
		close(c->fd);
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
	}
	al_frame_reader_free(&c->rd);
	nftw(c->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(c);
	return 0;
}

static void send_raw(ctx *c, uint16_t type, uint32_t id, const void *p,
		     size_t len)
{
	al_err err;
	int rc = al_frame_send(c->fd, type, id, p, len, &err);
	if (rc < 0)
		fail_msg("send %s: %s", al_frame_type_name(type), err.msg);
}

static void send_json(ctx *c, uint16_t type, uint32_t id, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void send_json(ctx *c, uint16_t type, uint32_t id, const char *fmt, ...)
{
	char buf[8192];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	assert_true(n > 0 && (size_t)n < sizeof buf);
	send_raw(c, type, id, buf, (size_t)n);
}

static void recv_frame(ctx *c, al_frame *f)
{
	al_err err;
	if (al_frame_recv(c->fd, &c->rd, f, al_now_ms() + DEADLINE_MS, &err) <
	    0)
		fail_msg("receiving a frame: %s", err.msg);
}

static json_object *payload_json(const al_frame *f)
{
	json_object *o = json_tokener_parse((const char *)f->payload);
	if (o == NULL)
		fail_msg("%s payload is not JSON: %s",
			 al_frame_type_name(f->type), (char *)f->payload);
	return o;
}

static int64_t jint(json_object *o, const char *key)
{
	json_object *v;
	if (!json_object_object_get_ex(o, key, &v))
		fail_msg("no \"%s\" in %s", key, json_object_to_json_string(o));
	return json_object_get_int64(v);
}

static const char *jstr(json_object *o, const char *key)
{
	json_object *v;
	if (!json_object_object_get_ex(o, key, &v))
		fail_msg("no \"%s\" in %s", key, json_object_to_json_string(o));
	return json_object_get_string(v);
}

/* Expect an ERROR for id with the given code. */
static void expect_error(ctx *c, uint32_t id, const char *code)
{
	al_frame f;
	recv_frame(c, &f);
	if (f.type != AL_F_ERROR || f.id != id)
		fail_msg("expected ERROR for %u, got %s for %u: %s", id,
			 al_frame_type_name(f.type), f.id, (char *)f.payload);
	json_object *o = payload_json(&f);
	assert_string_equal(jstr(o, "code"), code);
	json_object_put(o);
	al_frame_free(&f);
}

typedef struct run {
	uint32_t id;
	pid_t pid;
	char out[256 * 1024];
	size_t out_len;
	char err[64 * 1024];
	size_t err_len;
	bool exited;
	int exit_code; /* -1 when killed by a signal */
	char signal[32];
	bool timed_out;
	char error[64]; /* ERROR code, if the exec failed */
} run;

static void append(char *buf, size_t *len, size_t cap, const al_frame *f)
{
	assert_true(*len + f->len < cap);
	memcpy(buf + *len, f->payload, f->len);
	*len += f->len;
	buf[*len] = '\0';
}

/* Route one frame to the run it belongs to; fails on a stray frame. */
static void route(run **runs, size_t n, const al_frame *f)
{
	for (size_t i = 0; i < n; i++) {
		run *r = runs[i];
		if (r->id != f->id)
			continue;
		assert_false(r->exited);
		json_object *o;
		switch (f->type) {
		case AL_F_STARTED:
			o = payload_json(f);
			r->pid = (pid_t)jint(o, "pid");
			json_object_put(o);
			return;
		case AL_F_STDOUT:
			assert_true(f->len > 0 && f->len <= 65536);
			append(r->out, &r->out_len, sizeof r->out, f);
			return;
		case AL_F_STDERR:
			assert_true(f->len > 0 && f->len <= 65536);
			append(r->err, &r->err_len, sizeof r->err, f);
			return;
		case AL_F_EXIT:
			o = payload_json(f);
			json_object *v;
			r->exited = true;
			if (json_object_object_get_ex(o, "exit_code", &v)) {
				r->exit_code = json_object_get_int(v);
			} else {
				r->exit_code = -1;
				snprintf(r->signal, sizeof r->signal, "%s",
					 jstr(o, "signal"));
				json_object_object_get_ex(o, "timed_out", &v);
				r->timed_out = json_object_get_boolean(v);
			}
			json_object_put(o);
			return;
		case AL_F_ERROR:
			o = payload_json(f);
			snprintf(r->error, sizeof r->error, "%s",
				 jstr(o, "code"));
			r->exited = true;
			json_object_put(o);
			return;
		default:
			fail_msg("unexpected %s for exec %u",
				 al_frame_type_name(f->type), f->id);
		}
	}
	fail_msg("frame %s for unknown id %u", al_frame_type_name(f->type),
		 f->id);
}

static bool all_exited(run **runs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!runs[i]->exited)
			return false;
	return true;
}

static void wait_runs(ctx *c, run **runs, size_t n)
{
	while (!all_exited(runs, n)) {
		al_frame f;
		recv_frame(c, &f);
		route(runs, n, &f);
		al_frame_free(&f);
	}
}

/* Receive until the run has its STARTED (pid known). */
static void wait_started(ctx *c, run *r)
{
	while (r->pid == 0 && !r->exited) {
		al_frame f;
		recv_frame(c, &f);
		route(&r, 1, &f);
		al_frame_free(&f);
	}
	assert_true(r->pid > 0);
}

static run *new_run(uint32_t id)
{
	run *r = calloc(1, sizeof *r);
	assert_non_null(r);
	r->id = id;
	return r;
}

/* Run one command to completion. */
static run *exec_wait(ctx *c, uint32_t id, const char *json)
{
	run *r = new_run(id);
	send_raw(c, AL_F_EXEC, id, json, strlen(json));
	wait_runs(c, &r, 1);
	return r;
}

static void test_hello(void **state)
{
	ctx *c = *state;
	al_frame f;
	recv_frame(c, &f);
	assert_int_equal(f.type, AL_F_HELLO);
	assert_int_equal(f.id, 0);
	json_object *o = payload_json(&f);
	assert_int_equal(jint(o, "version"), 1);
	assert_int_equal(jint(o, "pid"), c->pid);
	json_object_put(o);
	al_frame_free(&f);
}

static void skip_hello(ctx *c)
{
	al_frame f;
	recv_frame(c, &f);
	assert_int_equal(f.type, AL_F_HELLO);
	al_frame_free(&f);
}

static void test_exec_echo(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	run *r = exec_wait(c, 1, "{\"cmd\":[\"echo\",\"hello\",\"world\"]}");
	assert_true(r->pid > 0);
	assert_string_equal(r->out, "hello world\n");
	assert_int_equal(r->err_len, 0);
	assert_int_equal(r->exit_code, 0);
	free(r);
}

/* What the agent runs does not keep the agent's OOM score (the host or
 * guest init keeps the agent out of the killer's reach): it starts at 0,
 * so an OOM kills the offender. Raised here, which needs no privilege. */
static void test_exec_oom_score_reset(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/oom_score_adj", (int)c->pid);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_true(fputs("300", f) >= 0);
	assert_int_equal(fclose(f), 0);
	run *r = exec_wait(c, 1,
			   "{\"cmd\":[\"cat\",\"/proc/self/oom_score_adj\"]}");
	assert_string_equal(r->out, "0\n");
	assert_int_equal(r->exit_code, 0);
	free(r);
	char adj[16] = "";
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(adj, sizeof adj, f));
	fclose(f);
	assert_string_equal(adj, "300\n");
}

static void test_exec_exit_code_and_stderr(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	run *r = exec_wait(c, 2,
			   "{\"cmd\":[\"sh\",\"-c\","
			   "\"echo out; echo oops >&2; exit 3\"]}");
	assert_string_equal(r->out, "out\n");
	assert_string_equal(r->err, "oops\n");
	assert_int_equal(r->exit_code, 3);
	free(r);
}

static void test_exec_env_cwd(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	char json[512];
	snprintf(json, sizeof json,
		 "{\"cmd\":[\"sh\",\"-c\",\"echo $FOO $HOME $TERM; pwd; "
		 "echo $PATH\"],\"env\":{\"FOO\":\"bar baz\"},\"cwd\":\"%s\"}",
		 c->dir);
	run *r = exec_wait(c, 3, json);
	char want[512];
	snprintf(want, sizeof want,
		 "bar baz /root xterm\n%s\n/usr/local/sbin:/usr/local/bin:"
		 "/usr/sbin:/usr/bin:/sbin:/bin\n",
		 c->dir);
	assert_string_equal(r->out, want);
	assert_int_equal(r->exit_code, 0);
	free(r);

	/* The request's env wins over the base environment. */
	r = exec_wait(c, 4,
		      "{\"cmd\":[\"sh\",\"-c\",\"echo $HOME\"],"
		      "\"env\":{\"HOME\":\"/work\"}}");
	assert_string_equal(r->out, "/work\n");
	free(r);

	/* Without "stdin", stdin is /dev/null: cat ends at once. */
	r = exec_wait(c, 5, "{\"cmd\":[\"cat\"]}");
	assert_int_equal(r->out_len, 0);
	assert_int_equal(r->exit_code, 0);
	free(r);
}

static void test_exec_stdin_cat(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	run *r = new_run(7);
	send_json(c, AL_F_EXEC, 7, "{\"cmd\":[\"cat\"],\"stdin\":true}");
	wait_started(c, r);
	send_raw(c, AL_F_STDIN, 7, "abc", 3);
	send_raw(c, AL_F_STDIN, 7, "def\n", 4);
	/* The process is still running: cat echoes before stdin closes. */
	while (r->out_len < 7) {
		al_frame f;
		recv_frame(c, &f);
		route(&r, 1, &f);
		al_frame_free(&f);
		assert_false(r->exited);
	}
	assert_string_equal(r->out, "abcdef\n");
	send_raw(c, AL_F_STDIN, 7, NULL, 0);
	wait_runs(c, &r, 1);
	assert_string_equal(r->out, "abcdef\n");
	assert_int_equal(r->exit_code, 0);
	free(r);
}

static void echo_through(ctx *c, run *r, const char *text)
{
	size_t before = r->out_len;
	send_raw(c, AL_F_STDIN, r->id, text, strlen(text));
	while (r->out_len < before + strlen(text)) {
		al_frame f;
		recv_frame(c, &f);
		assert_int_equal(f.id, r->id);
		route(&r, 1, &f);
		al_frame_free(&f);
	}
}

static void test_exec_concurrent(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	run *a = new_run(10), *b = new_run(11);
	send_json(c, AL_F_EXEC, 10, "{\"cmd\":[\"cat\"],\"stdin\":true}");
	wait_started(c, a);
	send_json(c, AL_F_EXEC, 11,
		  "{\"cmd\":[\"sh\",\"-c\",\"cat; exit 4\"],\"stdin\":true}");
	wait_started(c, b);
	/* Both are alive at once; each answer comes back on its own id. */
	echo_through(c, b, "to b 1\n");
	echo_through(c, a, "to a 1\n");
	echo_through(c, b, "to b 2\n");
	echo_through(c, a, "to a 2\n");
	send_raw(c, AL_F_STDIN, 10, NULL, 0);
	send_raw(c, AL_F_STDIN, 11, NULL, 0);
	run *both[] = {a, b};
	wait_runs(c, both, 2);
	assert_string_equal(a->out, "to a 1\nto a 2\n");
	assert_string_equal(b->out, "to b 1\nto b 2\n");
	assert_int_equal(a->exit_code, 0);
	assert_int_equal(b->exit_code, 4);
	free(a);
	free(b);
}

static void test_exec_timeout(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	int64_t t0 = al_now_ms();
	/* The whole process group dies, grandchildren included. */
	run *r = exec_wait(c, 20,
			   "{\"cmd\":[\"sh\",\"-c\",\"sleep 30 & sleep 30\"],"
			   "\"timeout_ms\":300}");
	int64_t dt = al_now_ms() - t0;
	assert_int_equal(r->exit_code, -1);
	assert_string_equal(r->signal, "SIGKILL");
	assert_true(r->timed_out);
	assert_true(dt >= 250 && dt < 5000);
	free(r);
}

/* A paused agent sends nothing (the host may stop or save its machine
 * then) and its deadlines stand still: a command that would have timed
 * out during the pause runs to its end after the RESUME. */
static void test_pause_holds_output_and_deadlines(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	run *r = new_run(40);
	send_json(c, AL_F_EXEC, 40,
		  "{\"cmd\":[\"sh\",\"-c\",\"echo one; sleep 1.5; echo two\"],"
		  "\"timeout_ms\":1000}");
	while (r->out_len < 4) {
		al_frame f;
		recv_frame(c, &f);
		route(&r, 1, &f);
		al_frame_free(&f);
	}
	assert_string_equal(r->out, "one\n");

	al_frame f;
	send_raw(c, AL_F_PAUSE, AL_REQ_ID_PAUSE, "{}", 2);
	recv_frame(c, &f);
	assert_int_equal(f.type, AL_F_RESULT);
	assert_int_equal(f.id, AL_REQ_ID_PAUSE);
	al_frame_free(&f);

	/* 1.2 s quiet: past the command's deadline and its end. */
	struct pollfd p = {.fd = c->fd, .events = POLLIN};
	assert_int_equal(poll(&p, 1, 1200), 0);

	send_raw(c, AL_F_RESUME, AL_REQ_ID_RESUME, "{}", 2);
	recv_frame(c, &f);
	assert_int_equal(f.type, AL_F_RESULT);
	assert_int_equal(f.id, AL_REQ_ID_RESUME);
	al_frame_free(&f);
	wait_runs(c, &r, 1);
	assert_string_equal(r->out, "one\ntwo\n");
	assert_int_equal(r->exit_code, 0);
	assert_false(r->timed_out);
	free(r);
}

/* A RESUME without a PAUSE is answered and changes nothing. */
static void test_resume_unpaused(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	al_frame f;
	send_raw(c, AL_F_RESUME, AL_REQ_ID_RESUME, "{}", 2);
	recv_frame(c, &f);
	assert_int_equal(f.type, AL_F_RESULT);
	al_frame_free(&f);
	run *r = exec_wait(c, 41, "{\"cmd\":[\"echo\",\"x\"]}");
	assert_string_equal(r->out, "x\n");
	free(r);
}

static void test_exec_background_does_not_hold_exit(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	int64_t t0 = al_now_ms();
	run *r = exec_wait(c, 21,
			   "{\"cmd\":[\"sh\",\"-c\",\"sleep 3 & echo done\"]}");
	assert_string_equal(r->out, "done\n");
	assert_int_equal(r->exit_code, 0);
	assert_true(al_now_ms() - t0 < 2500);
	free(r);
}

static void test_exec_signal(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	run *r = new_run(30);
	send_json(c, AL_F_EXEC, 30, "{\"cmd\":[\"sleep\",\"30\"]}");
	wait_started(c, r);
	send_json(c, AL_F_SIGNAL, 30, "{\"signal\":%d}", SIGTERM);
	wait_runs(c, &r, 1);
	assert_string_equal(r->signal, "SIGTERM");
	assert_false(r->timed_out);
	free(r);
}

/* A command that leaves two processes behind: one in a session of its
 * own (setsid) and one orphaned by a shell that exited (a daemon's
 * double fork). Their pids are printed, one a line. */
#define LEAVES_TWO                                                             \
	"setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!; "              \
	"sh -c 'sleep 300 </dev/null >/dev/null 2>&1 & echo $!'"

static bool pid_alive(pid_t pid)
{
	/* A zombie is dead; only its reaper has not waited for it yet. */
	char p[64], buf[256];
	snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
	FILE *fp = fopen(p, "r");
	if (fp == NULL)
		return false;
	size_t n = fread(buf, 1, sizeof buf - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	char *rp = strrchr(buf, ')');
	return rp != NULL && !(rp[1] == ' ' && rp[2] == 'Z');
}

static void left_pids(const run *r, pid_t pids[2])
{
	assert_int_equal(sscanf(r->out, "%d\n%d", &pids[0], &pids[1]), 2);
	assert_true(pids[0] > 1 && pids[1] > 1);
}

static void test_exec_kill_on_exit(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	pid_t left[2];

	/* Without it, what the command left lives on (until the sandbox
	 * ends): setsid and double fork leave the process group. */
	run *r = exec_wait(c, 45,
			   "{\"cmd\":[\"sh\",\"-c\",\"" LEAVES_TWO "\"]}");
	assert_int_equal(r->exit_code, 0);
	left_pids(r, left);
	assert_true(pid_alive(left[0]));
	assert_true(pid_alive(left[1]));
	kill(left[0], SIGKILL);
	kill(left[1], SIGKILL);
	free(r);

	/* With it, both are gone by the time EXIT comes, and the exit is
	 * the command's own. */
	r = exec_wait(c, 46,
		      "{\"cmd\":[\"sh\",\"-c\",\"" LEAVES_TWO "; exit 3\"],"
		      "\"kill_on_exit\":true}");
	assert_int_equal(r->exit_code, 3);
	left_pids(r, left);
	assert_false(pid_alive(left[0]));
	assert_false(pid_alive(left[1]));
	free(r);

	/* At its timeout too: reported as the timeout's SIGKILL. */
	int64_t t0 = al_now_ms();
	r = exec_wait(c, 47,
		      "{\"cmd\":[\"sh\",\"-c\",\"" LEAVES_TWO "; sleep 30\"],"
		      "\"kill_on_exit\":true,\"timeout_ms\":500}");
	assert_string_equal(r->signal, "SIGKILL");
	assert_true(r->timed_out);
	assert_true(al_now_ms() - t0 < 5000);
	left_pids(r, left);
	assert_false(pid_alive(left[0]));
	assert_false(pid_alive(left[1]));
	free(r);

	/* A SIGNAL reaches the command (STARTED names it, not the reaper)
	 * and its end takes the rest. */
	r = new_run(48);
	send_json(c, AL_F_EXEC, 48,
		  "{\"cmd\":[\"sh\",\"-c\",\"" LEAVES_TWO "; exec sleep 30\"],"
		  "\"kill_on_exit\":true}");
	wait_started(c, r);
	/* Both printed: both running. */
	while (strchr(r->out, '\n') == NULL ||
	       strchr(strchr(r->out, '\n') + 1, '\n') == NULL) {
		al_frame f;
		recv_frame(c, &f);
		route(&r, 1, &f);
		al_frame_free(&f);
		assert_false(r->exited);
	}
	send_json(c, AL_F_SIGNAL, 48, "{\"signal\":%d}", SIGTERM);
	wait_runs(c, &r, 1);
	assert_string_equal(r->signal, "SIGTERM");
	assert_false(r->timed_out);
	left_pids(r, left);
	assert_false(pid_alive(left[0]));
	assert_false(pid_alive(left[1]));
	free(r);
}

static void test_exec_missing_binary(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	run *r = exec_wait(c, 40,
			   "{\"cmd\":[\"/nonexistent/airlock-no-such\"]}");
	assert_int_equal(r->exit_code, 127);
	assert_non_null(strstr(r->err, "/nonexistent/airlock-no-such"));
	free(r);
	r = exec_wait(c, 41, "{\"cmd\":[\"airlock-no-such-command\"]}");
	assert_int_equal(r->exit_code, 127);
	free(r);
}

static void test_exec_bad_requests(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	send_raw(c, AL_F_EXEC, 50, "{not json", 9);
	expect_error(c, 50, "invalid_request");
	send_json(c, AL_F_EXEC, 51, "[\"echo\"]");
	expect_error(c, 51, "invalid_request");
	send_json(c, AL_F_EXEC, 52, "{\"cmd\":[]}");
	expect_error(c, 52, "invalid_request");
	send_json(c, AL_F_EXEC, 53, "{\"cmd\":[\"echo\",1]}");
	expect_error(c, 53, "invalid_request");
	send_json(c, AL_F_EXEC, 54, "{\"cmd\":[\"echo\"],\"timeout_ms\":-1}");
	expect_error(c, 54, "invalid_request");
	send_json(c, AL_F_EXEC, 55, "{\"cmd\":[\"echo\"],\"env\":{\"A\":1}}");
	expect_error(c, 55, "invalid_request");
	send_json(c, AL_F_EXEC, 56, "{\"cmd\":[\"echo\"],\"cwd\":\"rel\"}");
	expect_error(c, 56, "invalid_path");
	send_json(c, AL_F_EXEC, 57,
		  "{\"cmd\":[\"echo\"],\"cwd\":\"/nonexistent-airlock\"}");
	expect_error(c, 57, "not_found");
	send_json(c, AL_F_EXEC, 58, "{\"cmd\":[\"ec\\u0000ho\"]}");
	expect_error(c, 58, "invalid_request");
	/* Binary garbage inside a well-formed frame. */
	uint8_t junk[64];
	for (size_t i = 0; i < sizeof junk; i++)
		junk[i] = (uint8_t)(i * 37 + 1);
	send_raw(c, AL_F_FILE_LIST, 59, junk, sizeof junk);
	expect_error(c, 59, "invalid_request");
	/* A frame type that is not a request. */
	send_json(c, AL_F_RESULT, 60, "{}");
	expect_error(c, 60, "invalid_request");

	/* Still serving. */
	run *r = exec_wait(c, 61, "{\"cmd\":[\"echo\",\"alive\"]}");
	assert_string_equal(r->out, "alive\n");
	free(r);
}

static void test_exec_duplicate_id(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	run *r = new_run(70);
	send_json(c, AL_F_EXEC, 70, "{\"cmd\":[\"cat\"],\"stdin\":true}");
	wait_started(c, r);
	send_json(c, AL_F_EXEC, 70, "{\"cmd\":[\"echo\"]}");
	expect_error(c, 70, "already_exists");
	/* The first process is untouched by the refused duplicate. */
	echo_through(c, r, "still here\n");
	send_raw(c, AL_F_STDIN, 70, NULL, 0);
	wait_runs(c, &r, 1);
	assert_int_equal(r->exit_code, 0);
	free(r);
}

/* ---- files ---- */

static void write_file(ctx *c, uint32_t id, const char *path, int mode,
		       const uint8_t *data, size_t len, size_t chunk)
{
	al_frame f;
	send_json(c, AL_F_FILE_WRITE, id, "{\"path\":\"%s\",\"mode\":%d}", path,
		  mode);
	for (size_t off = 0; off < len; off += chunk) {
		size_t n = len - off < chunk ? len - off : chunk;
		send_raw(c, AL_F_FILE_DATA, id, data + off, n);
	}
	send_raw(c, AL_F_FILE_END, id, NULL, 0);
	recv_frame(c, &f);
	if (f.type != AL_F_RESULT)
		fail_msg("write %s: %s %s", path, al_frame_type_name(f.type),
			 (char *)f.payload);
	assert_int_equal(f.id, id);
	json_object *o = payload_json(&f);
	assert_int_equal(jint(o, "bytes"), (int64_t)len);
	json_object_put(o);
	al_frame_free(&f);
}

/* Read a file back; returns malloc'd bytes, *len set. */
static uint8_t *read_file(ctx *c, uint32_t id, const char *path, size_t *len)
{
	size_t cap = 1 << 20, n = 0;
	uint8_t *buf = malloc(cap);
	assert_non_null(buf);
	send_json(c, AL_F_FILE_READ, id, "{\"path\":\"%s\"}", path);
	for (;;) {
		al_frame f;
		recv_frame(c, &f);
		assert_int_equal(f.id, id);
		if (f.type == AL_F_FILE_END) {
			assert_int_equal(f.len, 0);
			al_frame_free(&f);
			break;
		}
		assert_int_equal(f.type, AL_F_FILE_DATA);
		assert_true(f.len > 0 && f.len <= 65536);
		assert_true(n + f.len <= cap);
		memcpy(buf + n, f.payload, f.len);
		n += f.len;
		al_frame_free(&f);
	}
	*len = n;
	return buf;
}

static json_object *find_entry(json_object *entries, const char *name)
{
	size_t n = json_object_array_length(entries);
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(entries, i);
		if (strcmp(jstr(e, "name"), name) == 0)
			return e;
	}
	fail_msg("no entry %s", name);
	return NULL;
}

static void test_file_write_read_list(void **state)
{
	ctx *c = *state;
	char path[PATH_MAX], dir[512];
	skip_hello(c);

	size_t len = 200 * 1024 + 17;
	uint8_t *data = malloc(len);
	assert_non_null(data);
	for (size_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 131 + i / 256);
	snprintf(dir, sizeof dir, "%s/a/b", c->dir);
	snprintf(path, sizeof path, "%s/c.bin", dir);
	write_file(c, 80, path, 0600, data, len, 50000);

	/* On disk: content, mode, parents, no temp file left behind. */
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, (off_t)len);
	assert_int_equal(st.st_mode & 07777, 0600);
	char parent[PATH_MAX];
	snprintf(parent, sizeof parent, "%s/a", c->dir);
	assert_int_equal(stat(parent, &st), 0);
	assert_true(S_ISDIR(st.st_mode));

	size_t got_len;
	uint8_t *got = read_file(c, 81, path, &got_len);
	assert_int_equal(got_len, len);
	assert_memory_equal(got, data, len);
	free(got);

	/* Overwrite replaces the content; an empty file is fine. */
	write_file(c, 82, path, 0644, NULL, 0, 1);
	got = read_file(c, 83, path, &got_len);
	assert_int_equal(got_len, 0);
	free(got);

	char link[PATH_MAX];
	snprintf(link, sizeof link, "%s/ln", dir);
	assert_int_equal(symlink("c.bin", link), 0);
	snprintf(parent, sizeof parent, "%s/sub", dir);
	assert_int_equal(mkdir(parent, 0750), 0);

	send_json(c, AL_F_FILE_LIST, 84, "{\"path\":\"%s\"}", dir);
	al_frame f;
	recv_frame(c, &f);
	assert_int_equal(f.type, AL_F_RESULT);
	assert_int_equal(f.id, 84);
	json_object *o = payload_json(&f);
	json_object *entries;
	assert_true(json_object_object_get_ex(o, "entries", &entries));
	assert_int_equal(json_object_array_length(entries), 3);
	json_object *e = find_entry(entries, "c.bin");
	assert_string_equal(jstr(e, "type"), "file");
	assert_int_equal(jint(e, "size"), 0);
	assert_int_equal(jint(e, "mode"), 0644);
	assert_true(jint(e, "mtime") > 1600000000);
	e = find_entry(entries, "ln");
	assert_string_equal(jstr(e, "type"), "symlink");
	e = find_entry(entries, "sub");
	assert_string_equal(jstr(e, "type"), "dir");
	assert_int_equal(jint(e, "mode"), 0750);
	/* Only the three entries: no ".", "..", or leftover temp file. */
	json_object_put(o);
	al_frame_free(&f);
	free(data);
}

/* What the shim sends on a transfer whose client went away. */
#define ABORT_REQ "{\"code\":\"conflict\",\"message\":\"client went away\"}"

/* A write the host aborts (ERROR on its id) leaves no file and no temp
 * file, gets no answer, and the agent serves the next request. */
static void test_file_write_abort(void **state)
{
	ctx *c = *state;
	char path[PATH_MAX];
	skip_hello(c);
	snprintf(path, sizeof path, "%s/partial.bin", c->dir);
	send_json(c, AL_F_FILE_WRITE, 90, "{\"path\":\"%s\",\"mode\":420}",
		  path);
	send_raw(c, AL_F_FILE_DATA, 90, "half", 4);
	send_raw(c, AL_F_ERROR, 90, ABORT_REQ, sizeof ABORT_REQ - 1);

	/* The next answer on the channel is for the list, not for 90. */
	send_json(c, AL_F_FILE_LIST, 91, "{\"path\":\"%s\"}", c->dir);
	al_frame f;
	recv_frame(c, &f);
	assert_int_equal(f.id, 91);
	assert_int_equal(f.type, AL_F_RESULT);
	json_object *o = payload_json(&f);
	json_object *entries;
	assert_true(json_object_object_get_ex(o, "entries", &entries));
	assert_int_equal(json_object_array_length(entries), 0);
	json_object_put(o);
	al_frame_free(&f);
	struct stat st;
	assert_int_equal(stat(path, &st), -1);
}

static void put_text(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	assert_int_equal(fputs(text, fp) >= 0, 1);
	assert_int_equal(fclose(fp), 0);
}

static void assert_text(const char *path, const char *text)
{
	char buf[256];
	FILE *fp = fopen(path, "r");
	assert_non_null(fp);
	size_t n = fread(buf, 1, sizeof buf - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	assert_string_equal(buf, text);
}

/* Names in dir that start with prefix. */
static int count_prefixed(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

/* A request the agent answers after everything sent before it: once it
 * is answered, earlier frames were handled. */
static void sync_agent(ctx *c, uint32_t id)
{
	al_frame f;
	send_json(c, AL_F_FILE_LIST, id, "{\"path\":\"%s\"}", c->dir);
	recv_frame(c, &f);
	assert_int_equal(f.id, id);
	assert_int_equal(f.type, AL_F_RESULT);
	al_frame_free(&f);
}

/* Until FILE_END the bytes go to a hidden file beside the target, which
 * keeps its old content; FILE_END swaps the whole new file in. */
static void test_file_write_is_atomic(void **state)
{
	ctx *c = *state;
	char path[PATH_MAX];
	al_frame f;
	skip_hello(c);
	snprintf(path, sizeof path, "%s/target", c->dir);
	put_text(path, "old content");

	send_json(c, AL_F_FILE_WRITE, 60, "{\"path\":\"%s\",\"mode\":420}",
		  path);
	send_raw(c, AL_F_FILE_DATA, 60, "new ", 4);
	sync_agent(c, 61);
	assert_text(path, "old content");
	assert_int_equal(count_prefixed(c->dir, ".airlock-tmp-"), 1);

	send_raw(c, AL_F_FILE_DATA, 60, "content", 7);
	send_raw(c, AL_F_FILE_END, 60, NULL, 0);
	recv_frame(c, &f);
	assert_int_equal(f.id, 60);
	assert_int_equal(f.type, AL_F_RESULT);
	json_object *o = payload_json(&f);
	assert_int_equal(jint(o, "bytes"), 11);
	json_object_put(o);
	al_frame_free(&f);
	assert_text(path, "new content");
	assert_int_equal(count_prefixed(c->dir, ".airlock-tmp-"), 0);
}

/* An aborted write leaves an existing file as it was. */
static void test_file_write_abort_keeps_old(void **state)
{
	ctx *c = *state;
	char path[PATH_MAX];
	skip_hello(c);
	snprintf(path, sizeof path, "%s/kept", c->dir);
	put_text(path, "old content");
	send_json(c, AL_F_FILE_WRITE, 62, "{\"path\":\"%s\"}", path);
	send_raw(c, AL_F_FILE_DATA, 62, "partial", 7);
	send_raw(c, AL_F_ERROR, 62, ABORT_REQ, sizeof ABORT_REQ - 1);
	sync_agent(c, 63);
	assert_text(path, "old content");
	assert_int_equal(count_prefixed(c->dir, ".airlock-tmp-"), 0);
	/* Data after the abort finds no write and changes nothing. */
	send_raw(c, AL_F_FILE_DATA, 62, "late", 4);
	send_raw(c, AL_F_FILE_END, 62, NULL, 0);
	sync_agent(c, 64);
	assert_text(path, "old content");
}

/* The host going away mid-write (channel closed, no FILE_END) leaves
 * the old file and no temporary one. */
static void test_file_write_channel_closed(void **state)
{
	ctx *c = *state;
	char path[PATH_MAX], fresh[PATH_MAX];
	skip_hello(c);
	snprintf(path, sizeof path, "%s/kept", c->dir);
	snprintf(fresh, sizeof fresh, "%s/fresh", c->dir);
	put_text(path, "old content");
	send_json(c, AL_F_FILE_WRITE, 65, "{\"path\":\"%s\"}", path);
	send_json(c, AL_F_FILE_WRITE, 66, "{\"path\":\"%s\"}", fresh);
	send_raw(c, AL_F_FILE_DATA, 65, "partial", 7);
	send_raw(c, AL_F_FILE_DATA, 66, "partial", 7);
	sync_agent(c, 67);
	assert_int_equal(count_prefixed(c->dir, ".airlock-tmp-"), 2);
	close(c->fd);
	c->fd = -1;
	int st;
	assert_int_equal(waitpid(c->pid, &st, 0), c->pid);
	c->pid = 0;
	assert_text(path, "old content");
	assert_int_equal(access(fresh, F_OK), -1);
	assert_int_equal(count_prefixed(c->dir, ".airlock-tmp-"), 0);
}

/* A download the host gives up on (ERROR on its id) stops unanswered,
 * and the channel serves the next request. */
static void test_file_read_abort(void **state)
{
	ctx *c = *state;
	char path[PATH_MAX];
	skip_hello(c);
	snprintf(path, sizeof path, "%s/big", c->dir);
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	static uint8_t block[1 << 16];
	for (int i = 0; i < 256; i++) /* 16 MiB: far more than one round */
		assert_int_equal(fwrite(block, 1, sizeof block, fp),
				 sizeof block);
	assert_int_equal(fclose(fp), 0);
	send_json(c, AL_F_FILE_READ, 68, "{\"path\":\"%s\"}", path);
	send_raw(c, AL_F_ERROR, 68, ABORT_REQ, sizeof ABORT_REQ - 1);
	send_json(c, AL_F_FILE_LIST, 69, "{\"path\":\"%s\"}", c->dir);
	/* Chunks sent before the abort arrived may come; then the list, and
	 * no FILE_END for 68. */
	size_t got = 0;
	for (;;) {
		al_frame f;
		recv_frame(c, &f);
		if (f.id == 69) {
			assert_int_equal(f.type, AL_F_RESULT);
			al_frame_free(&f);
			break;
		}
		assert_int_equal(f.id, 68);
		assert_int_equal(f.type, AL_F_FILE_DATA);
		got += f.len;
		al_frame_free(&f);
	}
	assert_true(got < sizeof block * 256);
}

static void test_file_errors(void **state)
{
	ctx *c = *state;
	char path[PATH_MAX];
	skip_hello(c);

	snprintf(path, sizeof path, "%s/missing", c->dir);
	send_json(c, AL_F_FILE_READ, 90, "{\"path\":\"%s\"}", path);
	expect_error(c, 90, "not_found");
	send_json(c, AL_F_FILE_LIST, 91, "{\"path\":\"%s\"}", path);
	expect_error(c, 91, "not_found");
	send_json(c, AL_F_FILE_READ, 92, "{\"path\":\"relative/x\"}");
	expect_error(c, 92, "invalid_path");
	send_json(c, AL_F_FILE_WRITE, 93, "{\"path\":\"relative/x\"}");
	expect_error(c, 93, "invalid_path");
	send_json(c, AL_F_FILE_LIST, 94, "{\"path\":\"\"}");
	expect_error(c, 94, "invalid_path");
	send_json(c, AL_F_FILE_READ, 95, "{\"path\":\"%s\"}", c->dir);
	expect_error(c, 95, "invalid_path");
	send_json(c, AL_F_FILE_READ, 96, "{\"nopath\":1}");
	expect_error(c, 96, "invalid_request");
	send_json(c, AL_F_FILE_WRITE, 97, "{\"path\":\"%s/\"}", c->dir);
	expect_error(c, 97, "invalid_path");

	/* A file where a parent directory should be. */
	snprintf(path, sizeof path, "%s/f", c->dir);
	write_file(c, 98, path, 0644, (const uint8_t *)"x", 1, 1);
	send_json(c, AL_F_FILE_WRITE, 99, "{\"path\":\"%s/f/g\"}", c->dir);
	expect_error(c, 99, "invalid_path");
	/* Data that follows a refused write is dropped quietly. */
	send_raw(c, AL_F_FILE_DATA, 99, "zz", 2);
	send_raw(c, AL_F_FILE_END, 99, NULL, 0);
	send_json(c, AL_F_FILE_LIST, 100, "{\"path\":\"%s\"}", path);
	expect_error(c, 100, "invalid_path");
}

static void test_garbage_framing_exits(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	static const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	assert_int_equal(write(c->fd, junk, sizeof junk - 1),
			 (ssize_t)sizeof junk - 1);
	expect_error(c, 0, "bad_gateway");
	int st;
	assert_int_equal(waitpid(c->pid, &st, 0), c->pid);
	c->pid = 0;
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 100);
}

static void test_oversized_frame_exits(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	uint8_t h[AL_FRAME_HDR_LEN] = {'A',  'L', 'F', '1', 0, AL_F_STDIN,
				       0,    0,	  0,   0,   0, 1,
				       0x10, 0,	  0,   1};
	assert_int_equal(write(c->fd, h, sizeof h), (ssize_t)sizeof h);
	expect_error(c, 0, "bad_gateway");
	int st;
	assert_int_equal(waitpid(c->pid, &st, 0), c->pid);
	c->pid = 0;
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 100);
}

static void test_eof_kills_children(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	run *r = new_run(110);
	send_json(c, AL_F_EXEC, 110, "{\"cmd\":[\"sleep\",\"30\"]}");
	wait_started(c, r);
	close(c->fd);
	c->fd = -1;
	int st;
	assert_int_equal(waitpid(c->pid, &st, 0), c->pid);
	c->pid = 0;
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The child is gone (or a zombie awaiting its new reaper). */
	bool gone = false;
	for (int i = 0; i < 100 && !gone; i++) {
		char p[64], buf[256];
		snprintf(p, sizeof p, "/proc/%d/stat", (int)r->pid);
		FILE *fp = fopen(p, "r");
		if (fp == NULL) {
			gone = true;
			break;
		}
		size_t n = fread(buf, 1, sizeof buf - 1, fp);
		fclose(fp);
		buf[n] = '\0';
		char *rp = strrchr(buf, ')');
		if (rp != NULL && rp[1] == ' ' && rp[2] == 'Z')
			gone = true;
		else
			usleep(20 * 1000);
	}
	assert_true(gone);
	free(r);
}

static void test_ignores_sigterm(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	kill(c->pid, SIGTERM);
	kill(c->pid, SIGINT);
	kill(c->pid, SIGHUP);
	kill(c->pid, SIGPIPE);
	run *r = exec_wait(c, 120, "{\"cmd\":[\"echo\",\"ok\"]}");
	assert_string_equal(r->out, "ok\n");
	free(r);
	/* Children do not inherit the agent's ignored signals. */
	r = new_run(121);
	send_json(c, AL_F_EXEC, 121, "{\"cmd\":[\"sleep\",\"30\"]}");
	wait_started(c, r);
	send_json(c, AL_F_SIGNAL, 121, "{\"signal\":%d}", SIGINT);
	wait_runs(c, &r, 1);
	assert_string_equal(r->signal, "SIGINT");
	free(r);
}

static void test_big_output_streams(void **state)
{
	ctx *c = *state;
	skip_hello(c);
	/* 200 KB of output arrives in chunks of at most 64 KiB. */
	run *r = exec_wait(c, 130,
			   "{\"cmd\":[\"sh\",\"-c\",\"yes abcdefg | "
			   "head -c 204800\"]}");
	assert_int_equal(r->out_len, 204800);
	for (size_t i = 0; i < r->out_len; i += 8)
		assert_memory_equal(r->out + i, "abcdefg\n", 8);
	assert_int_equal(r->exit_code, 0);
	free(r);
}

/* Skip the hello, then send one IDENTITY and return the answer. */
static void identity_answer(ctx *c, uint32_t id, const char *payload,
			    al_frame *f)
{
	send_raw(c, AL_F_IDENTITY, id, payload, strlen(payload));
	recv_frame(c, f);
	if (f->type == AL_F_HELLO) {
		al_frame_free(f);
		recv_frame(c, f);
	}
	assert_int_equal(f->id, id);
}

#define SEED "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

static void test_identity(void **state)
{
	ctx *c = *state;
	if (c == NULL)
		skip(); /* no user namespaces here */
	char host_before[256] = "", host_after[256] = "";
	assert_int_equal(gethostname(host_before, sizeof host_before), 0);
	char body[512];
	snprintf(body, sizeof body,
		 "{\"hostname\":\"sbx-identity-1\",\"entropy\":\"" SEED
		 "\",\"time_ms\":%lld}",
		 (long long)time(NULL) * 1000);
	al_frame f;
	identity_answer(c, 1, body, &f);
	/* In a VM the agent is root of its kernel: RESULT. Here it lacks
	 * the clock and RNG privileges of the host: forbidden, and the
	 * request is over either way. */
	if (f.type == AL_F_ERROR) {
		json_object *o = payload_json(&f);
		assert_string_equal(jstr(o, "code"), "forbidden");
		json_object_put(o);
	} else {
		assert_int_equal(f.type, AL_F_RESULT);
		assert_string_equal((char *)f.payload, "{}");
	}
	al_frame_free(&f);
	assert_int_equal(gethostname(host_after, sizeof host_after), 0);
	assert_string_equal(host_before, host_after);
	/* The agent still serves requests afterwards. */
	run *r = exec_wait(c, 2, "{\"cmd\":[\"true\"]}");
	assert_int_equal(r->exit_code, 0);
	free(r);
}

static void test_identity_bad_payloads(void **state)
{
	ctx *c = *state;
	if (c == NULL)
		skip();
	static const char *const bad[] = {
		"",
		"not json",
		"[]",
		"{}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED "\"}",
		"{\"hostname\":\"a\",\"time_ms\":1}",
		"{\"entropy\":\"" SEED "\",\"time_ms\":1}",
		"{\"hostname\":\"Upper\",\"entropy\":\"" SEED
		"\",\"time_ms\":1}",
		"{\"hostname\":\"-a\",\"entropy\":\"" SEED "\",\"time_ms\":1}",
		"{\"hostname\":\"a.b\",\"entropy\":\"" SEED "\",\"time_ms\":1}",
		"{\"hostname\":\"\",\"entropy\":\"" SEED "\",\"time_ms\":1}",
		"{\"hostname\":\"a\\u0000b\",\"entropy\":\"" SEED
		"\",\"time_ms\":1}",
		"{\"hostname\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"aaa\",\"entropy\":\"" SEED "\",\"time_ms\":1}",
		"{\"hostname\":5,\"entropy\":\"" SEED "\",\"time_ms\":1}",
		"{\"hostname\":\"a\",\"entropy\":\"00\",\"time_ms\":1}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED "00\",\"time_ms\":1}",
		"{\"hostname\":\"a\",\"entropy\":\"00112233445566778899AABBCCDDE"
		"EFF00112233445566778899aabbccddeeff\",\"time_ms\":1}",
		"{\"hostname\":\"a\",\"entropy\":\"zz112233445566778899aabbccdde"
		"eff00112233445566778899aabbccddeeff\",\"time_ms\":1}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED "\",\"time_ms\":0}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED "\",\"time_ms\":-5}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED "\",\"time_ms\":1.5}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":\"1\"}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":99999999999999999}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":1,\"extra\":1}",
		/* mac: exactly "xx:xx:xx:xx:xx:xx", lowercase, unicast */
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":1,\"mac\":\"\"}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":1,\"mac\":5}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":1,\"mac\":\"02:AB:cd:ef:01:23\"}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":1,\"mac\":\"03:ab:cd:ef:01:23\"}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":1,\"mac\":\"ff:ff:ff:ff:ff:ff\"}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":1,\"mac\":\"00:00:00:00:00:00\"}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":1,\"mac\":\"02:ab:cd:ef:01:2\"}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":1,\"mac\":\"02:ab:cd:ef:01:234\"}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":1,\"mac\":\"02-ab-cd-ef-01-23\"}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":1,\"mac\":\"02:ab:cd:ef:0123\"}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":1,\"mac\":\"02:ab:cd:ef:01:g3\"}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":1,\"mac\":\" 2:ab:cd:ef:01:23\"}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":1,\"mac\":\"02:ab:cd:ef:01:23\\u0000\"}",
		"{\"hostname\":\"a\",\"entropy\":\"" SEED
		"\",\"time_ms\":1,\"mac\":\"02:ab:cd:ef:01:23\\n\"}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		al_frame f;
		identity_answer(c, (uint32_t)(10 + i), bad[i], &f);
		if (f.type != AL_F_ERROR)
			fail_msg("payload %zu accepted (%s): %s", i,
				 al_frame_type_name(f.type), bad[i]);
		json_object *o = payload_json(&f);
		if (strcmp(jstr(o, "code"), "invalid_request") != 0)
			fail_msg("payload %zu: %s: %s", i, jstr(o, "code"),
				 bad[i]);
		json_object_put(o);
		al_frame_free(&f);
	}
}

/* A bad mac is refused before anything is applied: invalid_request,
 * where applying would have failed with forbidden first (no clock
 * privilege here), and the hostname stays. */
static void test_identity_bad_mac_applies_nothing(void **state)
{
	ctx *c = *state;
	if (c == NULL)
		skip();
	al_frame f;
	recv_frame(c, &f);
	assert_int_equal(f.type, AL_F_HELLO);
	al_frame_free(&f);
	run *r = exec_wait(c, 1,
			   "{\"cmd\":[\"cat\",\"/proc/sys/kernel/hostname\"]}");
	assert_int_equal(r->exit_code, 0);
	char before[128];
	snprintf(before, sizeof before, "%.*s", (int)r->out_len, r->out);
	free(r);
	char body[512];
	snprintf(body, sizeof body,
		 "{\"hostname\":\"sbx-bad-mac\",\"entropy\":\"" SEED
		 "\",\"time_ms\":%lld,\"mac\":\"01:00:5e:00:00:01\"}",
		 (long long)time(NULL) * 1000);
	identity_answer(c, 2, body, &f);
	assert_int_equal(f.type, AL_F_ERROR);
	json_object *o = payload_json(&f);
	assert_string_equal(jstr(o, "code"), "invalid_request");
	assert_non_null(strstr(jstr(o, "message"), "mac"));
	json_object_put(o);
	al_frame_free(&f);
	r = exec_wait(c, 3,
		      "{\"cmd\":[\"cat\",\"/proc/sys/kernel/hostname\"]}");
	assert_int_equal(r->exit_code, 0);
	assert_int_equal(r->out_len, strlen(before));
	assert_memory_equal(r->out, before, r->out_len);
	free(r);
}

/* A well-formed mac with no virtio-net NIC to give it to (here: an empty
 * network namespace) ends the request with an error that names the MAC,
 * tried before the clock: a host that asks for a MAC never gets RESULT
 * without it. */
static void test_identity_mac_without_nic_fails(void **state)
{
	ctx *c = *state;
	if (c == NULL)
		skip();
	char body[512];
	snprintf(body, sizeof body,
		 "{\"hostname\":\"sbx-mac\",\"entropy\":\"" SEED
		 "\",\"time_ms\":%lld,\"mac\":\"02:ab:cd:ef:01:23\"}",
		 (long long)time(NULL) * 1000);
	al_frame f;
	identity_answer(c, 1, body, &f);
	assert_int_equal(f.type, AL_F_ERROR);
	json_object *o = payload_json(&f);
	if (strstr(jstr(o, "message"), "setting the MAC") == NULL)
		fail_msg("unexpected error: %s: %s", jstr(o, "code"),
			 jstr(o, "message"));
	json_object_put(o);
	al_frame_free(&f);
	/* The agent still serves requests afterwards. */
	run *r = exec_wait(c, 2, "{\"cmd\":[\"true\"]}");
	assert_int_equal(r->exit_code, 0);
	free(r);
}

/* DISK_GROW on a loop-mounted ext4 image in the test's directory: the
 * image file is already bigger than its filesystem, as a vm sandbox's
 * is after the host grew it. Needs root and a loop device. */
static bool disk_mounted;

static int sh_ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh_ok(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	int st = system(cmd);
	return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int teardown_disk(void **state)
{
	ctx *c = *state;
	if (c != NULL && disk_mounted)
		(void)sh_ok("umount %s/mnt", c->dir);
	disk_mounted = false;
	return teardown(state);
}

static uint64_t fs_bytes(const char *path)
{
	struct statvfs sv;
	assert_int_equal(statvfs(path, &sv), 0);
	return (uint64_t)sv.f_blocks * sv.f_frsize;
}

static void grow_answer(ctx *c, uint32_t id, const char *payload, al_frame *f)
{
	send_raw(c, AL_F_DISK_GROW, id, payload, strlen(payload));
	recv_frame(c, f);
	if (f->type == AL_F_HELLO) {
		al_frame_free(f);
		recv_frame(c, f);
	}
	assert_int_equal(f->id, id);
}

/* The image: 64 MiB of ext4 in a 160 MiB file, mounted at dir/mnt;
 * false when this host cannot (not root, no loop device). */
static bool mount_disk(ctx *c, char *mnt, size_t len)
{
	snprintf(mnt, len, "%s/mnt", c->dir);
	if (geteuid() != 0 ||
	    !sh_ok("truncate -s 64M %s/img && /usr/sbin/mkfs.ext4 -q -F "
		   "-b 4096 %s/img && truncate -s 160M %s/img && "
		   "mkdir %s && mount -o loop %s/img %s 2>/dev/null",
		   c->dir, c->dir, c->dir, mnt, c->dir, mnt))
		return false;
	disk_mounted = true;
	return true;
}

/* ext4 grows only for CAP_SYS_RESOURCE (the guest's root has it; a
 * container's root may not). */
static bool have_sys_resource(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[128];
	unsigned long long eff = 0;
	while (f != NULL && fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	if (f != NULL)
		fclose(f);
	return (eff >> 24) & 1; /* CAP_SYS_RESOURCE */
}

static void grow_to(ctx *c, uint32_t id, const char *mnt, uint64_t bytes,
		    al_frame *f)
{
	char body[160];
	snprintf(body, sizeof body, "{\"path\":\"%s\",\"bytes\":%llu}", mnt,
		 (unsigned long long)bytes);
	grow_answer(c, id, body, f);
}

static void test_disk_grow(void **state)
{
	ctx *c = *state;
	char mnt[96];
	/* Said, not silent: a skip here means the grow went untested. */
	if (!have_sys_resource()) {
		print_message("skipped: no CAP_SYS_RESOURCE (ext4 grows only "
			      "with it)\n");
		skip();
	}
	if (!mount_disk(c, mnt, sizeof mnt)) {
		print_message("skipped: cannot loop-mount a test ext4 "
			      "(not root, or no loop device)\n");
		skip();
	}
	uint64_t before = fs_bytes(mnt);
	assert_true(before < (64ull << 20));
	al_frame f;
	grow_to(c, 1, mnt, 160ull << 20, &f);
	if (f.type != AL_F_RESULT)
		fail_msg("grow: %s %s", al_frame_type_name(f.type),
			 (char *)f.payload);
	al_frame_free(&f);
	uint64_t grown = fs_bytes(mnt);
	assert_true(grown > (150ull << 20) && grown <= (160ull << 20));
	/* The grown filesystem holds data past the old end. */
	assert_true(sh_ok("dd if=/dev/zero of=%s/f bs=1M count=100 "
			  "conv=fsync 2>/dev/null",
			  mnt));
	/* Smaller than it is now: ext4 cannot shrink online; nothing
	 * changes. */
	grow_to(c, 2, mnt, 64ull << 20, &f);
	assert_int_equal(f.type, AL_F_ERROR);
	al_frame_free(&f);
	assert_int_equal(fs_bytes(mnt), grown);
}

/* Past the device's size: the agent waits for the device to grow, then
 * gives up with nothing changed. */
static void test_disk_grow_waits_for_the_device(void **state)
{
	ctx *c = *state;
	char mnt[96];
	if (!mount_disk(c, mnt, sizeof mnt)) {
		print_message("skipped: cannot loop-mount a test ext4 "
			      "(not root, or no loop device)\n");
		skip();
	}
	uint64_t before = fs_bytes(mnt);
	al_frame f;
	int64_t t0 = al_now_ms();
	grow_to(c, 3, mnt, 320ull << 20, &f);
	assert_int_equal(f.type, AL_F_ERROR);
	json_object *o = payload_json(&f);
	assert_string_equal(jstr(o, "code"), "timeout");
	json_object_put(o);
	al_frame_free(&f);
	assert_true(al_now_ms() - t0 >= 4000);
	assert_int_equal(fs_bytes(mnt), before);
}

static void test_disk_grow_bad_requests(void **state)
{
	ctx *c = *state;
	static const struct {
		const char *body, *code;
	} bad[] = {
		{"{\"path\":\"relative\",\"bytes\":1048576}", "invalid_path"},
		{"{\"bytes\":1048576}", "invalid_request"},
		{"{\"path\":\"/proc\"}", "invalid_request"},
		{"{\"path\":\"/proc\",\"bytes\":-5}", "invalid_request"},
		{"{\"path\":\"/proc\",\"bytes\":\"9\"}", "invalid_request"},
		{"{\"path\":\"/proc\",\"bytes\":1.5}", "invalid_request"},
		/* Not ext4: nothing is asked of any device. */
		{"{\"path\":\"/proc\",\"bytes\":1048576}", "invalid_request"},
		{"[1]", "invalid_request"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		al_frame f;
		grow_answer(c, (uint32_t)(10 + i), bad[i].body, &f);
		if (f.type != AL_F_ERROR)
			fail_msg("%s: %s", bad[i].body,
				 al_frame_type_name(f.type));
		json_object *o = payload_json(&f);
		if (strcmp(jstr(o, "code"), bad[i].code) != 0)
			fail_msg("%s: %s", bad[i].body,
				 json_object_to_json_string(o));
		json_object_put(o);
		al_frame_free(&f);
	}
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
#define TU(fn) cmocka_unit_test_setup_teardown(fn, setup_userns, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_hello),
		T(test_exec_echo),
		T(test_exec_oom_score_reset),
		T(test_exec_exit_code_and_stderr),
		T(test_exec_env_cwd),
		T(test_exec_stdin_cat),
		T(test_exec_concurrent),
		T(test_exec_timeout),
		T(test_pause_holds_output_and_deadlines),
		T(test_resume_unpaused),
		T(test_exec_background_does_not_hold_exit),
		T(test_exec_signal),
		T(test_exec_kill_on_exit),
		T(test_exec_missing_binary),
		T(test_exec_bad_requests),
		T(test_exec_duplicate_id),
		T(test_file_write_read_list),
		T(test_file_write_abort),
		T(test_file_write_is_atomic),
		T(test_file_write_abort_keeps_old),
		T(test_file_write_channel_closed),
		T(test_file_read_abort),
		T(test_file_errors),
		T(test_garbage_framing_exits),
		T(test_oversized_frame_exits),
		T(test_eof_kills_children),
		T(test_ignores_sigterm),
		T(test_big_output_streams),
		cmocka_unit_test_setup_teardown(test_disk_grow, setup,
						teardown_disk),
		cmocka_unit_test_setup_teardown(
			test_disk_grow_waits_for_the_device, setup,
			teardown_disk),
		T(test_disk_grow_bad_requests),
		TU(test_identity),
		TU(test_identity_bad_payloads),
		TU(test_identity_bad_mac_applies_nothing),
		cmocka_unit_test_setup_teardown(
			test_identity_mac_without_nic_fails, setup_userns_net,
			teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
