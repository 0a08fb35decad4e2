/* rmtree: remove a directory tree that may hold hostile names and links
 * (a build context, a build's temporaries, a version's files), without
 * following a symlink and with a depth bound. Apart from the build-context
 * module so that programs that only remove trees (the shim) do not link
 * libarchive and its dozen libraries, whose loading costs every shim
 * start milliseconds. */
#ifndef AL_RMTREE_H
#define AL_RMTREE_H

#include "base/err.h"

/* Directory levels below dir at most; deeper is AL_EPATH. */
#define AL_RMTREE_MAX_DEPTH 512

/* Remove dir and everything below it without following symlinks. A
 * missing dir is not an error. */
int al_rmtree(const char *dir, al_err *err);

#endif
