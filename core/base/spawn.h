/* spawn: start a host program detached from the caller: its own session,
 * reparented away from the caller (a child of a child, both made without
 * copying the caller: vfork.h), stdin /dev/null,
 * stdout/stderr appended to a log file, no other inherited fd. fcgi
 * workers (multithreaded) start shims and builders this way, so that a
 * worker's restart never touches them. */
#ifndef AL_SPAWN_H
#define AL_SPAWN_H

#include "base/err.h"

/* Exec path with argv (argv[0] included, NULL-terminated) detached.
 * logpath: file to append output to (falls back to /dev/null).
 * If ready_fd is not NULL, a pipe is made whose write end is the child's
 * fd 3 and whose read end (close-on-exec) is returned in *ready_fd. Only
 * async-signal-safe calls happen between fork and exec. */
int al_spawn_detached(const char *path, char *const argv[], const char *logpath,
		      int *ready_fd, al_err *err);
/* The same with the child's stdin on in_fd (the caller keeps in_fd):
 * how a shim gets its spec (al_shim_spec_pack) without argv. */
int al_spawn_detached_in(const char *path, char *const argv[],
			 const char *logpath, int in_fd, int *ready_fd,
			 al_err *err);

#endif
