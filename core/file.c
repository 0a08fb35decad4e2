#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"

int al_file_replace(const char *path, const void *data, size_t len, mode_t mode,
		    al_err *err)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >=
	    (int)sizeof tmp)
		return al_err_set(err, AL_EINVAL, 0, "%s: path too long", path);
	unlink(tmp);
	al_autofd int fd = open(tmp,
				O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
					O_NOFOLLOW,
				mode);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "create %s", tmp);
	/* The umask could only have narrowed it, but be explicit. */
	if (fchmod(fd, mode) < 0)
		goto fail;
	const char *p = data;
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(fd, p + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		off += (size_t)n;
	}
	if (fsync(fd) < 0 || rename(tmp, path) < 0)
		goto fail;
	return 0;
fail:;
	int e = errno;
	unlink(tmp);
	return al_err_sys(err, AL_ESYS, e, "write %s", path);
}
