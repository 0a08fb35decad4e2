#include "store.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <btrfsutil.h>
#include <linux/magic.h>

/* libbtrfsutil leaves errno set from the failing call; the code says
 * which step failed. Both go into the message. */
static int store_fail(al_err *err, enum btrfs_util_error e, const char *what,
		      const char *path)
{
	int saved = errno;
	al_code code = AL_ESYS;
	if (e == BTRFS_UTIL_ERROR_NOT_BTRFS)
		code = AL_EUNAVAIL;
	else if (saved == EEXIST)
		code = AL_EEXIST;
	else if (saved == ENOENT)
		code = AL_ENOENT;
	if (saved != 0)
		return al_err_sys(err, code, saved, "%s %s: %s", what, path,
				  btrfs_util_strerror(e));
	return al_err_set(err, code, 0, "%s %s: %s", what, path,
			  btrfs_util_strerror(e));
}

static int path_ok(const char *path, al_err *err)
{
	if (path == NULL || path[0] == '\0')
		return al_err_set(err, AL_EINVAL, 0, "empty store path");
	return 0;
}

int al_store_check(const char *pool_dir, al_err *err)
{
	struct statfs sf;
	if (path_ok(pool_dir, err) < 0)
		return -1;
	if (statfs(pool_dir, &sf) < 0)
		return al_err_sys(err, errno == ENOENT ? AL_ENOENT : AL_ESYS,
				  errno, "statfs %s", pool_dir);
	if ((unsigned long)sf.f_type != BTRFS_SUPER_MAGIC)
		return al_err_set(err, AL_EUNAVAIL, 0,
				  "%s is not on btrfs (filesystem magic "
				  "0x%lx)",
				  pool_dir, (unsigned long)sf.f_type);
	return 0;
}

int al_store_subvol_create(const char *path, al_err *err)
{
	if (path_ok(path, err) < 0)
		return -1;
	errno = 0;
	enum btrfs_util_error e = btrfs_util_create_subvolume(path, 0, NULL,
							      NULL);
	if (e != BTRFS_UTIL_OK)
		return store_fail(err, e, "create subvolume", path);
	return 0;
}

int al_store_snapshot(const char *src, const char *dst, al_err *err)
{
	if (path_ok(src, err) < 0 || path_ok(dst, err) < 0)
		return -1;
	/* Not recursive: a template holds no nested subvolumes, and a
	 * sandbox's nested ones must not leak into its fork. No async
	 * transid and no sync: the snapshot is usable as soon as the ioctl
	 * returns, durability comes with the next regular commit. */
	errno = 0;
	enum btrfs_util_error e = btrfs_util_create_snapshot(src, dst, 0, NULL,
							     NULL);
	if (e != BTRFS_UTIL_OK)
		return store_fail(err, e, "snapshot", dst);
	return 0;
}

int al_store_subvol_delete(const char *path, al_err *err)
{
	struct stat st;
	if (path_ok(path, err) < 0)
		return -1;
	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		return al_err_sys(err, AL_ESYS, errno, "stat %s", path);
	}
	int is = al_store_is_subvol(path, err);
	if (is < 0)
		return -1;
	if (is == 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "%s is not a subvolume; not deleting it",
				  path);
	/* Recursive: a sandbox may have created subvolumes inside its root
	 * (btrfs lets any user do that). */
	errno = 0;
	enum btrfs_util_error e = btrfs_util_delete_subvolume(
		path, BTRFS_UTIL_DELETE_SUBVOLUME_RECURSIVE);
	if (e != BTRFS_UTIL_OK) {
		if (errno == ENOENT)
			return 0; /* raced with another delete */
		return store_fail(err, e, "delete subvolume", path);
	}
	return 0;
}

int al_store_is_subvol(const char *path, al_err *err)
{
	if (path_ok(path, err) < 0)
		return -1;
	errno = 0;
	enum btrfs_util_error e = btrfs_util_is_subvolume(path);
	switch (e) {
	case BTRFS_UTIL_OK:
		return 1;
	case BTRFS_UTIL_ERROR_NOT_SUBVOLUME:
	case BTRFS_UTIL_ERROR_NOT_BTRFS:
		return 0;
	case BTRFS_UTIL_ERROR_STAT_FAILED:
	case BTRFS_UTIL_ERROR_STATFS_FAILED:
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return store_fail(err, e, "inspect", path);
	default:
		return store_fail(err, e, "inspect", path);
	}
}
