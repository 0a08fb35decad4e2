#include "base/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/vfork.h"

typedef struct spawn_args {
	const char *path;
	char *const *argv;
	int in_fd, log_fd, ready_fd; /* ready_fd: -1 for none */
} spawn_args;

/* The program's side: fds in place, then exec. Runs in the caller's
 * memory (vfork.h). */
static int program(void *arg)
{
	const spawn_args *a = arg;
	if (dup2(a->in_fd, 0) < 0 || dup2(a->log_fd, 1) < 0 ||
	    dup2(a->log_fd, 2) < 0)
		_exit(111);
	if (a->ready_fd >= 0) {
		if (dup2(a->ready_fd, 3) < 0)
			_exit(111);
		/* dup2 onto itself keeps FD_CLOEXEC: clear it. */
		if (fcntl(3, F_SETFD, 0) < 0)
			_exit(111);
	}
	close_range(a->ready_fd >= 0 ? 4 : 3, ~0U, 0);
	al_vfork_exec_signals();
	execv(a->path, a->argv);
	_exit(127);
}

/* The caller's child: a new session, then the program as its own child,
 * and gone: the program is not a child of the caller and survives its
 * restarts (it is reparented). */
static int detach(void *arg)
{
	if (setsid() < 0)
		_exit(111);
	pid_t p = al_vfork_call(program, arg, SIGCHLD, NULL, "program", NULL);
	_exit(p < 0 ? 111 : 0);
}

int al_spawn_detached(const char *path, char *const argv[], const char *logpath,
		      int *ready_fd, al_err *err)
{
	return al_spawn_detached_in(path, argv, logpath, -1, ready_fd, err);
}

int al_spawn_detached_in(const char *path, char *const argv[],
			 const char *logpath, int in_fd, int *ready_fd,
			 al_err *err)
{
	/* Everything the children need is prepared here. */
	al_autofd int logfd = logpath != NULL
				      ? open(logpath,
					     O_WRONLY | O_CREAT | O_APPEND |
						     O_CLOEXEC,
					     0640)
				      : -1;
	if (logfd < 0)
		logfd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	al_autofd int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (logfd < 0 || nullfd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open /dev/null");
	al_autofd int rd = -1;
	al_autofd int wr = -1;
	if (ready_fd != NULL) {
		int pfd[2];
		if (pipe2(pfd, O_CLOEXEC) < 0)
			return al_err_sys(err, AL_ESYS, errno, "pipe");
		rd = pfd[0];
		wr = pfd[1];
	}
	spawn_args a = {
		.path = path,
		.argv = argv,
		.in_fd = in_fd >= 0 ? in_fd : nullfd,
		.log_fd = logfd,
		.ready_fd = wr,
	};
	/* Two children in this process's memory rather than two forks: a
	 * fork of a worker with dozens of threads copied its page tables,
	 * and each exec tore the copy down again. */
	pid_t pid = al_vfork_call(detach, &a, SIGCHLD, NULL, path, err);
	if (pid < 0)
		return -1;
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (ready_fd != NULL)
		*ready_fd = al_steal_fd(&rd);
	return 0;
}
