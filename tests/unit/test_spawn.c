/* core/spawn: a detached program runs in its own session, is not the
 * caller's child, gets the ready pipe as fd 3 and nothing else, and its
 * stdin from the caller's fd when it gives one (a shim's spec). */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/spawn.h"

/* What the program wrote to the ready pipe until it closed, as a string;
 * rd is closed. */
static void read_all(int rd, char *buf, size_t len)
{
	size_t n = 0;
	ssize_t got;
	while (n < len - 1 && (got = read(rd, buf + n, len - 1 - n)) > 0)
		n += (size_t)got;
	close(rd);
	buf[n] = '\0';
}

static void test_detached_with_ready_pipe(void **state)
{
	(void)state;
	char logpath[] = "/tmp/airlock-test-spawn-XXXXXX";
	int lf = mkstemp(logpath);
	assert_true(lf >= 0);
	close(lf);
	/* The child reports its session id and parent through fd 3, and
	 * lists its open fds to the log. */
	char *const argv[] = {"/bin/sh", "-c",
			      "echo \"$(cut -d' ' -f6 /proc/$$/stat)\" >&3; "
			      "ls /proc/$$/fd; echo stderr-line >&2",
			      NULL};
	al_err err = {0};
	int rd = -1;
	assert_int_equal(al_spawn_detached("/bin/sh", argv, logpath, &rd, &err),
			 0);
	assert_true(rd >= 0);
	char buf[64];
	read_all(rd, buf, sizeof buf);
	/* Its own session: the session id is not ours. */
	long sid = strtol(buf, NULL, 10);
	assert_true(sid > 0);
	assert_int_not_equal(sid, (long)getsid(0));
	/* Not our child: nothing to reap. */
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);

	/* Wait (bounded) for the log: fds 0, 1, 2, 3 at most, and stderr
	 * went to the log. */
	char log[4096] = "";
	for (int i = 0; i < 100; i++) {
		FILE *f = fopen(logpath, "r");
		assert_non_null(f);
		size_t len = fread(log, 1, sizeof log - 1, f);
		fclose(f);
		log[len] = '\0';
		if (strstr(log, "stderr-line") != NULL)
			break;
		usleep(20000);
	}
	unlink(logpath);
	assert_non_null(strstr(log, "stderr-line"));
	/* ls lists its own directory fd too; no fd of ours beyond 0-3. */
	for (char *p = log; *p != '\0'; p++) {
		if (*p < '0' || *p > '9' || (p > log && p[-1] != '\n'))
			continue;
		long fd = strtol(p, NULL, 10);
		assert_true(fd <= 4);
	}
}

static void test_stdin_from_fd(void **state)
{
	(void)state;
	int in = memfd_create("spec", MFD_CLOEXEC);
	assert_true(in >= 0);
	assert_int_equal(write(in, "the spec\n", 9), 9);
	assert_int_equal(lseek(in, 0, SEEK_SET), 0);
	char *const argv[] = {"/bin/sh", "-c", "cat >&3", NULL};
	al_err err = {0};
	int rd = -1;
	assert_int_equal(al_spawn_detached_in("/bin/sh", argv, NULL, in, &rd,
					      &err),
			 0);
	close(in);
	char buf[64];
	read_all(rd, buf, sizeof buf);
	assert_string_equal(buf, "the spec\n");
}

static void on_usr1(int sig)
{
	(void)sig;
}

/* rt_sigaction itself: libc refuses the real-time signals it keeps for
 * its threads (32 and 33), which a parent may still have ignored. */
struct ksa {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};

static int raw_sigaction(int sig, void (*handler)(int), struct ksa *old)
{
	struct ksa k = {.handler = handler};
	return (int)syscall(SYS_rt_sigaction, sig, &k, old, sizeof k.mask);
}

/* The program starts with default dispositions and nothing blocked,
 * whatever the caller handles, ignores or blocks; the caller's own are
 * as they were. */
static void test_program_gets_default_signals(void **state)
{
	(void)state;
	struct sigaction sa = {.sa_handler = on_usr1};
	struct sigaction old_usr1, old_usr2;
	assert_int_equal(sigaction(SIGUSR1, &sa, &old_usr1), 0);
	sa.sa_handler = SIG_IGN;
	assert_int_equal(sigaction(SIGUSR2, &sa, &old_usr2), 0);
	/* As a parent may leave it (CI's did): libc's own signal 32
	 * ignored. */
	struct ksa old_32;
	assert_int_equal(raw_sigaction(32, SIG_IGN, &old_32), 0);
	sigset_t blk, old_mask;
	sigemptyset(&blk);
	sigaddset(&blk, SIGTERM);
	assert_int_equal(sigprocmask(SIG_BLOCK, &blk, &old_mask), 0);

	/* grep reads its own status: a shell in between blocks signals
	 * of its own while it waits for a child, and did so under a
	 * reader's eyes. The log takes the output; the ready pipe closes
	 * when grep exits. */
	char logpath[] = "/tmp/airlock-test-spawn-XXXXXX";
	int lf = mkstemp(logpath);
	assert_true(lf >= 0);
	close(lf);
	char *const argv[] = {"/bin/grep", "-E", "^Sig(Blk|Ign|Cgt)",
			      "/proc/self/status", NULL};
	al_err err = {0};
	int rd = -1;
	assert_int_equal(al_spawn_detached("/bin/grep", argv, logpath, &rd,
					   &err),
			 0);
	char buf[256];
	read_all(rd, buf, sizeof buf);
	FILE *f = fopen(logpath, "r");
	assert_non_null(f);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	unlink(logpath);
	buf[n] = '\0';
	const char *b = strstr(buf, "SigBlk:"), *i = strstr(buf, "SigIgn:"),
		   *c = strstr(buf, "SigCgt:");
	assert_non_null(b);
	assert_non_null(i);
	assert_non_null(c);
	/* Nothing blocked or ignored at all (our TERM block, USR2 and 32
	 * ignores included); exec resets what was caught, so USR1 is
	 * checked to see that nothing reinstated it. */
	assert_int_equal(strtoull(b + 7, NULL, 16), 0);
	assert_int_equal(strtoull(i + 7, NULL, 16), 0);
	assert_int_equal(strtoull(c + 7, NULL, 16) & (1ull << (SIGUSR1 - 1)),
			 0);

	/* The caller's are untouched. */
	struct ksa now_32;
	assert_int_equal(raw_sigaction(32, old_32.handler, &now_32), 0);
	assert_ptr_equal(now_32.handler, SIG_IGN);
	struct sigaction now;
	assert_int_equal(sigaction(SIGUSR1, NULL, &now), 0);
	assert_ptr_equal(now.sa_handler, on_usr1);
	assert_int_equal(sigaction(SIGUSR2, NULL, &now), 0);
	assert_ptr_equal(now.sa_handler, SIG_IGN);
	sigset_t cur;
	assert_int_equal(sigprocmask(SIG_SETMASK, NULL, &cur), 0);
	assert_int_equal(sigismember(&cur, SIGTERM), 1);
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	sigaction(SIGUSR1, &old_usr1, NULL);
	sigaction(SIGUSR2, &old_usr2, NULL);
}

static void test_missing_program(void **state)
{
	(void)state;
	char *const argv[] = {"/nonexistent/prog", NULL};
	al_err err = {0};
	int rd = -1;
	/* The exec failure happens in the detached child: the caller sees
	 * the ready pipe close without a word. */
	assert_int_equal(al_spawn_detached("/nonexistent/prog", argv, NULL, &rd,
					   &err),
			 0);
	char c;
	assert_int_equal(read(rd, &c, 1), 0);
	close(rd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_detached_with_ready_pipe),
		cmocka_unit_test(test_stdin_from_fd),
		cmocka_unit_test(test_program_gets_default_signals),
		cmocka_unit_test(test_missing_program),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
