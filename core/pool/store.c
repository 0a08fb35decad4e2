#include "pool/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <btrfsutil.h>
#include <linux/btrfs.h>
#include <linux/magic.h>

#include "base/cleanup.h"

/* BTRFS_IOC_QGROUP_LIMIT: this value in a limit field clears it. */
#define QGROUP_NO_LIMIT ((__u64)-1)
/* /sys/fs/btrfs/<uuid>/qgroups/<level>_<n> */
#define AL_STORE_SYSFS_MAX 128
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

static int snapshot(const char *src, const char *dst, int flags, al_err *err)
{
	if (path_ok(src, err) < 0 || path_ok(dst, err) < 0)
		return -1;
	/* Not recursive: a template holds no nested subvolumes, and a
	 * sandbox's nested ones must not leak into its fork. No async
	 * transid and no sync: the snapshot is usable as soon as the ioctl
	 * returns, durability comes with the next regular commit. */
	errno = 0;
	enum btrfs_util_error e = btrfs_util_create_snapshot(src, dst, flags,
							     NULL, NULL);
	if (e != BTRFS_UTIL_OK)
		return store_fail(err, e, "snapshot", dst);
	return 0;
}

int al_store_snapshot(const char *src, const char *dst, al_err *err)
{
	return snapshot(src, dst, 0, err);
}

int al_store_snapshot_ro(const char *src, const char *dst, al_err *err)
{
	return snapshot(src, dst, BTRFS_UTIL_CREATE_SNAPSHOT_READ_ONLY, err);
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
	/* libbtrfsutil's own enum: the few answers that say yes or no, and
	 * every other (of this version or a later one) a failure. */
	if (e == BTRFS_UTIL_OK)
		return 1;
	if (e == BTRFS_UTIL_ERROR_NOT_SUBVOLUME ||
	    e == BTRFS_UTIL_ERROR_NOT_BTRFS)
		return 0;
	if ((e == BTRFS_UTIL_ERROR_STAT_FAILED ||
	     e == BTRFS_UTIL_ERROR_STATFS_FAILED) &&
	    (errno == ENOENT || errno == ENOTDIR))
		return 0;
	return store_fail(err, e, "inspect", path);
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

/* A directory of the pool, opened for its ioctls; a sandbox's root is
 * opened with O_NOFOLLOW (nofollow), the operator's pool need not be. */
static int pool_fd(const char *path, int nofollow, al_err *err)
{
	if (path_ok(path, err) < 0)
		return -1;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
				    (nofollow ? O_NOFOLLOW : 0));
	if (fd < 0)
		return al_err_sys(err, errno == ENOENT ? AL_ENOENT : AL_ESYS,
				  errno, "open %s", path);
	return fd;
}

static int quotas_off(const char *path, al_err *err)
{
	return al_err_set(err, AL_EUNAVAIL, 0,
			  "quotas are off on the pool of %s "
			  "(airlock-controller --init turns them on)",
			  path);
}

/* Full qgroups (no simple quotas) cannot always move a member's figures
 * into a new parent: the kernel then says a rescan is due (> 0), and
 * until it ran the group's figures are low. */
static void rescan_if_due(int fd, int assign_rc)
{
	if (assign_rc <= 0)
		return;
	struct btrfs_ioctl_quota_rescan_args a;
	memset(&a, 0, sizeof a);
	(void)ioctl(fd, BTRFS_IOC_QUOTA_RESCAN, &a); /* EINPROGRESS: running */
}

static int relate(int fd, uint64_t child, uint64_t parent, int assign,
		  const char *path, al_err *err)
{
	struct btrfs_ioctl_qgroup_assign_args a = {.assign = assign,
						   .src = child,
						   .dst = parent};
	int rc = ioctl(fd, BTRFS_IOC_QGROUP_ASSIGN, &a);
	if (rc >= 0) {
		rescan_if_due(fd, rc);
		return 0;
	}
	/* Already so: the caller's wish holds. */
	if ((assign && errno == EEXIST) || (!assign && errno == ENOENT))
		return 0;
	if (errno == ENOTCONN)
		return quotas_off(path, err);
	return al_err_sys(err, AL_ESYS, errno,
			  "%s qgroup %llu/%llu %s %llu/%llu on %s",
			  assign ? "adding" : "removing",
			  (unsigned long long)(child >> 48),
			  (unsigned long long)(child & 0xffffffffffffull),
			  assign ? "to" : "from",
			  (unsigned long long)(parent >> 48),
			  (unsigned long long)(parent & 0xffffffffffffull),
			  path);
}

static int limit_group(int fd, uint64_t group, uint64_t bytes, const char *path,
		       al_err *err)
{
	struct btrfs_ioctl_qgroup_limit_args a = {
		.qgroupid = group,
		.lim = {.flags = BTRFS_QGROUP_LIMIT_MAX_EXCL,
			.max_excl = bytes > 0 ? bytes : QGROUP_NO_LIMIT},
	};
	if (ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &a) == 0)
		return 0;
	if (errno == ENOTCONN)
		return quotas_off(path, err);
	return al_err_sys(err, AL_ESYS, errno, "capping qgroup %llu/%llu of %s",
			  (unsigned long long)(group >> 48),
			  (unsigned long long)(group & 0xffffffffffffull),
			  path);
}

int al_store_limit(const char *subvol, uint64_t bytes, al_err *err)
{
	al_autofd int fd = pool_fd(subvol, 1, err);
	if (fd < 0)
		return -1;
	/* qgroupid 0: the qgroup of the subvolume fd is in (0/<its id>).
	 * Only the exclusive cap: the referenced size of a snapshot counts
	 * its whole template, which a sandbox never wrote. */
	return limit_group(fd, 0, bytes, subvol, err);
}

int al_store_group_set(const char *pool_dir, uint64_t group, uint64_t parent,
		       uint64_t bytes, al_err *err)
{
	if ((group >> 48) == 0 || (parent != 0 && parent >> 48 <= group >> 48))
		return al_err_set(err, AL_EINVAL, 0,
				  "qgroup levels: a group is above level 0 "
				  "and below its parent");
	al_autofd int fd = pool_fd(pool_dir, 0, err);
	if (fd < 0)
		return -1;
	struct btrfs_ioctl_qgroup_create_args c = {.create = 1,
						   .qgroupid = group};
	if (ioctl(fd, BTRFS_IOC_QGROUP_CREATE, &c) < 0 && errno != EEXIST) {
		if (errno == ENOTCONN)
			return quotas_off(pool_dir, err);
		return al_err_sys(err, AL_ESYS, errno,
				  "creating qgroup %llu/%llu on %s",
				  (unsigned long long)(group >> 48),
				  (unsigned long long)(group &
						       0xffffffffffffull),
				  pool_dir);
	}
	if (parent != 0 && relate(fd, group, parent, 1, pool_dir, err) < 0)
		return -1;
	return limit_group(fd, group, bytes, pool_dir, err);
}

int al_store_group_join(const char *subvol, uint64_t group, uint64_t from,
			al_err *err)
{
	al_autofd int fd = pool_fd(subvol, 1, err);
	if (fd < 0)
		return -1;
	uint64_t id = 0;
	errno = 0;
	enum btrfs_util_error e = btrfs_util_subvolume_id_fd(fd, &id);
	if (e != BTRFS_UTIL_OK)
		return store_fail(err, e, "subvolume id of", subvol);
	if (from != 0 && relate(fd, id, from, 0, subvol, err) < 0)
		return -1;
	return relate(fd, id, group, 1, subvol, err);
}

int al_store_used_pct(const char *pool_dir, unsigned *pct, al_err *err)
{
	uint64_t size, avail;
	if (al_store_space(pool_dir, &size, &avail, err) < 0)
		return -1;
	if (size == 0 || avail > size) {
		*pct = size == 0 ? 100 : 0;
		return 0;
	}
	/* Rounded up: 94.2 % used is not "below 94 %". */
	*pct = (unsigned)(((size - avail) * 100 + size - 1) / size);
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
				  "sandboxes keep running",
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

/* The pool's filesystem uuid; AL_EUNAVAIL when it is not on btrfs. */
static int pool_fsid(const char *pool_dir, unsigned char fsid[BTRFS_FSID_SIZE],
		     al_err *err)
{
	if (path_ok(pool_dir, err) < 0)
		return -1;
	int r = btrfs_fsid(pool_dir, fsid, err);
	if (r == 1)
		return al_err_set(err, AL_EUNAVAIL, 0, "%s is not on btrfs",
				  pool_dir);
	return r;
}

int al_store_on_pool(const char *pool_dir, const char *path, al_err *err)
{
	unsigned char a[BTRFS_FSID_SIZE], b[BTRFS_FSID_SIZE];
	if (pool_fsid(pool_dir, a, err) < 0 || path_ok(path, err) < 0)
		return -1;
	int rq = btrfs_fsid(path, b, err);
	if (rq < 0)
		return -1;
	return rq == 0 && memcmp(a, b, sizeof a) == 0;
}

int al_store_space(const char *pool_dir, uint64_t *size, uint64_t *avail,
		   al_err *err)
{
	struct statvfs sv;
	if (path_ok(pool_dir, err) < 0)
		return -1;
	if (statvfs(pool_dir, &sv) < 0)
		return al_err_sys(err, errno == ENOENT ? AL_ENOENT : AL_ESYS,
				  errno, "statvfs %s", pool_dir);
	*size = (uint64_t)sv.f_blocks * sv.f_frsize;
	*avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	return 0;
}

/* One decimal figure of a qgroup's sysfs directory. */
static int read_figure(const char *dir, const char *name, uint64_t *out,
		       al_err *err)
{
	char p[AL_STORE_SYSFS_MAX + 32], buf[32];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	al_autofd int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, errno == ENOENT ? AL_ENOENT : AL_ESYS,
				  errno, "open %s", p);
	ssize_t n = read(fd, buf, sizeof buf - 1);
	if (n <= 0)
		return al_err_set(err, AL_ESYS, n < 0 ? errno : 0, "read %s",
				  p);
	buf[n] = '\0';
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(buf, &end, 10);
	if (errno != 0 || end == buf || (*end != '\n' && *end != '\0'))
		return al_err_set(err, AL_ESYS, 0, "%s: not a number", p);
	*out = v;
	return 0;
}

int al_store_group_usage(const char *pool_dir, uint64_t group, uint64_t *used,
			 uint64_t *cap, al_err *err)
{
	unsigned char fsid[BTRFS_FSID_SIZE];
	if (pool_fsid(pool_dir, fsid, err) < 0)
		return -1;
	/* The kernel's own figures: no tree search, readable by anyone. */
	char dir[AL_STORE_SYSFS_MAX];
	const unsigned char *u = fsid;
	snprintf(dir, sizeof dir,
		 "/sys/fs/btrfs/%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x/qgroups/%llu_%llu",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
		 u[10], u[11], u[12], u[13], u[14], u[15],
		 (unsigned long long)(group >> 48),
		 (unsigned long long)(group & 0xffffffffffffull));
	uint64_t flags = 0, max = 0;
	if (read_figure(dir, "exclusive", used, err) < 0 ||
	    read_figure(dir, "limit_flags", &flags, err) < 0 ||
	    read_figure(dir, "max_exclusive", &max, err) < 0) {
		if (err != NULL && err->code == AL_ENOENT)
			al_err_set(err, AL_ENOENT, 0,
				   "no qgroup %llu/%llu on %s",
				   (unsigned long long)(group >> 48),
				   (unsigned long long)(group &
							0xffffffffffffull),
				   pool_dir);
		return -1;
	}
	*cap = (flags & BTRFS_QGROUP_LIMIT_MAX_EXCL) ? max : 0;
	return 0;
}
