/* core/vmjail: every QEMU gets a uid no other holder has, and runs with
 * nothing of the host: no root, no capabilities, no other process, no
 * network, no host files but /usr and the ones named, nothing writable.
 * Needs root (namespaces, mounts); no QEMU: a shell stands in for it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "vm/jail.h"

/* ---- helpers ---- */

static int in_range(uid_t uid)
{
	return uid >= AL_VMJAIL_UID_BASE &&
	       uid < AL_VMJAIL_UID_BASE + AL_VMJAIL_UID_COUNT;
}

/* Read fd to EOF into buf (NUL-terminated, truncated to len - 1). */
static size_t read_all(int fd, char *buf, size_t len)
{
	size_t have = 0;
	for (;;) {
		ssize_t n = read(fd, buf + have, len - 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		if (have == len - 1)
			break;
	}
	buf[have] = '\0';
	return have;
}

/* The value of the line "key=value" in out, copied to val; a missing
 * key fails the test (the script did not get that far). */
static const char *get(const char *out, const char *key, char *val, size_t len)
{
	size_t kl = strlen(key);
	for (const char *p = out; p != NULL && *p != '\0';) {
		const char *nl = strchr(p, '\n');
		size_t ll = nl != NULL ? (size_t)(nl - p) : strlen(p);
		if (ll > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
			size_t vl = ll - kl - 1;
			if (vl >= len)
				vl = len - 1;
			memcpy(val, p + kl + 1, vl);
			val[vl] = '\0';
			return val;
		}
		p = nl != NULL ? nl + 1 : NULL;
	}
	fail_msg("no %s= in the jail's output", key);
	return NULL;
}

static int dir_entries(const char *path)
{
	DIR *d = opendir(path);
	if (d == NULL)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

/* Is path (or something under it) a mount point in our namespace? */
static int mounted_here(const char *path)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	assert_non_null(f);
	char line[4096];
	int found = 0;
	size_t pl = strlen(path);
	while (fgets(line, sizeof line, f) != NULL) {
		/* Field 5 is the mount point. */
		char *p = line;
		for (int i = 0; i < 4 && p != NULL; i++) {
			p = strchr(p, ' ');
			if (p != NULL)
				p++;
		}
		if (p != NULL && strncmp(p, path, pl) == 0 &&
		    (p[pl] == ' ' || p[pl] == '/'))
			found = 1;
	}
	fclose(f);
	return found;
}

/* Namespaces and mounts need root: without it every test is a skip. */
#define NEED_ROOT()                                                            \
	do {                                                                   \
		if (geteuid() != 0) {                                          \
			print_message("needs root: skipped\n");                \
			skip();                                                \
		}                                                              \
	} while (0)

static void assert_no_children(void)
{
	errno = 0;
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

/* ---- uids ---- */

static void test_uid_take_distinct(void **state)
{
	(void)state;
	NEED_ROOT();
	al_err err = {0};
	al_vmjail_uid a, b, c;
	assert_int_equal(al_vmjail_uid_take("test-vmjail-a", &a, &err), 0);
	assert_int_equal(al_vmjail_uid_take("test-vmjail-b", &b, &err), 0);
	assert_true(in_range(a.uid));
	assert_true(in_range(b.uid));
	assert_int_not_equal(a.uid, b.uid);
	/* The same hint while the first is held: another uid. */
	assert_int_equal(al_vmjail_uid_take("test-vmjail-a", &c, &err), 0);
	assert_true(in_range(c.uid));
	assert_int_not_equal(c.uid, a.uid);
	assert_int_not_equal(c.uid, b.uid);
	/* The lock must not leak into programs the holder starts. */
	int fl = fcntl(a.lock_fd, F_GETFD);
	assert_true(fl >= 0 && (fl & FD_CLOEXEC) != 0);
	fl = fcntl(c.lock_fd, F_GETFD);
	assert_true(fl >= 0 && (fl & FD_CLOEXEC) != 0);

	/* Dropped, a's uid is free again: the same hint finds it. */
	uid_t old = a.uid;
	al_vmjail_uid_drop(&a);
	assert_int_equal(a.uid, 0);
	assert_int_equal(a.lock_fd, -1);
	al_vmjail_uid_drop(&a); /* twice is harmless */
	al_vmjail_uid_drop(NULL);
	assert_int_equal(al_vmjail_uid_take("test-vmjail-a", &a, &err), 0);
	assert_int_equal(a.uid, old);
	al_vmjail_uid_drop(&a);
	al_vmjail_uid_drop(&b);
	al_vmjail_uid_drop(&c);
}

/* Take a uid in a child process and report it (0 on failure). */
static uid_t take_in_child(const char *hint, int hold_until_read)
{
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	int go[2];
	assert_int_equal(pipe2(go, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		close(go[1]);
		al_err err = {0};
		al_vmjail_uid u;
		uid_t got = al_vmjail_uid_take(hint, &u, &err) == 0 ? u.uid : 0;
		(void)!write(p[1], &got, sizeof got);
		if (hold_until_read) {
			char c;
			(void)!read(go[0], &c, 1);
		}
		_exit(0);
	}
	close(p[1]);
	close(go[0]);
	uid_t got = 0;
	assert_int_equal(read(p[0], &got, sizeof got), (ssize_t)sizeof got);
	close(p[0]);
	close(go[1]); /* lets a holding child go */
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return got;
}

static void test_uid_other_process(void **state)
{
	(void)state;
	NEED_ROOT();
	al_err err = {0};
	al_vmjail_uid a;
	assert_int_equal(al_vmjail_uid_take("test-vmjail-fork", &a, &err), 0);
	/* The child inherits our lock descriptor but opens its own file:
	 * the flock we hold keeps it off our uid. */
	uid_t theirs = take_in_child("test-vmjail-fork", 0);
	assert_true(in_range(theirs));
	assert_int_not_equal(theirs, a.uid);
	al_vmjail_uid_drop(&a);

	/* A holder that died frees its uid: the next taker gets it. */
	uid_t dead = take_in_child("test-vmjail-dead", 0);
	assert_true(in_range(dead));
	assert_int_equal(al_vmjail_uid_take("test-vmjail-dead", &a, &err), 0);
	assert_int_equal(a.uid, dead);
	al_vmjail_uid_drop(&a);
}

/* ---- the jail ---- */

/* The shell script that reports what it sees, one key=value a line. It
 * stands in for QEMU under QEMU's syscall filter, which lets no process
 * start: so builtins only, no command substitution or subshell, until
 * the last line tries one. Failed redirections are on braces, which a
 * non-interactive dash survives. */
static const char probe_script[] =
	"set -- /proc/[0-9]*; echo procs=$#\n"
	"echo pid=$$\n"
	/* Not a glob: its directory would be an fd of its own. */
	"fds=; n=0; while [ $n -lt 1100 ]; do [ -h /proc/$$/fd/$n ] && "
	"fds=\"$fds$n \"; n=$((n + 1)); done\n"
	"echo fds=$fds\n"
	"while read k v r; do case $k in Cap*|NoNewPrivs:) "
	"echo \"${k%:}=$v\";; Uid:) echo uid=$v $r;; Gid:) "
	"echo gid=$v $r;; Groups:) echo \"groups=$v\";; esac; "
	"done </proc/$$/status\n"
	"names() { r=; for f; do [ -e \"$f\" ] || [ -h \"$f\" ] || "
	"continue; r=\"$r${r:+ }${f##*/}\"; done; }\n"
	"names /.[!.]* /..?* /*; echo root=$r\n"
	"names /dev/.[!.]* /dev/..?* /dev/*; echo dev=$r\n"
	"while read i p d s m o r; do [ \"$m\" = / ] && ro=$o; done "
	"</proc/self/mountinfo; echo rootopts=$ro\n"
	"{ read l </etc/passwd; } 2>/dev/null; echo passwd=$?\n"
	"{ echo x >/x; } 2>/dev/null; echo wroot=$?\n"
	"{ echo x >/dev/x; } 2>/dev/null; echo wdev=$?\n"
	"{ echo x >>/boot/f; } 2>/dev/null; echo wfile=$?\n"
	"read l </boot/f; echo file=$l\n"
	"echo x >/dev/null; echo devnull=$?\n"
	"{ read a; read b; n=; while read l r; do n=\"$n${n:+ }${l%%:*}\"; "
	"done; } </proc/net/dev; echo net=$n\n"
	"echo hi >&3\n"
	"echo end=1\n"
	"( echo forked=1 )\n";

static void test_spawn_jailed(void **state)
{
	(void)state;
	NEED_ROOT();
	al_err err = {0};
	al_vmjail_uid u;
	assert_int_equal(al_vmjail_uid_take("test-vmjail-spawn", &u, &err), 0);

	char root[] = "/tmp/airlock-test-vmjail-XXXXXX";
	assert_non_null(mkdtemp(root));
	/* A file mode 0666: only the jail's read-only bind keeps the
	 * jailed uid from writing it. */
	char fpath[] = "/tmp/airlock-test-vmjail-file-XXXXXX";
	int ff = mkstemp(fpath);
	assert_true(ff >= 0);
	assert_int_equal(write(ff, "kernel-bytes\n", 13), 13);
	assert_int_equal(fchmod(ff, 0666), 0);
	close(ff);
	al_vmjail_file files[] = {{fpath, "/boot/f"}};

	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_true(devnull >= 0);
	int out[2], extra[2];
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(pipe2(extra, O_CLOEXEC), 0);
	int fds[] = {devnull, out[1], out[1], extra[1]};
	al_vmjail j = {.uid = u.uid,
		       .root = root,
		       .files = files,
		       .nfiles = 1,
		       .fds = fds,
		       .nfds = 4};
	char *const argv[] = {"/usr/bin/sh", "-c", (char *)probe_script, NULL};
	int pidfd = -1;
	pid_t pid = al_vmjail_spawn(&j, argv, &pidfd, &err);
	if (pid < 0)
		fail_msg("spawn: %s", err.msg);
	assert_true(pidfd >= 0);
	close(out[1]);
	close(extra[1]);
	close(devnull);
	static char buf[16384];
	read_all(out[0], buf, sizeof buf);
	char hi[64];
	read_all(extra[0], hi, sizeof hi);
	close(out[0]);
	close(extra[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	close(pidfd);
	print_message("%s", buf);
	/* The script's last line fails: no process can start in the jail
	 * (dash exits 2 when it cannot fork). */
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 2);
	assert_non_null(strstr(buf, "Cannot fork"));
	assert_null(strstr(buf, "forked="));

	char v[1024], want[64];
	get(buf, "end", v, sizeof v);
	/* Its own pid namespace: it is pid 1 and sees no other process. */
	assert_string_equal(get(buf, "procs", v, sizeof v), "1");
	assert_string_equal(get(buf, "pid", v, sizeof v), "1");
	/* Exactly the descriptors given, nothing of ours leaked. */
	assert_string_equal(get(buf, "fds", v, sizeof v), "0 1 2 3");
	/* The taken uid and gid (real, effective, saved, fs), no
	 * supplementary group. */
	snprintf(want, sizeof want, "%u %u %u %u", (unsigned)u.uid,
		 (unsigned)u.uid, (unsigned)u.uid, (unsigned)u.uid);
	assert_string_equal(get(buf, "uid", v, sizeof v), want);
	assert_string_equal(get(buf, "gid", v, sizeof v), want);
	assert_string_equal(get(buf, "groups", v, sizeof v), "");
	/* No capability it could use, and no way to gain one. */
	assert_string_equal(get(buf, "CapEff", v, sizeof v),
			    "0000000000000000");
	assert_string_equal(get(buf, "CapPrm", v, sizeof v),
			    "0000000000000000");
	assert_string_equal(get(buf, "CapInh", v, sizeof v),
			    "0000000000000000");
	assert_string_equal(get(buf, "CapAmb", v, sizeof v),
			    "0000000000000000");
	assert_string_equal(get(buf, "NoNewPrivs", v, sizeof v), "1");

	/* The root holds /usr, the host's /lib, /bin... links, /dev, /proc
	 * and the directory of the file asked for: nothing else. */
	char root_want[256] = "";
	static const char *const tops[] = {"bin",   "boot", "dev",  "lib",
					   "lib64", "proc", "sbin", "usr"};
	for (size_t i = 0; i < sizeof tops / sizeof *tops; i++) {
		char host[32];
		snprintf(host, sizeof host, "/%s", tops[i]);
		struct stat hs;
		int mirrored = strcmp(tops[i], "lib") == 0 ||
			       strcmp(tops[i], "lib64") == 0 ||
			       strcmp(tops[i], "bin") == 0 ||
			       strcmp(tops[i], "sbin") == 0;
		if (mirrored && lstat(host, &hs) < 0)
			continue;
		if (root_want[0] != '\0')
			strcat(root_want, " ");
		strcat(root_want, tops[i]);
	}
	get(buf, "root", v, sizeof v);
	assert_string_equal(v, root_want);
	static const char *const never[] = {"etc", "home", "root", "tmp",
					    "var", "run",  "sys"};
	for (size_t i = 0; i < sizeof never / sizeof *never; i++) {
		char w[16];
		snprintf(w, sizeof w, " %s ", never[i]);
		char padded[1100];
		snprintf(padded, sizeof padded, " %s ", v);
		assert_null(strstr(padded, w));
	}
	assert_string_equal(get(buf, "dev", v, sizeof v),
			    "null random urandom zero");
	/* No host file outside /usr: /etc/passwd is not there. */
	assert_string_not_equal(get(buf, "passwd", v, sizeof v), "0");
	/* Nothing writable: not the root, not /dev, not the bound file. */
	assert_string_not_equal(get(buf, "wroot", v, sizeof v), "0");
	assert_int_equal(strncmp(get(buf, "rootopts", v, sizeof v), "ro,", 3),
			 0);
	assert_string_not_equal(get(buf, "wdev", v, sizeof v), "0");
	assert_string_not_equal(get(buf, "wfile", v, sizeof v), "0");
	assert_string_equal(get(buf, "file", v, sizeof v), "kernel-bytes");
	assert_string_equal(get(buf, "devnull", v, sizeof v), "0");
	/* Its own network: a loopback only. */
	assert_string_equal(get(buf, "net", v, sizeof v), "lo");
	/* fd 3 in the jail is our extra pipe. */
	assert_string_equal(hi, "hi\n");

	/* The bound file is unchanged on the host, and the jail's mounts
	 * were the child's only: the root dir is still an empty dir. */
	char back[64];
	int rf = open(fpath, O_RDONLY | O_CLOEXEC);
	assert_true(rf >= 0);
	read_all(rf, back, sizeof back);
	close(rf);
	assert_string_equal(back, "kernel-bytes\n");
	assert_int_equal(dir_entries(root), 0);
	assert_false(mounted_here(root));
	assert_no_children();

	assert_int_equal(rmdir(root), 0);
	unlink(fpath);
	al_vmjail_uid_drop(&u);
}

/* ---- bad specs start nothing ---- */

static void test_bad_specs(void **state)
{
	(void)state;
	NEED_ROOT();
	al_err err = {0};
	al_vmjail_uid u;
	assert_int_equal(al_vmjail_uid_take("test-vmjail-bad", &u, &err), 0);
	char root[] = "/tmp/airlock-test-vmjail-XXXXXX";
	assert_non_null(mkdtemp(root));
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_true(devnull >= 0);
	int fds[] = {devnull, devnull, devnull};
	char *const ok_argv[] = {"/usr/bin/true", NULL};
	char *const bin_argv[] = {"/bin/true", NULL};
	char *const rel_argv[] = {"true", NULL};
	char *const no_argv[] = {NULL};
	const al_vmjail good = {.uid = u.uid,
				.root = root,
				.fds = fds,
				.nfds = 3};

	struct {
		const char *what;
		al_vmjail j;
		char *const *argv;
	} bad[] = {
		{"uid 0", good, ok_argv},
		{"no root", good, ok_argv},
		{"nfds 2", good, ok_argv},
		{"nfds -1", good, ok_argv},
		{"argv[0] not under /usr", good, bin_argv},
		{"relative argv[0]", good, rel_argv},
		{"empty argv", good, no_argv},
		{"no argv", good, NULL},
	};
	bad[0].j.uid = 0;
	bad[1].j.root = NULL;
	bad[2].j.nfds = 2;
	bad[3].j.nfds = -1;
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		al_err e = {0};
		int pidfd = 42;
		print_message("bad spec: %s\n", bad[i].what);
		assert_int_equal(al_vmjail_spawn(&bad[i].j, bad[i].argv, &pidfd,
						 &e),
				 -1);
		assert_int_equal(e.code, AL_EINVAL);
		assert_int_equal(pidfd, -1);
		assert_no_children();
	}
	al_err e = {0};
	int pidfd = 42;
	assert_int_equal(al_vmjail_spawn(NULL, ok_argv, &pidfd, &e), -1);
	assert_int_equal(e.code, AL_EINVAL);

	/* A file to bind that does not exist: the error names the step,
	 * and the half-built jail's process is reaped, not left behind. */
	al_vmjail_file missing[] = {
		{"/nonexistent/airlock-test-vmlinuz", "/boot/vmlinuz"}};
	al_vmjail j = good;
	j.files = missing;
	j.nfiles = 1;
	al_err_clear(&e);
	pidfd = 42;
	assert_int_equal(al_vmjail_spawn(&j, ok_argv, &pidfd, &e), -1);
	print_message("missing file: %s\n", e.msg);
	assert_int_not_equal(e.code, AL_OK);
	assert_non_null(strstr(e.msg, "bind a file into the jail"));
	assert_int_equal(pidfd, -1);
	assert_no_children();
	assert_int_equal(dir_entries(root), 0);
	assert_false(mounted_here(root));

	/* A program that is not there: the exec fails in the jail and is
	 * reported, nothing keeps running. */
	char *const gone_argv[] = {"/usr/bin/airlock-test-no-such-program",
				   NULL};
	al_err_clear(&e);
	assert_int_equal(al_vmjail_spawn(&good, gone_argv, &pidfd, &e), -1);
	print_message("missing program: %s\n", e.msg);
	assert_non_null(strstr(e.msg, "airlock-test-no-such-program"));
	assert_int_equal(pidfd, -1);
	assert_no_children();

	close(devnull);
	assert_int_equal(rmdir(root), 0);
	al_vmjail_uid_drop(&u);
}

/* Jail paths are one directory level under the jail's root; anything
 * else is refused before a file is made. "/../name" would otherwise
 * create name next to the jail root, on the host. */
static void test_bad_jail_paths(void **state)
{
	(void)state;
	NEED_ROOT();
	al_err err = {0};
	al_vmjail_uid u;
	assert_int_equal(al_vmjail_uid_take("test-vmjail-path", &u, &err), 0);
	char parent[] = "/tmp/airlock-test-vmjail-XXXXXX";
	assert_non_null(mkdtemp(parent));
	char root[64];
	snprintf(root, sizeof root, "%s/root", parent);
	assert_int_equal(mkdir(root, 0700), 0);
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_true(devnull >= 0);
	int fds[] = {devnull, devnull, devnull};
	char *const argv[] = {"/usr/bin/true", NULL};
	static const char *const paths[] = {"f",      "/f",   "/a/b/f", "/../f",
					    "/boot/", "/./f", "/../"};
	for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
		al_vmjail_file files[] = {{"/usr/bin/true", paths[i]}};
		al_vmjail j = {.uid = u.uid,
			       .root = root,
			       .files = files,
			       .nfiles = 1,
			       .fds = fds,
			       .nfds = 3};
		al_err e = {0};
		int pidfd = 42;
		pid_t pid = al_vmjail_spawn(&j, argv, &pidfd, &e);
		print_message("jail path %s: %s\n", paths[i],
			      pid < 0 ? e.msg : "accepted");
		if (pid >= 0) {
			waitpid(pid, NULL, 0);
			close(pidfd);
		}
		/* Nothing was made on the host, beside the root or in it
		 * (counted, then removed so a failure leaves no litter). */
		int beside = dir_entries(parent), in = dir_entries(root);
		char stray[80];
		snprintf(stray, sizeof stray, "%s/f", parent);
		unlink(stray);
		if (pid != -1 || pidfd != -1 || beside != 1 || in != 0) {
			rmdir(root);
			rmdir(parent);
			close(devnull);
			al_vmjail_uid_drop(&u);
			fail_msg("jail path %s accepted (pid %d, %d made "
				 "beside the root, %d in it)",
				 paths[i], (int)pid, beside - 1, in);
		}
		assert_no_children();
	}
	close(devnull);
	assert_int_equal(rmdir(root), 0);
	assert_int_equal(rmdir(parent), 0);
	al_vmjail_uid_drop(&u);
}

/* ---- the jail dies with its holder ---- */

static void test_dies_with_parent(void **state)
{
	(void)state;
	NEED_ROOT();
	/* Orphans come to us, so the killed QEMU can be reaped and its
	 * end seen (not only its absence). */
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	char root[] = "/tmp/airlock-test-vmjail-XXXXXX";
	assert_non_null(mkdtemp(root));
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t helper = fork();
	assert_true(helper >= 0);
	if (helper == 0) {
		close(p[0]);
		al_err err = {0};
		al_vmjail_uid u;
		pid_t jailed = -1;
		int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		int fds[] = {devnull, devnull, devnull};
		char *const argv[] = {"/usr/bin/sleep", "60", NULL};
		al_vmjail j = {.root = root, .fds = fds, .nfds = 3};
		int pidfd;
		if (al_vmjail_uid_take("test-vmjail-death", &u, &err) == 0) {
			j.uid = u.uid;
			jailed = al_vmjail_spawn(&j, argv, &pidfd, &err);
		}
		if (jailed < 0)
			(void)!write(2, err.msg, strlen(err.msg));
		(void)!write(p[1], &jailed, sizeof jailed);
		_exit(0);
	}
	close(p[1]);
	pid_t jailed = -1;
	assert_int_equal(read(p[0], &jailed, sizeof jailed),
			 (ssize_t)sizeof jailed);
	close(p[0]);
	int st;
	assert_int_equal(waitpid(helper, &st, 0), helper);
	assert_true(jailed > 0);

	/* Within 2 s the jailed sleep is killed (SIGKILL) and reaped. */
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t got = 0;
	for (;;) {
		got = waitpid(jailed, &st, WNOHANG);
		if (got != 0)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - t0.tv_sec) * 1000 +
			    (now.tv_nsec - t0.tv_nsec) / 1000000 >
		    2000)
			break;
		usleep(10000);
	}
	if (got == 0) {
		kill(jailed, SIGKILL);
		waitpid(jailed, NULL, 0);
	}
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
	assert_int_equal(got, jailed);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGKILL);
	errno = 0;
	assert_int_equal(kill(jailed, 0), -1);
	assert_int_equal(errno, ESRCH);
	assert_no_children();
	assert_int_equal(rmdir(root), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uid_take_distinct),
		cmocka_unit_test(test_uid_other_process),
		cmocka_unit_test(test_spawn_jailed),
		cmocka_unit_test(test_bad_specs),
		cmocka_unit_test(test_bad_jail_paths),
		cmocka_unit_test(test_dies_with_parent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
