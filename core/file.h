/* file: a file's whole content replaced at once. */
#ifndef AL_FILE_H
#define AL_FILE_H

#include <stddef.h>
#include <sys/types.h>

#include "err.h"

/* Make path hold data[0..len) with mode: written to a temp file beside it
 * (<path>.tmp.<pid>), fsynced and renamed over it, so a reader sees the
 * old content or the new, never part of either. */
int al_file_replace(const char *path, const void *data, size_t len, mode_t mode,
		    al_err *err);

#endif
