#include "host/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <linux/magic.h>

#include "base/cleanup.h"
#include "base/log.h"

#define CG_ROOT "/sys/fs/cgroup"
#define CG_PATH_MAX 512

/* v1 controllers a sandbox is placed in, in creation order. pids comes
 * first because its cgroup.procs is the one we read to find tasks. */
static const char *const v1_ctrls[] = {"pids", "memory", "cpu", "freezer"};
#define V1_NCTRL (sizeof v1_ctrls / sizeof v1_ctrls[0])

static int cg_version_cached; /* 0 unknown, 1, 2 */
static int cg_v2_delegated;   /* subtree_control already written */

int al_cgroup_version(al_err *err)
{
	int v = __atomic_load_n(&cg_version_cached, __ATOMIC_ACQUIRE);
	if (v != 0)
		return v;
	struct statfs sf;
	if (statfs(CG_ROOT, &sf) < 0)
		return al_err_sys(err, AL_EUNAVAIL, errno, "statfs %s",
				  CG_ROOT);
	if ((unsigned long)sf.f_type == CGROUP2_SUPER_MAGIC) {
		v = 2;
	} else if (statfs(CG_ROOT "/memory", &sf) == 0 &&
		   (unsigned long)sf.f_type == CGROUP_SUPER_MAGIC &&
		   access(CG_ROOT "/pids/cgroup.procs", F_OK) == 0 &&
		   access(CG_ROOT "/cpu/cgroup.procs", F_OK) == 0 &&
		   access(CG_ROOT "/freezer/cgroup.procs", F_OK) == 0) {
		v = 1;
	} else {
		return al_err_set(err, AL_EUNAVAIL, 0,
				  "no usable cgroup hierarchy under %s (need "
				  "cgroup2 there, or v1 memory, pids, cpu and "
				  "freezer controllers)",
				  CG_ROOT);
	}
	__atomic_store_n(&cg_version_cached, v, __ATOMIC_RELEASE);
	return v;
}

/* The directory of a controller's hierarchy (v1) or the unified root
 * (v2, ctrl ignored). */
static int cg_dir(int ver, const char *ctrl, const char *name, char *out,
		  size_t outlen, al_err *err)
{
	int n;
	if (ver == 2)
		n = snprintf(out, outlen, CG_ROOT "/" AL_CGROUP_PARENT "%s%s",
			     name != NULL ? "/" : "", name != NULL ? name : "");
	else
		n = snprintf(out, outlen,
			     CG_ROOT "/%s/" AL_CGROUP_PARENT "%s%s", ctrl,
			     name != NULL ? "/" : "", name != NULL ? name : "");
	if (n < 0 || (size_t)n >= outlen)
		return al_err_set(err, AL_EINVAL, 0, "cgroup path too long");
	return 0;
}

static int cg_name_ok(const char *name, al_err *err)
{
	/* The name becomes a path component: no separators, no dot names. */
	if (name == NULL || name[0] == '\0' || name[0] == '.' ||
	    strchr(name, '/') != NULL || strlen(name) > 128)
		return al_err_set(err, AL_EINVAL, 0, "invalid cgroup name");
	return 0;
}

static int cg_write(const char *path, const char *val, al_err *err)
{
	al_autofd int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", path);
	size_t len = strlen(val);
	ssize_t w = write(fd, val, len);
	if (w < 0)
		return al_err_sys(err, AL_ESYS, errno, "write \"%s\" to %s",
				  val, path);
	if ((size_t)w != len)
		return al_err_set(err, AL_ESYS, 0, "short write to %s", path);
	return 0;
}

static int cg_write_in(const char *dir, const char *file, const char *val,
		       al_err *err)
{
	char path[CG_PATH_MAX];
	int n = snprintf(path, sizeof path, "%s/%s", dir, file);
	if (n < 0 || (size_t)n >= sizeof path)
		return al_err_set(err, AL_EINVAL, 0, "cgroup path too long");
	return cg_write(path, val, err);
}

/* Read a small control file into buf (NUL-terminated). */
static int cg_read_in(const char *dir, const char *file, char *buf,
		      size_t buflen, al_err *err)
{
	char path[CG_PATH_MAX];
	int n = snprintf(path, sizeof path, "%s/%s", dir, file);
	if (n < 0 || (size_t)n >= sizeof path)
		return al_err_set(err, AL_EINVAL, 0, "cgroup path too long");
	al_autofd int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", path);
	size_t off = 0;
	while (off + 1 < buflen) {
		ssize_t r = read(fd, buf + off, buflen - 1 - off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return al_err_sys(err, AL_ESYS, errno, "read %s", path);
		}
		if (r == 0)
			break;
		off += (size_t)r;
	}
	buf[off] = '\0';
	return 0;
}

static int cg_mkdir(const char *path, int exist_ok, al_err *err)
{
	if (mkdir(path, 0755) == 0)
		return 0;
	if (errno == EEXIST && exist_ok)
		return 0;
	return al_err_sys(err, errno == EEXIST ? AL_EEXIST : AL_ESYS, errno,
			  "mkdir %s", path);
}

/* Make a fresh leaf: a leftover from a crash is removed if it is empty. */
static int cg_mkleaf(const char *path, al_err *err)
{
	if (mkdir(path, 0755) == 0)
		return 0;
	if (errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", path);
	if (rmdir(path) < 0)
		return al_err_sys(err, AL_EEXIST, errno,
				  "cgroup %s exists and is in use", path);
	al_warn("removed stale cgroup %s", path);
	if (mkdir(path, 0755) < 0)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", path);
	return 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int64_t al_cgroup_cpu_quota_us(uint32_t cpu_millis)
{
	if (cpu_millis == 0)
		return -1;
	return (int64_t)cpu_millis * (AL_CGROUP_CPU_PERIOD_US / 1000);
}

static int v2_delegate(al_err *err)
{
	if (__atomic_load_n(&cg_v2_delegated, __ATOMIC_ACQUIRE))
		return 0;
	char parent[CG_PATH_MAX];
	if (cg_dir(2, NULL, NULL, parent, sizeof parent, err) < 0)
		return -1;
	if (cg_mkdir(parent, 1, err) < 0)
		return -1;
	/* memory, pids and cpu (the sandbox's CPU cap) are the isolation:
	 * without them fail closed. */
	static const struct {
		const char *ctl;
		int required;
	} ctls[] = {{"+memory", 1}, {"+pids", 1}, {"+cpu", 1}};
	const char *dirs[] = {CG_ROOT, parent};
	for (size_t d = 0; d < 2; d++) {
		for (size_t i = 0; i < sizeof ctls / sizeof ctls[0]; i++) {
			al_err e = {0};
			if (cg_write_in(dirs[d], "cgroup.subtree_control",
					ctls[i].ctl, &e) == 0)
				continue;
			if (ctls[i].required) {
				if (err != NULL)
					*err = e;
				return -1;
			}
			al_warn("cgroup v2: %s", e.msg);
		}
	}
	__atomic_store_n(&cg_v2_delegated, 1, __ATOMIC_RELEASE);
	return 0;
}

static int v2_limits(const char *dir, const al_cgroup_limits *lim, al_err *err)
{
	char val[32];
	snprintf(val, sizeof val, "%" PRIu64, lim->memory_bytes);
	if (cg_write_in(dir, "memory.max", val, err) < 0)
		return -1;
	/* Absent when the kernel does not account swap: nothing to limit. */
	al_err e = {0};
	if (cg_write_in(dir, "memory.swap.max", "0", &e) < 0 &&
	    e.sys_errno != ENOENT) {
		if (err != NULL)
			*err = e;
		return -1;
	}
	snprintf(val, sizeof val, "%" PRIu32, lim->pids_max);
	if (cg_write_in(dir, "pids.max", val, err) < 0)
		return -1;
	/* The v1 share scale [2, 262144] mapped onto weight [1, 10000]. */
	uint64_t shares = lim->cpu_shares;
	if (shares < 2)
		shares = 2;
	if (shares > 262144)
		shares = 262144;
	snprintf(val, sizeof val, "%" PRIu64,
		 1 + ((shares - 2) * 9999) / 262142);
	if (cg_write_in(dir, "cpu.weight", val, &e) < 0)
		al_warn("cgroup v2: %s", e.msg);
	int64_t quota = al_cgroup_cpu_quota_us(lim->cpu_millis);
	if (quota < 0)
		snprintf(val, sizeof val, "max %d", AL_CGROUP_CPU_PERIOD_US);
	else
		snprintf(val, sizeof val, "%" PRId64 " %d", quota,
			 AL_CGROUP_CPU_PERIOD_US);
	return cg_write_in(dir, "cpu.max", val, err);
}

static int v2_create(const char *name, const al_cgroup_limits *lim, al_err *err)
{
	char dir[CG_PATH_MAX];
	if (v2_delegate(err) < 0)
		return -1;
	if (cg_dir(2, NULL, name, dir, sizeof dir, err) < 0)
		return -1;
	if (cg_mkleaf(dir, err) < 0)
		return -1;
	if (v2_limits(dir, lim, err) < 0) {
		rmdir(dir);
		return -1;
	}
	return 0;
}

static int v1_limits(const char *ctrl, const char *dir,
		     const al_cgroup_limits *lim, al_err *err)
{
	char val[32];
	if (strcmp(ctrl, "memory") == 0) {
		snprintf(val, sizeof val, "%" PRIu64, lim->memory_bytes);
		/* memory may not go above memory+swap: raising a limit
		 * (a standby claimed with more) writes memory+swap first. */
		al_err e = {0};
		if (cg_write_in(dir, "memory.limit_in_bytes", val, &e) < 0) {
			if (e.sys_errno != EINVAL ||
			    cg_write_in(dir, "memory.memsw.limit_in_bytes", val,
					err) < 0 ||
			    cg_write_in(dir, "memory.limit_in_bytes", val,
					err) < 0) {
				if (err != NULL && e.sys_errno != EINVAL)
					*err = e;
				return -1;
			}
		}
		/* memory+swap equal to memory: no swapping past the limit.
		 * Missing when swap accounting is off. */
		if (cg_write_in(dir, "memory.memsw.limit_in_bytes", val, &e) <
			    0 &&
		    e.sys_errno != ENOENT) {
			if (err != NULL)
				*err = e;
			return -1;
		}
	} else if (strcmp(ctrl, "pids") == 0) {
		snprintf(val, sizeof val, "%" PRIu32, lim->pids_max);
		if (cg_write_in(dir, "pids.max", val, err) < 0)
			return -1;
	} else if (strcmp(ctrl, "cpu") == 0) {
		uint32_t shares = lim->cpu_shares < 2 ? 2 : lim->cpu_shares;
		snprintf(val, sizeof val, "%" PRIu32, shares);
		if (cg_write_in(dir, "cpu.shares", val, err) < 0)
			return -1;
		/* The period before the quota: a quota is checked against
		 * the period in force when it is written. */
		snprintf(val, sizeof val, "%d", AL_CGROUP_CPU_PERIOD_US);
		if (cg_write_in(dir, "cpu.cfs_period_us", val, err) < 0)
			return -1;
		snprintf(val, sizeof val, "%" PRId64,
			 al_cgroup_cpu_quota_us(lim->cpu_millis));
		if (cg_write_in(dir, "cpu.cfs_quota_us", val, err) < 0)
			return -1;
	}
	return 0;
}

static int v1_create(const char *name, const al_cgroup_limits *lim, al_err *err)
{
	char dirs[V1_NCTRL][CG_PATH_MAX];
	size_t made = 0;
	for (size_t i = 0; i < V1_NCTRL; i++) {
		if (cg_dir(1, v1_ctrls[i], NULL, dirs[i], sizeof dirs[i], err) <
			    0 ||
		    cg_mkdir(dirs[i], 1, err) < 0)
			goto fail;
		if (cg_dir(1, v1_ctrls[i], name, dirs[i], sizeof dirs[i], err) <
			    0 ||
		    cg_mkleaf(dirs[i], err) < 0)
			goto fail;
		made++;
		if (v1_limits(v1_ctrls[i], dirs[i], lim, err) < 0)
			goto fail;
	}
	return 0;
fail:
	while (made > 0)
		rmdir(dirs[--made]);
	return -1;
}

int al_cgroup_create(const char *name, const al_cgroup_limits *lim, al_err *err)
{
	if (cg_name_ok(name, err) < 0)
		return -1;
	if (lim == NULL || lim->memory_bytes == 0 || lim->pids_max == 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "cgroup limits must be set");
	int ver = al_cgroup_version(err);
	if (ver < 0)
		return -1;
	return ver == 2 ? v2_create(name, lim, err) : v1_create(name, lim, err);
}

int al_cgroup_set_limits(const char *name, const al_cgroup_limits *lim,
			 al_err *err)
{
	char dir[CG_PATH_MAX];
	if (cg_name_ok(name, err) < 0)
		return -1;
	if (lim == NULL || lim->memory_bytes == 0 || lim->pids_max == 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "cgroup limits must be set");
	int ver = al_cgroup_version(err);
	if (ver < 0)
		return -1;
	if (ver == 2)
		return cg_dir(2, NULL, name, dir, sizeof dir, err) < 0
			       ? -1
			       : v2_limits(dir, lim, err);
	for (size_t i = 0; i < V1_NCTRL; i++)
		if (cg_dir(1, v1_ctrls[i], name, dir, sizeof dir, err) < 0 ||
		    v1_limits(v1_ctrls[i], dir, lim, err) < 0)
			return -1;
	return 0;
}

int al_cgroup_rename(const char *from, const char *to, al_err *err)
{
	char a[CG_PATH_MAX], b[CG_PATH_MAX];
	if (cg_name_ok(from, err) < 0 || cg_name_ok(to, err) < 0)
		return -1;
	int ver = al_cgroup_version(err);
	if (ver < 0)
		return -1;
	size_t n = ver == 2 ? 1 : V1_NCTRL;
	for (size_t i = 0; i < n; i++) {
		const char *ctrl = ver == 2 ? NULL : v1_ctrls[i];
		if (cg_dir(ver, ctrl, from, a, sizeof a, err) < 0 ||
		    cg_dir(ver, ctrl, to, b, sizeof b, err) < 0)
			goto undo;
		/* A leftover leaf of that name from a crash holds no task
		 * and goes; a live one stays (rmdir: EBUSY) and the rename
		 * fails. */
		rmdir(b);
		if (rename(a, b) < 0) {
			al_err_sys(err, AL_ESYS, errno, "rename %s to %s", a,
				   b);
			goto undo;
		}
		continue;
undo:
		while (i-- > 0) {
			ctrl = ver == 2 ? NULL : v1_ctrls[i];
			if (cg_dir(ver, ctrl, from, a, sizeof a, NULL) == 0 &&
			    cg_dir(ver, ctrl, to, b, sizeof b, NULL) == 0)
				rename(b, a);
		}
		return -1;
	}
	return 0;
}

int al_cgroup_attach(const char *name, pid_t pid, al_err *err)
{
	char dir[CG_PATH_MAX], val[24];
	if (cg_name_ok(name, err) < 0)
		return -1;
	int ver = al_cgroup_version(err);
	if (ver < 0)
		return -1;
	snprintf(val, sizeof val, "%d", (int)pid);
	size_t n = ver == 2 ? 1 : V1_NCTRL;
	for (size_t i = 0; i < n; i++) {
		if (cg_dir(ver, v1_ctrls[i], name, dir, sizeof dir, err) < 0 ||
		    cg_write_in(dir, "cgroup.procs", val, err) < 0)
			return -1;
	}
	return 0;
}

int al_cgroup_join_open(const char *name, al_cgroup_join_kind kind,
			int fds[AL_CGROUP_JOIN_FDS], al_err *err)
{
	char dir[CG_PATH_MAX], path[CG_PATH_MAX];
	if (cg_name_ok(name, err) < 0)
		return -1;
	int ver = al_cgroup_version(err);
	if (ver < 0)
		return -1;
	size_t nctrl = ver == 2 ? 1 : V1_NCTRL;
	int n = 0;
	for (size_t i = 0; i < nctrl; i++) {
		if (ver == 1 && kind == AL_CGROUP_JOIN_LIMITS &&
		    strcmp(v1_ctrls[i], "freezer") == 0)
			continue;
		if (cg_dir(ver, v1_ctrls[i], name, dir, sizeof dir, err) < 0)
			goto fail;
		int w = snprintf(path, sizeof path, "%s/%s", dir,
				 ver == 2 ? "cgroup.procs" : "tasks");
		if (w < 0 || (size_t)w >= sizeof path) {
			al_err_set(err, AL_EINVAL, 0, "cgroup path too long");
			goto fail;
		}
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0) {
			al_err_sys(err, AL_ESYS, errno, "open %s", path);
			goto fail;
		}
		fds[n++] = fd;
	}
	return n;
fail:
	while (n > 0)
		close(fds[--n]);
	return -1;
}

int al_cgroup_join(const int *fds, int n)
{
	for (int i = 0; i < n; i++) {
		if (write(fds[i], "0", 1) != 1)
			return -1;
	}
	return 0;
}

int al_cgroup_freeze(const char *name, int frozen, al_err *err)
{
	char dir[CG_PATH_MAX], buf[512];
	if (cg_name_ok(name, err) < 0)
		return -1;
	int ver = al_cgroup_version(err);
	if (ver < 0)
		return -1;
	if (cg_dir(ver, "freezer", name, dir, sizeof dir, err) < 0)
		return -1;
	if (ver == 2) {
		if (cg_write_in(dir, "cgroup.freeze", frozen ? "1" : "0", err) <
		    0)
			return -1;
	} else {
		if (cg_write_in(dir, "freezer.state",
				frozen ? "FROZEN" : "THAWED", err) < 0)
			return -1;
	}
	/* Freezing is asynchronous: a task in an uninterruptible sleep
	 * stops only when it returns to user space. Most freezes are done
	 * within a millisecond or two (a pause waits on this), so the first
	 * looks come quickly; 1 s in all. */
	for (int i = 0, waited = 0; waited < 1000; i++) {
		if (ver == 2) {
			if (cg_read_in(dir, "cgroup.events", buf, sizeof buf,
				       err) < 0)
				return -1;
			const char *f = strstr(buf, "frozen ");
			if (f != NULL && (f[7] == '1') == (frozen != 0))
				return 0;
		} else {
			if (cg_read_in(dir, "freezer.state", buf, sizeof buf,
				       err) < 0)
				return -1;
			if (strncmp(buf, frozen ? "FROZEN" : "THAWED", 6) == 0)
				return 0;
		}
		int step = i < 10 ? 1 : 5;
		sleep_ms(step);
		waited += step;
	}
	return al_err_set(err, AL_ETIMEDOUT, 0, "cgroup %s did not %s in 1s",
			  name, frozen ? "freeze" : "thaw");
}

/* Kill every pid listed in dir/cgroup.procs; returns how many. */
static int cg_kill_procs(const char *dir)
{
	char path[CG_PATH_MAX];
	int n = snprintf(path, sizeof path, "%s/cgroup.procs", dir);
	if (n < 0 || (size_t)n >= sizeof path)
		return 0;
	al_autofile FILE *f = fopen(path, "re");
	if (f == NULL)
		return 0;
	int pid, killed = 0;
	while (fscanf(f, "%d", &pid) == 1) {
		if (pid > 1 && kill(pid, SIGKILL) == 0)
			killed++;
	}
	return killed;
}

int al_cgroup_kill(const char *name, al_err *err)
{
	char dir[CG_PATH_MAX];
	if (cg_name_ok(name, err) < 0)
		return -1;
	int ver = al_cgroup_version(err);
	if (ver < 0)
		return -1;
	if (cg_dir(ver, "pids", name, dir, sizeof dir, err) < 0)
		return -1;
	if (access(dir, F_OK) < 0)
		return 0;
	if (ver == 2) {
		al_err e = {0};
		if (cg_write_in(dir, "cgroup.kill", "1", &e) == 0)
			return 0;
		/* Before 5.14 there is no cgroup.kill. */
		cg_kill_procs(dir);
		return 0;
	}
	cg_kill_procs(dir);
	/* A v1-frozen task does not act on SIGKILL until thawed. */
	char fdir[CG_PATH_MAX];
	if (cg_dir(1, "freezer", name, fdir, sizeof fdir, err) < 0)
		return -1;
	al_err e = {0};
	if (cg_write_in(fdir, "freezer.state", "THAWED", &e) < 0 &&
	    e.sys_errno != ENOENT)
		al_warn("thawing %s: %s", name, e.msg);
	return 0;
}

int al_cgroup_destroy(const char *name, al_err *err)
{
	char dir[CG_PATH_MAX];
	if (cg_name_ok(name, err) < 0)
		return -1;
	int ver = al_cgroup_version(err);
	if (ver < 0)
		return -1;
	size_t n = ver == 2 ? 1 : V1_NCTRL;
	int killed = 0;
	for (size_t i = 0; i < n; i++) {
		if (cg_dir(ver, v1_ctrls[i], name, dir, sizeof dir, err) < 0)
			return -1;
		for (int tries = 0;; tries++) {
			if (rmdir(dir) == 0 || errno == ENOENT)
				break;
			if (errno != EBUSY || tries >= 200)
				return al_err_sys(err, AL_ESYS, errno,
						  "rmdir %s", dir);
			/* Tasks left (or still exiting): kill once, then
			 * give the kernel time to reap them. */
			if (!killed) {
				al_err e = {0};
				if (al_cgroup_kill(name, &e) < 0)
					al_warn("%s", e.msg);
				killed = 1;
			}
			sleep_ms(5);
		}
	}
	return 0;
}

int al_cgroup_file(const char *name, const char *file, char *out, size_t outlen,
		   al_err *err)
{
	char dir[CG_PATH_MAX], ctrl[16];
	if (cg_name_ok(name, err) < 0)
		return -1;
	if (file == NULL || strchr(file, '/') != NULL)
		return al_err_set(err, AL_EINVAL, 0, "invalid cgroup file");
	int ver = al_cgroup_version(err);
	if (ver < 0)
		return -1;
	/* v1: the controller is the file's prefix; cgroup.* lives in all,
	 * pids is the one we use. */
	size_t p = strcspn(file, ".");
	if (p == 0 || p >= sizeof ctrl || strncmp(file, "cgroup", p) == 0)
		snprintf(ctrl, sizeof ctrl, "pids");
	else
		snprintf(ctrl, sizeof ctrl, "%.*s", (int)p, file);
	if (cg_dir(ver, ctrl, name, dir, sizeof dir, err) < 0)
		return -1;
	int n = snprintf(out, outlen, "%s/%s", dir, file);
	if (n < 0 || (size_t)n >= outlen)
		return al_err_set(err, AL_EINVAL, 0, "cgroup path too long");
	return 0;
}

int al_cgroup_oom_kills_parse(const char *text, uint64_t *kills)
{
	static const char key[] = "oom_kill ";
	for (const char *l = text; l != NULL && *l != '\0';) {
		if (strncmp(l, key, sizeof key - 1) == 0) {
			const char *v = l + sizeof key - 1;
			char *end;
			errno = 0;
			unsigned long long n = strtoull(v, &end, 10);
			if (end == v || errno != 0 ||
			    (*end != '\n' && *end != '\0'))
				return -1;
			*kills = n;
			return 0;
		}
		l = strchr(l, '\n');
		if (l != NULL)
			l++;
	}
	return -1;
}

int al_cgroup_memory_read(const char *name, al_cgroup_memory *out, al_err *err)
{
	char dir[CG_PATH_MAX], buf[512];
	if (cg_name_ok(name, err) < 0)
		return -1;
	int ver = al_cgroup_version(err);
	if (ver < 0 || cg_dir(ver, "memory", name, dir, sizeof dir, err) < 0)
		return -1;
	const char *limit_file = ver == 2 ? "memory.max"
					  : "memory.limit_in_bytes";
	const char *events_file = ver == 2 ? "memory.events"
					   : "memory.oom_control";
	if (cg_read_in(dir, limit_file, buf, sizeof buf, err) < 0)
		return -1;
	/* v2 "max", or v1's page-rounded LLONG_MAX: no limit. */
	char *end;
	unsigned long long lim = strtoull(buf, &end, 10);
	out->limit_bytes = end == buf || lim >= (1ull << 62) ? 0 : lim;
	if (cg_read_in(dir, events_file, buf, sizeof buf, err) < 0)
		return -1;
	if (al_cgroup_oom_kills_parse(buf, &out->oom_kills) < 0)
		return al_err_set(err, AL_EUNAVAIL, 0,
				  "%s/%s has no oom_kill count", dir,
				  events_file);
	return 0;
}
