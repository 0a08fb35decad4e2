/* The log's two bounds: the token bucket (lines past it are counted and
 * summarised) and the size cap of the file stderr is (rotation to .1,
 * also with several processes appending to one file). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/log.h"

static char dir[64];
static int saved_stderr = -1;

static void path_of(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", dir, name);
}

/* fd 2 to dir/name, appending, as al_spawn_detached leaves it. */
static void capture(const char *name)
{
	char p[128];
	path_of(p, sizeof p, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_APPEND, 0600);
	assert_true(fd >= 0);
	saved_stderr = dup(2);
	assert_true(saved_stderr >= 0);
	assert_true(dup2(fd, 2) == 2);
	close(fd);
}

static void release(void)
{
	al_log_limit(0, 0);
	al_log_cap(NULL, 0);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	saved_stderr = -1;
}

static off_t size_of(const char *name)
{
	char p[128];
	struct stat st;
	path_of(p, sizeof p, name);
	return stat(p, &st) == 0 ? st.st_size : -1;
}

static char *slurp(const char *name)
{
	char p[128];
	path_of(p, sizeof p, name);
	FILE *f = fopen(p, "r");
	if (f == NULL)
		return strdup("");
	char *buf = calloc(1, 8u << 20);
	assert_non_null(buf);
	size_t n = fread(buf, 1, (8u << 20) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/test_log.XXXXXX");
	return mkdtemp(dir) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_bucket_burst(void **state)
{
	(void)state;
	capture("burst.log");
	al_log_limit(5, 0);
	for (int i = 0; i < 100; i++)
		al_warn("flood line %d", i);
	al_log_flush();
	al_log_flush(); /* nothing pending: writes nothing */
	release();
	char *s = slurp("burst.log");
	assert_int_equal(count(s, "flood line"), 5);
	assert_non_null(strstr(s, "flood line 4\n"));
	assert_null(strstr(s, "flood line 5\n"));
	assert_int_equal(count(s, "95 log lines suppressed"), 1);
	assert_int_equal(count(s, "suppressed"), 1);
	free(s);
}

static void test_bucket_refill(void **state)
{
	(void)state;
	capture("refill.log");
	al_log_limit(2, 20);
	al_warn("a");
	al_warn("b");
	al_warn("c"); /* bucket empty: counted */
	struct timespec ts = {0, 200 * 1000 * 1000};
	nanosleep(&ts, NULL);
	al_warn("d"); /* refilled: the summary goes first */
	release();
	char *s = slurp("refill.log");
	assert_null(strstr(s, "warn: c\n"));
	char *sum = strstr(s, "1 log lines suppressed");
	char *d = strstr(s, "warn: d\n");
	assert_non_null(sum);
	assert_non_null(d);
	assert_true(sum < d);
	free(s);
}

static void test_no_limit(void **state)
{
	(void)state;
	capture("free.log");
	for (int i = 0; i < 500; i++)
		al_info("line %d", i);
	release();
	char *s = slurp("free.log");
	assert_int_equal(count(s, "info: line"), 500);
	free(s);
}

/* 32 KiB is the smallest cap al_log_cap accepts. */
#define CAP (32u << 10)

static void test_rotation(void **state)
{
	(void)state;
	char p[128];
	path_of(p, sizeof p, "rot.log");
	capture("rot.log");
	al_log_cap(p, CAP);
	for (int i = 0; i < 2000; i++)
		al_info("rotating %04d %0100d", i, 0);
	al_info("the last line");
	release();
	assert_true(size_of("rot.log") <= (off_t)CAP);
	assert_true(size_of("rot.log.1") <= (off_t)CAP);
	assert_true(size_of("rot.log.1") > (off_t)CAP / 2);
	assert_int_equal(size_of("rot.log.2"), -1);
	char *s = slurp("rot.log");
	assert_non_null(strstr(s, "the last line\n"));
	free(s);
}

/* Four processes share one file, as all shims share log/shim.log: the
 * pair stays under twice the cap and every writer follows the rotation
 * (its last line lands in the current files, not an unlinked one). */
static void test_shared_rotation(void **state)
{
	(void)state;
	char p[128];
	path_of(p, sizeof p, "shared.log");
	capture("shared.log");
	al_log_cap(p, CAP);
	/* Every writer floods, then all write their last line together, so
	 * that no later flood rotates a last line away. */
	int flooded[2], go[2];
	assert_int_equal(pipe(flooded), 0);
	assert_int_equal(pipe(go), 0);
	pid_t kids[4];
	for (int k = 0; k < 4; k++) {
		kids[k] = fork();
		assert_true(kids[k] >= 0);
		if (kids[k] == 0) {
			char c = 'x';
			for (int i = 0; i < 1000; i++)
				al_info("writer %d line %04d %080d", k, i, 0);
			if (write(flooded[1], &c, 1) != 1 ||
			    read(go[0], &c, 1) != 1)
				_exit(1);
			al_info("writer %d done", k);
			_exit(0);
		}
	}
	char c[4] = "gggg";
	for (int k = 0; k < 4; k++)
		assert_int_equal(read(flooded[0], c, 1), 1);
	assert_int_equal(write(go[1], c, 4), 4);
	for (int k = 0; k < 4; k++) {
		int st;
		assert_int_equal(waitpid(kids[k], &st, 0), kids[k]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	release();
	close(flooded[0]);
	close(flooded[1]);
	close(go[0]);
	close(go[1]);
	off_t cur = size_of("shared.log"), old = size_of("shared.log.1");
	assert_true(cur >= 0 && cur <= (off_t)CAP);
	assert_true(old >= 0 && old <= (off_t)CAP);
	char *a = slurp("shared.log"), *b = slurp("shared.log.1");
	for (int k = 0; k < 4; k++) {
		char want[32];
		snprintf(want, sizeof want, "writer %d done\n", k);
		assert_true(strstr(a, want) != NULL || strstr(b, want) != NULL);
	}
	free(a);
	free(b);
}

/* al_log_init caps a stderr that is a file opened for appending. */
static void test_init_caps_stderr(void **state)
{
	(void)state;
	capture("auto.log");
	al_log_init("test_log", AL_LOG_INFO);
	for (int i = 0; i < 30000; i++)
		al_info("auto %05d %0100d", i, 0);
	release();
	assert_true(size_of("auto.log") <= (off_t)AL_LOG_CAP_DEFAULT);
	assert_true(size_of("auto.log.1") > 0);
	assert_true(size_of("auto.log.1") <= (off_t)AL_LOG_CAP_DEFAULT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bucket_burst),
		cmocka_unit_test(test_bucket_refill),
		cmocka_unit_test(test_no_limit),
		cmocka_unit_test(test_rotation),
		cmocka_unit_test(test_shared_rotation),
		cmocka_unit_test(test_init_caps_stderr),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
