/* rmtree: see rmtree.h. */
#include "base/rmtree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int rm_at(int dfd, const char *name, int depth, al_err *err)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0
				       : al_err_sys(err, AL_ESYS, errno,
						    "stat %s", name);
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
			return al_err_sys(err, AL_ESYS, errno, "unlink %s",
					  name);
		return 0;
	}
	if (depth > AL_RMTREE_MAX_DEPTH)
		return al_err_set(err, AL_EPATH, 0, "tree too deep to remove");
	int fd = openat(dfd, name,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", name);
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		return al_err_sys(err, AL_ESYS, errno, "fdopendir %s", name);
	}
	int rc = 0;
	struct dirent *e;
	while (rc == 0 && (e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		rc = rm_at(dirfd(d), e->d_name, depth + 1, err);
	}
	closedir(d);
	if (rc < 0)
		return -1;
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return al_err_sys(err, AL_ESYS, errno, "rmdir %s", name);
	return 0;
}

int al_rmtree(const char *dir, al_err *err)
{
	return rm_at(AT_FDCWD, dir, 0, err);
}
