/* The controller's credential service (controller/credsvc.c) over a
 * fake store: a HELLO gets the sandbox's set, only from root; a refresh
 * pushes the new set and answers once acknowledged; the rate limit of a
 * credential is one bucket across sandboxes; uses become audit rows
 * with the sandbox's project and key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "../../controller/credsvc.c"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char value[64] = "secret-1";
static al_credsvc_row rows[64];
static size_t n_rows;
/* Every row written, however many: uses, and the drops the rows of
 * drops count. */
static unsigned long uses_total, drops_total;

static int fake_effective(void *arg, const char *sandbox,
			  al_credsvc_sandbox *sb, al_cred_set *out, al_err *err)
{
	(void)arg;
	if (strncmp(sandbox, "sb-", 3) != 0)
		return al_err_set(err, AL_ENOENT, 0, "no such sandbox");
	snprintf(sb->project, sizeof sb->project, "p1");
	snprintf(sb->key_id, sizeof sb->key_id, "key-%s", sandbox + 3);
	al_cred c = {.nhosts = 1, .rate_requests = 2, .rate_per_seconds = 60};
	snprintf(c.id, sizeof c.id, "cred-gh");
	snprintf(c.name, sizeof c.name, "github");
	snprintf(c.hosts[0], sizeof c.hosts[0], "api.github.com");
	snprintf(c.format, sizeof c.format, "Bearer {value}");
	pthread_mutex_lock(&mu);
	char v[64];
	snprintf(v, sizeof v, "%s", value);
	pthread_mutex_unlock(&mu);
	c.value = v;
	c.value_len = strlen(v);
	return al_cred_set_add(out, &c, err);
}

static int fake_audit(void *arg, const al_credsvc_row *r, size_t n, al_err *err)
{
	(void)arg;
	(void)err;
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < n && n_rows < 64; i++)
		rows[n_rows++] = r[i];
	for (size_t i = 0; i < n; i++)
		if (strcmp(r[i].use.action, "dropped") == 0)
			drops_total += strtoul(r[i].use.reason, NULL, 10);
		else
			uses_total++;
	pthread_mutex_unlock(&mu);
	return 0;
}

static char dir[] = "/tmp/test-credsvc-XXXXXX";

static int try_dial(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", dir,
		 AL_CREDSVC_SOCK);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static int dial(void)
{
	int fd = try_dial();
	assert_true(fd >= 0);
	return fd;
}

static void recv_one(int fd, al_frame_reader *r, al_frame *f)
{
	al_err err = {0};
	assert_int_equal(al_frame_recv(fd, r, f, al_now_ms() + 5000, &err), 0);
}

static void send_one(int fd, uint16_t type, uint32_t id, char *payload)
{
	al_err err = {0};
	assert_non_null(payload);
	assert_int_equal(al_frame_send(fd, type, id, payload, strlen(payload),
				       &err),
			 0);
	free(payload);
}

/* A channel for sandbox sb: connect, HELLO, the first SET. */
static int channel(const char *sb, al_frame_reader *r, al_cred_set *set)
{
	int fd = dial();
	al_frame_reader_init(r);
	send_one(fd, AL_F_CRED_HELLO, 0, al_cred_hello_pack(sb, NULL));
	al_frame f;
	recv_one(fd, r, &f);
	assert_int_equal(f.type, AL_F_CRED_SET);
	al_err err = {0};
	assert_int_equal(al_cred_set_unpack(f.payload, f.len, set, &err), 0);
	al_frame_free(&f);
	return fd;
}

static bool take(int fd, al_frame_reader *r, uint32_t req, uint32_t *retry)
{
	al_cred_take t = {.req = req};
	snprintf(t.id, sizeof t.id, "cred-gh");
	send_one(fd, AL_F_CRED_TAKE, 0, al_cred_take_pack(&t, NULL));
	al_frame f;
	recv_one(fd, r, &f);
	assert_int_equal(f.type, AL_F_CRED_GRANT);
	al_cred_grant g;
	al_err err = {0};
	assert_int_equal(al_cred_grant_unpack(f.payload, f.len, &g, &err), 0);
	al_frame_free(&f);
	assert_int_equal(g.req, req);
	*retry = g.retry_after;
	return g.ok;
}

static al_credsvc *svc;

static int setup(void **state)
{
	(void)state;
	assert_non_null(mkdtemp(dir));
	chmod(dir, 0755); /* the non-root peer reaches the socket */
	char run[64];
	snprintf(run, sizeof run, "%s/run", dir);
	mkdir(run, 0755);
	al_credsvc_store st = {.effective = fake_effective,
			       .audit = fake_audit};
	al_err err = {0};
	svc = ctl_credsvc_start(dir, &st, &err);
	assert_non_null(svc);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ctl_credsvc_stop(svc);
	char run[64];
	snprintf(run, sizeof run, "%s/run", dir);
	rmdir(run);
	rmdir(dir);
	return 0;
}

static void test_hello_set_and_shared_bucket(void **state)
{
	(void)state;
	al_frame_reader ra, rb;
	al_cred_set a, b;
	int fa = channel("sb-a", &ra, &a);
	int fb = channel("sb-b", &rb, &b);
	assert_int_equal(a.n, 1);
	assert_string_equal(a.creds[0].value, "secret-1");
	assert_true(b.version > a.version);
	uint32_t retry = 0;
	/* 2 per 60 s for the credential, wherever it is used. */
	assert_true(take(fa, &ra, 1, &retry));
	assert_true(take(fb, &rb, 2, &retry));
	assert_false(take(fa, &ra, 3, &retry));
	assert_true(retry >= 29 && retry <= 31);
	assert_false(take(fb, &rb, 4, &retry));
	al_cred_set_free(&a);
	al_cred_set_free(&b);
	close(fa);
	close(fb);
	al_frame_reader_free(&ra);
	al_frame_reader_free(&rb);
}

static void test_unknown_sandbox_refused(void **state)
{
	(void)state;
	int fd = dial();
	al_frame_reader r;
	al_frame_reader_init(&r);
	send_one(fd, AL_F_CRED_HELLO, 0, al_cred_hello_pack("nope", NULL));
	al_frame f;
	recv_one(fd, &r, &f);
	assert_int_equal(f.type, AL_F_ERROR);
	al_frame_free(&f);
	/* and the connection is over */
	char c;
	assert_int_equal(read(fd, &c, 1), 0);
	close(fd);
	al_frame_reader_free(&r);
}

static void test_hello_from_non_root_refused(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setresgid(65534, 65534, 65534) < 0 ||
		    setresuid(65534, 65534, 65534) < 0)
			_exit(2);
		int fd = try_dial();
		al_frame_reader r;
		al_frame_reader_init(&r);
		char *p = al_cred_hello_pack("sb-x", NULL);
		al_err err;
		al_frame f;
		if (al_frame_send(fd, AL_F_CRED_HELLO, 0, p, strlen(p), &err) <
			    0 ||
		    al_frame_recv(fd, &r, &f, al_now_ms() + 5000, &err) < 0)
			_exit(3);
		al_err got;
		_exit(f.type == AL_F_ERROR &&
				      al_error_unpack(f.payload, f.len, &got,
						      &err) == 0 &&
				      got.code == AL_EPERM
			      ? 0
			      : 4);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void refresh_done(const char *project, al_cred_refresh_done *d)
{
	int fd = dial();
	al_frame_reader r;
	al_frame_reader_init(&r);
	send_one(fd, AL_F_CRED_REFRESH, AL_REQ_ID_CLIENT,
		 al_cred_refresh_pack(project, NULL));
	al_frame f;
	recv_one(fd, &r, &f);
	assert_int_equal(f.type, AL_F_CRED_REFRESH_DONE);
	al_err err = {0};
	assert_int_equal(al_cred_refresh_done_unpack(f.payload, f.len, d, &err),
			 0);
	al_frame_free(&f);
	al_frame_reader_free(&r);
	close(fd);
}

/* A gateway's side: the next SET, acknowledged. */
static void *ack_next(void *arg)
{
	int fd = *(int *)arg;
	al_frame_reader r;
	al_frame_reader_init(&r);
	al_frame f;
	al_err err;
	al_cred_set s;
	if (al_frame_recv(fd, &r, &f, al_now_ms() + 5000, &err) == 0 &&
	    f.type == AL_F_CRED_SET &&
	    al_cred_set_unpack(f.payload, f.len, &s, &err) == 0) {
		if (strcmp(s.creds[0].value, "secret-2") == 0) {
			char *p = al_cred_set_ack_pack(s.version, NULL);
			al_frame_send(fd, AL_F_CRED_SET_ACK, 0, p, strlen(p),
				      &err);
			free(p);
		}
		al_cred_set_free(&s);
		al_frame_free(&f);
	}
	al_frame_reader_free(&r);
	return NULL;
}

static void test_refresh_pushes_and_waits(void **state)
{
	(void)state;
	al_frame_reader ra, rb;
	al_cred_set a, b;
	int fa = channel("sb-c", &ra, &a);
	int fb = channel("sb-d", &rb, &b);
	al_cred_set_free(&a);
	al_cred_set_free(&b);
	pthread_mutex_lock(&mu);
	snprintf(value, sizeof value, "secret-2");
	pthread_mutex_unlock(&mu);
	pthread_t ta;
	assert_int_equal(pthread_create(&ta, NULL, ack_next, &fa), 0);
	al_cred_refresh_done d;
	/* Only one of the two acknowledges: the answer comes after the
	 * wait, and says so. */
	int64_t t0 = al_now_ms();
	refresh_done("p1", &d);
	pthread_join(ta, NULL);
	assert_int_equal(d.pushed, 2);
	assert_int_equal(d.acked, 1);
	assert_true(al_now_ms() - t0 >= AL_CREDSVC_REFRESH_WAIT_MS - 100);
	/* Another project's change touches neither. */
	refresh_done("p2", &d);
	assert_int_equal(d.pushed, 0);
	close(fa);
	close(fb);
	al_frame_reader_free(&ra);
	al_frame_reader_free(&rb);
}

/* An allowed use of github on api.github.com. */
static al_cred_use use_of(const char *method, const char *path, int status)
{
	al_cred_use u = {.status = status, .allow = true};
	snprintf(u.name, sizeof u.name, "github");
	snprintf(u.host, sizeof u.host, "api.github.com");
	snprintf(u.method, sizeof u.method, "%s", method);
	snprintf(u.path, sizeof u.path, "%s", path);
	snprintf(u.action, sizeof u.action, "use");
	return u;
}

/* sb's channel, with no rows counted yet. */
static int use_channel(const char *sb, al_frame_reader *r)
{
	al_cred_set s;
	int fd = channel(sb, r, &s);
	al_cred_set_free(&s);
	pthread_mutex_lock(&mu);
	n_rows = 0;
	uses_total = drops_total = 0;
	pthread_mutex_unlock(&mu);
	return fd;
}

static void test_use_rows(void **state)
{
	(void)state;
	al_frame_reader r;
	int fd = use_channel("sb-e", &r);
	al_cred_use u = use_of("POST", "/repos", 201);
	send_one(fd, AL_F_CRED_USE, 0, al_cred_use_pack(&u, NULL));
	size_t got = 0;
	for (int i = 0; i < 100 && got == 0; i++) {
		usleep(20000);
		pthread_mutex_lock(&mu);
		got = n_rows;
		pthread_mutex_unlock(&mu);
	}
	assert_int_equal(got, 1);
	assert_string_equal(rows[0].sandbox, "sb-e");
	assert_string_equal(rows[0].sb.project, "p1");
	assert_string_equal(rows[0].sb.key_id, "key-e");
	assert_string_equal(rows[0].use.path, "/repos");
	assert_int_equal(rows[0].use.status, 201);
	assert_true(rows[0].at_ms > 1700000000000);
	/* A malformed record ends the channel. */
	send_one(fd, AL_F_CRED_USE, 0, strdup("{\"name\":1}"));
	char c;
	assert_int_equal(read(fd, &c, 1), 0);
	close(fd);
	al_frame_reader_free(&r);
}

/* A sandbox's channel is the only way its gateway writes audit rows:
 * however fast it sends uses, at most AL_CREDSVC_FRAME_BURST +
 * AL_CREDSVC_FRAME_RATE a second become rows, and the rest are counted
 * in rows of drops, none lost between the two. */
static void test_use_flood_is_bounded(void **state)
{
	(void)state;
	al_frame_reader r;
	int fd = use_channel("sb-f", &r);
	al_cred_use u = use_of("GET", "/flood", 200);
	const unsigned long sent = 6000;
	int64_t t0 = al_now_ms();
	for (unsigned long i = 0; i < sent; i++)
		send_one(fd, AL_F_CRED_USE, 0, al_cred_use_pack(&u, NULL));
	double secs = (double)(al_now_ms() - t0) / 1000.0;
	unsigned long uses = 0, drops = 0;
	for (int i = 0; i < 250 && uses + drops < sent; i++) {
		usleep(20000);
		pthread_mutex_lock(&mu);
		uses = uses_total;
		drops = drops_total;
		pthread_mutex_unlock(&mu);
	}
	assert_int_equal(uses + drops, sent);
	assert_true((double)uses <= AL_CREDSVC_FRAME_BURST +
					    AL_CREDSVC_FRAME_RATE * (secs + 1));
	/* The flood outran the bound, else this shows nothing. */
	assert_true(drops > 0);
	close(fd);
	al_frame_reader_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello_set_and_shared_bucket),
		cmocka_unit_test(test_unknown_sandbox_refused),
		cmocka_unit_test(test_hello_from_non_root_refused),
		cmocka_unit_test(test_refresh_pushes_and_waits),
		cmocka_unit_test(test_use_rows),
		cmocka_unit_test(test_use_flood_is_bounded),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
