/* The reaper of an exec with "kill_on_exit": a process between the agent
 * and the command that takes every descendant of the command with it.
 *
 * A process group or session is not enough: a daemon calls setsid() and
 * leaves both. A child subreaper cannot be left that way: a descendant
 * orphaned by its parent's exit (double fork, daemon(3)) is re-parented
 * to the nearest subreaper above it, here the reaper, never to the
 * agent. So when the command ends (by itself, a SIGNAL or its timeout),
 * whatever it left is still below the reaper, which kills the whole
 * tree, reaps it, and ends as the command did.
 *
 * Only a process that kills the reaper itself (it is the command's
 * parent, and root in the sandbox may) takes its descendants out of
 * this; they then live until the sandbox ends, like those of an exec
 * without kill_on_exit. */
#include "agent.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct proc_entry {
	pid_t pid, ppid;
	int below; /* a descendant of the reaper: 1, 0, -1 not known yet */
} proc_entry;

/* The parent of pid from /proc/<pid>/stat (after the last ')': the
 * command name may hold anything); 0 when it cannot be read. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	int ppid = 0;
	if (p == NULL || sscanf(p + 1, " %*c %d", &ppid) != 1)
		return 0;
	return (pid_t)ppid;
}

/* The processes of this pid namespace and their parents: *n entries,
 * malloc'ed; NULL when /proc cannot be listed. */
static proc_entry *list_procs(size_t *n)
{
	DIR *d = opendir("/proc");
	if (d == NULL)
		return NULL;
	size_t cap = 256;
	proc_entry *v = malloc(cap * sizeof *v);
	*n = 0;
	struct dirent *de;
	while (v != NULL && (de = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end != '\0' || pid <= 0)
			continue;
		if (*n == cap) {
			proc_entry *w = realloc(v, 2 * cap * sizeof *v);
			if (w == NULL)
				break;
			v = w;
			cap *= 2;
		}
		v[*n] = (proc_entry){.pid = (pid_t)pid,
				     .ppid = parent_of((pid_t)pid),
				     .below = -1};
		(*n)++;
	}
	closedir(d);
	return v;
}

static int by_pid(const void *a, const void *b)
{
	pid_t x = ((const proc_entry *)a)->pid,
	      y = ((const proc_entry *)b)->pid;
	return (x > y) - (x < y);
}

static proc_entry *find(proc_entry *v, size_t n, pid_t pid)
{
	proc_entry key = {.pid = pid};
	return bsearch(&key, v, n, sizeof *v, by_pid);
}

/* Whether each process is a descendant of self: up its parents to self
 * (yes), to one already known, or to the top (no); everything on the way
 * has the same answer, so each process is walked over about once. */
static void mark_below(proc_entry *v, size_t n, pid_t self)
{
	qsort(v, n, sizeof *v, by_pid);
	proc_entry *me = find(v, n, self);
	if (me != NULL)
		me->below = 0;
	for (size_t i = 0; i < n; i++) {
		int below = 0;
		proc_entry *e = &v[i];
		for (size_t steps = 0; e != NULL && steps <= n; steps++) {
			if (e->below >= 0) {
				below = e->below;
				break;
			}
			if (e->ppid == self) {
				below = 1;
				break;
			}
			e = find(v, n, e->ppid);
		}
		for (e = &v[i]; e != NULL && e->below < 0;
		     e = find(v, n, e->ppid))
			e->below = below;
	}
}

/* SIGKILL every descendant of self at once (not only its children: a
 * fork bomb's leaves would fork on while the reaper peeled one
 * generation at a time). One that forks after the listing is the child
 * of one killed here, and comes to the reaper when its parent is gone;
 * the next round takes it. false when /proc cannot be read. */
static bool kill_descendants(pid_t self)
{
	size_t n = 0;
	proc_entry *v = list_procs(&n);
	if (v == NULL)
		return false;
	mark_below(v, n, self);
	for (size_t i = 0; i < n; i++)
		if (v[i].below == 1)
			kill(v[i].pid, SIGKILL);
	free(v);
	return true;
}

/* End as the command ended: its exit code, or its signal (without a
 * core dump of the reaper). */
static void __attribute__((noreturn)) end_like(int status)
{
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		struct rlimit none = {0, 0};
		setrlimit(RLIMIT_CORE, &none);
		signal(sig, SIG_DFL);
		sigset_t one;
		sigemptyset(&one);
		sigaddset(&one, sig);
		sigprocmask(SIG_UNBLOCK, &one, NULL);
		raise(sig);
		_exit(128 + sig);
	}
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 126);
}

void agent_reaper_main(int sync_fd, void (*start)(void *), void *arg)
{
	/* Nothing but SIGKILL ends the reaper: the command's group gets the
	 * host's SIGNALs and timeouts, never the reaper. */
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		_exit(126);
	prctl(PR_SET_NAME, "airlock-reaper");
	pid_t cmd = fork();
	if (cmd < 0)
		_exit(126);
	if (cmd == 0)
		start(arg); /* does not return */
	/* The command's pid for the agent (STARTED, SIGNAL, timeouts);
	 * then no fd of the agent's stays open here: not the channel, not
	 * the command's pipes (their EOF is the command's and its
	 * descendants' to give). */
	int pid = (int)cmd;
	ssize_t w;
	do
		w = write(sync_fd, &pid, sizeof pid);
	while (w < 0 && errno == EINTR);
	close_range(0, ~0U, 0);

	int status = 0, st;
	for (;;) {
		pid_t got = waitpid(-1, &st, 0);
		if (got == cmd) {
			status = st;
			break;
		}
		if (got < 0 && errno != EINTR)
			_exit(126); /* cannot be: cmd is ours */
	}
	/* Without /proc (a sandbox that unmounted it) the tree cannot be
	 * found: the exec ends as one without kill_on_exit would, rather
	 * than never. */
	while (kill_descendants(getpid())) {
		pid_t got = waitpid(-1, &st, 0);
		if (got < 0 && errno == ECHILD)
			break;
		while (waitpid(-1, &st, WNOHANG) > 0)
			;
	}
	end_like(status);
}
