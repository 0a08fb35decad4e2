#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"

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

#define COPY_BUF (1u << 20)

/* Bytes [from, to) of in to the same offsets of out: in the kernel while
 * it can (same filesystem), else through *buf, allocated on first need
 * and kept for the next extent. */
static int copy_range(int in, int out, off_t from, off_t to, char **buf)
{
	loff_t ip = from, op = from;
	while (ip < to && *buf == NULL) {
		ssize_t n = copy_file_range(in, &ip, out, &op,
					    (size_t)(to - ip), 0);
		if (n > 0)
			continue;
		if (n == 0 || (errno != EXDEV && errno != EOPNOTSUPP &&
			       errno != ENOSYS && errno != EINVAL))
			return -1;
		*buf = malloc(COPY_BUF);
		if (*buf == NULL)
			return -1;
	}
	while (ip < to) {
		size_t want = (size_t)(to - ip) < COPY_BUF ? (size_t)(to - ip)
							   : COPY_BUF;
		ssize_t r = pread(in, *buf, want, ip);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			errno = EIO;
		if (r <= 0)
			return -1;
		for (ssize_t done = 0; done < r;) {
			ssize_t w = pwrite(out, *buf + done, (size_t)(r - done),
					   ip + done);
			if (w < 0 && errno == EINTR)
				continue;
			if (w == 0)
				errno = EIO;
			if (w <= 0)
				return -1;
			done += w;
		}
		ip += r;
	}
	return 0;
}

int al_file_copy_sparse(int in, int out, al_err *err)
{
	struct stat st;
	if (fstat(in, &st) < 0)
		return al_err_sys(err, AL_ESYS, errno, "stat the source");
	if (ftruncate(out, st.st_size) < 0)
		return al_err_sys(err,
				  errno == ENOSPC || errno == EDQUOT
					  ? AL_EUNAVAIL
					  : AL_ESYS,
				  errno, "size the copy");
	al_autofree char *buf = NULL;
	off_t off = 0;
	for (;;) {
		off_t data = lseek(in, off, SEEK_DATA);
		if (data < 0) {
			if (errno == ENXIO)
				return 0;
			return al_err_sys(err, AL_ESYS, errno, "SEEK_DATA");
		}
		off_t hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0)
			return al_err_sys(err, AL_ESYS, errno, "SEEK_HOLE");
		if (copy_range(in, out, data, hole, &buf) < 0)
			return al_err_sys(err,
					  errno == ENOSPC || errno == EDQUOT
						  ? AL_EUNAVAIL
						  : AL_ESYS,
					  errno, "copy");
		off = hole;
	}
}

int al_file_clone_fd(int in, int out, al_err *err)
{
	if (ioctl(out, FICLONE, in) == 0)
		return 0;
	/* A full filesystem would fail the copy too. */
	if (errno == ENOSPC || errno == EDQUOT)
		return al_err_sys(err, AL_EUNAVAIL, errno, "clone");
	return al_file_copy_sparse(in, out, err);
}

int al_file_clone(const char *src, const char *dst, unsigned flags,
		  uint64_t *size, al_err *err)
{
	al_autofd int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (in < 0 || fstat(in, &st) < 0)
		return al_err_sys(err, AL_ENOENT, errno, "open %s", src);
	if (size != NULL)
		*size = (uint64_t)st.st_size;
	al_autofd int out = open(dst,
				 O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
					 O_NOFOLLOW,
				 0600);
	if (out < 0)
		return al_err_sys(err, AL_ESYS, errno, "create %s", dst);
	int rc = al_file_clone_fd(in, out, err);
	if (rc == 0 && (flags & AL_FILE_CLONE_SYNC) && fsync(out) < 0)
		rc = al_err_sys(err,
				errno == ENOSPC || errno == EDQUOT ? AL_EUNAVAIL
								   : AL_ESYS,
				errno, "fsync");
	if (rc < 0) {
		unlink(dst);
		al_err_wrap(err, "copy %s to %s", src, dst);
	}
	return rc;
}
