#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"

int al_spawn_detached(const char *path, char *const argv[], const char *logpath,
		      int *ready_fd, al_err *err)
{
	return al_spawn_detached_in(path, argv, logpath, -1, ready_fd, err);
}

int al_spawn_detached_in(const char *path, char *const argv[],
			 const char *logpath, int in_fd, int *ready_fd,
			 al_err *err)
{
	/* Everything the child needs is prepared before fork. */
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

	pid_t pid = fork();
	if (pid < 0)
		return al_err_sys(err, AL_ESYS, errno, "fork");
	if (pid == 0) {
		/* New session, then fork again: the program is not a child
		 * of the caller and survives its restarts. */
		if (setsid() < 0)
			_exit(111);
		pid_t p2 = fork();
		if (p2 != 0)
			_exit(p2 < 0 ? 111 : 0);
		if (dup2(in_fd >= 0 ? in_fd : nullfd, 0) < 0 ||
		    dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
			_exit(111);
		if (wr >= 0) {
			if (dup2(wr, 3) < 0)
				_exit(111);
			/* dup2 onto itself keeps FD_CLOEXEC: clear it. */
			if (fcntl(3, F_SETFD, 0) < 0)
				_exit(111);
		}
		close_range(wr >= 0 ? 4 : 3, ~0U, 0);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execv(path, argv);
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (ready_fd != NULL)
		*ready_fd = al_steal_fd(&rd);
	return 0;
}
