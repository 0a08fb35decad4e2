#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>

#include <btrfsutil.h>
#include <linux/btrfs.h>
#include <linux/magic.h>

#include "cleanup.h"

/* BTRFS_IOC_QGROUP_LIMIT: this value in a limit field clears it. */
#define QGROUP_NO_LIMIT ((__u64)-1)
/* Linux 6.7's simple quotas; older headers (Debian 12's) lack the name. */
#ifndef BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA
#define BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA 4
#endif

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

int al_store_quota_enable(const char *pool_dir, al_err *err)
{
	if (path_ok(pool_dir, err) < 0)
		return -1;
	al_autofd int fd = open(pool_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, errno == ENOENT ? AL_ENOENT : AL_ESYS,
				  errno, "open %s", pool_dir);
	/* Simple quotas charge an extent to the subvolume that wrote it:
	 * no backref walks, so a snapshot does not commit the transaction
	 * to account itself (bench/snapshot.sh: several times faster). A
	 * kernel without them says EINVAL: full qgroups then. On a pool
	 * with quotas on either way, both are no-ops. */
	struct btrfs_ioctl_quota_ctl_args a = {
		.cmd = BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA};
	if (ioctl(fd, BTRFS_IOC_QUOTA_CTL, &a) == 0)
		return 0;
	if (errno == EINVAL) {
		a.cmd = BTRFS_QUOTA_CTL_ENABLE;
		if (ioctl(fd, BTRFS_IOC_QUOTA_CTL, &a) == 0)
			return 0;
	}
	return al_err_sys(err, errno == ENOTTY ? AL_EUNAVAIL : AL_ESYS, errno,
			  "enabling quotas on %s", pool_dir);
}

int al_store_limit(const char *subvol, uint64_t bytes, al_err *err)
{
	if (path_ok(subvol, err) < 0)
		return -1;
	al_autofd int fd = open(subvol, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
						O_NOFOLLOW);
	if (fd < 0)
		return al_err_sys(err, errno == ENOENT ? AL_ENOENT : AL_ESYS,
				  errno, "open %s", subvol);
	/* qgroupid 0: the qgroup of the subvolume fd is in (0/<its id>).
	 * Only the exclusive cap: the referenced size of a snapshot counts
	 * its whole template, which a sandbox never wrote. */
	struct btrfs_ioctl_qgroup_limit_args a = {
		.qgroupid = 0,
		.lim = {.flags = BTRFS_QGROUP_LIMIT_MAX_EXCL,
			.max_excl = bytes > 0 ? bytes : QGROUP_NO_LIMIT},
	};
	if (ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &a) < 0) {
		if (errno == ENOTCONN)
			return al_err_set(err, AL_EUNAVAIL, 0,
					  "quotas are off on the pool of %s "
					  "(airlock-controller --init turns "
					  "them on)",
					  subvol);
		return al_err_sys(err, AL_ESYS, errno,
				  "setting the disk limit of %s", subvol);
	}
	return 0;
}

int al_store_used_pct(const char *pool_dir, unsigned *pct, al_err *err)
{
	struct statvfs sv;
	if (path_ok(pool_dir, err) < 0)
		return -1;
	if (statvfs(pool_dir, &sv) < 0)
		return al_err_sys(err, errno == ENOENT ? AL_ENOENT : AL_ESYS,
				  errno, "statvfs %s", pool_dir);
	if (sv.f_blocks == 0 || sv.f_bavail > sv.f_blocks) {
		*pct = sv.f_blocks == 0 ? 100 : 0;
		return 0;
	}
	uint64_t used = (uint64_t)(sv.f_blocks - sv.f_bavail);
	/* Rounded up: 94.2 % used is not "below 94 %". */
	*pct = (unsigned)((used * 100 + sv.f_blocks - 1) / sv.f_blocks);
	return 0;
}

int al_store_room(const char *pool_dir, unsigned full_pct, al_err *err)
{
	unsigned pct;
	if (al_store_used_pct(pool_dir, &pct, err) < 0)
		return -1;
	if (pct >= full_pct)
		return al_err_set(err, AL_ENOSPACE, 0,
				  "the sandbox pool is %u %% full (at %u %% "
				  "no new sandbox or template build is "
				  "started: AIRLOCK_POOL_FULL_PCT); running "
				  "sandboxes are not affected",
				  pct, full_pct);
	return 0;
}

/* The filesystem uuid of a btrfs path; 0 when path is on btrfs, 1 when
 * it is not. Subvolumes differ in st_dev and f_fsid, not in this. */
static int btrfs_fsid(const char *path, unsigned char fsid[BTRFS_FSID_SIZE],
		      al_err *err)
{
	struct statfs sf;
	if (statfs(path, &sf) < 0)
		return al_err_sys(err, errno == ENOENT ? AL_ENOENT : AL_ESYS,
				  errno, "statfs %s", path);
	if ((unsigned long)sf.f_type != BTRFS_SUPER_MAGIC)
		return 1;
	al_autofd int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", path);
	struct btrfs_ioctl_fs_info_args fi;
	memset(&fi, 0, sizeof fi);
	if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi) < 0)
		return al_err_sys(err, AL_ESYS, errno, "btrfs fs info of %s",
				  path);
	memcpy(fsid, fi.fsid, BTRFS_FSID_SIZE);
	return 0;
}

int al_store_on_pool(const char *pool_dir, const char *path, al_err *err)
{
	unsigned char a[BTRFS_FSID_SIZE], b[BTRFS_FSID_SIZE];
	if (path_ok(pool_dir, err) < 0 || path_ok(path, err) < 0)
		return -1;
	int rp = btrfs_fsid(pool_dir, a, err);
	if (rp < 0)
		return -1;
	if (rp == 1)
		return al_err_set(err, AL_EUNAVAIL, 0, "%s is not on btrfs",
				  pool_dir);
	int rq = btrfs_fsid(path, b, err);
	if (rq < 0)
		return -1;
	return rq == 0 && memcmp(a, b, sizeof a) == 0;
}
