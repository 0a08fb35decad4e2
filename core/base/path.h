/* path: validation of the paths the API takes for the files endpoints.
 *
 * This is the clear-error layer, not the security boundary: the agent
 * resolves paths inside the jail, which is what keeps them from reaching
 * the host. Here a request gets a 422 with a reason instead of a surprise. */
#ifndef AL_PATH_H
#define AL_PATH_H

#include <stddef.h>

#include "base/err.h"

#define AL_API_PATH_MAX 4096

/* Check an API path: absolute, non-empty, at most AL_API_PATH_MAX bytes,
 * no control characters, no ".." component. -1 with AL_EPATH otherwise. */
int al_path_check(const char *path, al_err *err);

/* Check, then write the normalised form to out: repeated slashes folded,
 * "." components dropped, no trailing slash (except "/" itself). */
int al_path_normalize(const char *path, char *out, size_t outlen, al_err *err);

#endif
