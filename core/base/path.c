#include "base/path.h"

#include <string.h>

int al_path_normalize(const char *path, char *out, size_t outlen, al_err *err)
{
	if (path == NULL || path[0] == '\0')
		return al_err_set(err, AL_EPATH, 0, "path must not be empty");
	size_t len = strnlen(path, AL_API_PATH_MAX + 1);
	if (len > AL_API_PATH_MAX)
		return al_err_set(err, AL_EPATH, 0,
				  "path is longer than %d bytes",
				  AL_API_PATH_MAX);
	if (path[0] != '/')
		return al_err_set(err, AL_EPATH, 0, "path must be absolute");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)path[i];
		if (c < 0x20 || c == 0x7f)
			return al_err_set(err, AL_EPATH, 0,
					  "path must not contain control "
					  "characters");
	}
	if (out == NULL || outlen < 2)
		return al_err_set(err, AL_EINTERNAL, 0,
				  "path buffer too small");

	size_t o = 0;
	size_t i = 0;
	out[o++] = '/';
	while (i < len) {
		while (i < len && path[i] == '/')
			i++;
		size_t start = i;
		while (i < len && path[i] != '/')
			i++;
		size_t clen = i - start;
		if (clen == 0 || (clen == 1 && path[start] == '.'))
			continue;
		if (clen == 2 && path[start] == '.' && path[start + 1] == '.')
			return al_err_set(err, AL_EPATH, 0,
					  "path must not contain '..'");
		/* +1 for the separator, +1 for the final NUL. */
		if (o > 1) {
			if (o + 1 >= outlen)
				goto too_long;
			out[o++] = '/';
		}
		if (o + clen >= outlen)
			goto too_long;
		memcpy(out + o, path + start, clen);
		o += clen;
	}
	out[o] = '\0';
	return 0;
too_long:
	return al_err_set(err, AL_EPATH, 0, "path is too long");
}

int al_path_check(const char *path, al_err *err)
{
	char buf[AL_API_PATH_MAX + 2];
	return al_path_normalize(path, buf, sizeof buf, err);
}
