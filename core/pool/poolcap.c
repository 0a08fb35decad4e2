/* poolcap: see poolcap.h. */
#include "pool/poolcap.h"

#include <inttypes.h>

#define MIB ((uint64_t)1 << 20)

uint64_t al_poolcap_reserve(const al_config *cfg, uint64_t size)
{
	if (cfg->pool_reserve_mb > 0)
		return cfg->pool_reserve_mb * MIB;
	return size / 10;
}

uint64_t al_poolcap_share_of(uint64_t used, uint64_t avail, uint64_t reserve)
{
	return used + (avail > reserve ? avail - reserve : 0);
}

uint64_t al_poolcap_project_bytes(const al_config *cfg, uint64_t share,
				  uint64_t disk_quota_mb)
{
	uint64_t cap = share / 100 * cfg->pool_project_pct;
	uint64_t quota = disk_quota_mb > UINT64_MAX / MIB ? UINT64_MAX
							  : disk_quota_mb * MIB;
	return cap < quota ? cap : quota;
}

/* The share from the pool as it is, and 2/0's cap as last set (0: none,
 * or no group yet): one read of each. */
static int share_now(const al_config *cfg, uint64_t *share, uint64_t *cap,
		     al_err *err)
{
	uint64_t size, avail, used = 0;
	*cap = 0;
	if (al_store_space(cfg->pool_dir, &size, &avail, err) < 0)
		return -1;
	al_err e = {0};
	if (al_store_group_usage(cfg->pool_dir, AL_POOLCAP_ALL, &used, cap,
				 &e) < 0 &&
	    e.code != AL_ENOENT) {
		if (err != NULL)
			*err = e;
		return -1;
	}
	*share = al_poolcap_share_of(used, avail,
				     al_poolcap_reserve(cfg, size));
	return 0;
}

int al_poolcap_refresh(const al_config *cfg, uint64_t *share, al_err *err)
{
	uint64_t s, cap;
	if (share_now(cfg, &s, &cap, err) < 0)
		return -1;
	/* Never 0: that would lift the cap. A byte stops every write. */
	if (s == 0)
		s = 1;
	if (s != cap &&
	    al_store_group_set(cfg->pool_dir, AL_POOLCAP_ALL, 0, s, err) < 0)
		return -1;
	if (share != NULL)
		*share = s;
	return 0;
}

int al_poolcap_init(const al_config *cfg, al_err *err)
{
	uint64_t size, avail;
	if (al_store_space(cfg->pool_dir, &size, &avail, err) < 0)
		return -1;
	uint64_t reserve = al_poolcap_reserve(cfg, size);
	if (reserve >= size)
		return al_err_set(err, AL_EINVAL, 0,
				  "AIRLOCK_POOL_RESERVE_MB=%" PRIu64
				  " leaves sandboxes nothing of the %" PRIu64
				  " MiB pool at %s",
				  cfg->pool_reserve_mb, size / MIB,
				  cfg->pool_dir);
	if (al_poolcap_refresh(cfg, NULL, err) < 0)
		return -1;
	/* Standbys count among all sandboxes; their own disks cap each. */
	return al_store_group_set(cfg->pool_dir, AL_POOLCAP_STANDBY,
				  AL_POOLCAP_ALL, 0, err);
}

int al_poolcap_share(const al_config *cfg, uint64_t *share, al_err *err)
{
	uint64_t cap;
	return share_now(cfg, share, &cap, err);
}

int al_poolcap_project_usage(const al_config *cfg, int64_t n, uint64_t *used,
			     uint64_t *cap, al_err *err)
{
	al_err e = {0};
	if (al_store_group_usage(cfg->pool_dir, AL_POOLCAP_PROJECT(n), used,
				 cap, &e) == 0)
		return 0;
	if (e.code == AL_ENOENT) {
		*used = 0;
		*cap = 0;
		return 0;
	}
	if (err != NULL)
		*err = e;
	return -1;
}

int al_poolcap_admit(const al_config *cfg, int64_t n, uint64_t quota_mb,
		     int asked, uint64_t *disk_bytes, uint64_t *cap,
		     al_err *err)
{
	uint64_t share, used, group_cap;
	if (al_poolcap_share(cfg, &share, err) < 0 ||
	    al_poolcap_project_usage(cfg, n, &used, &group_cap, err) < 0)
		return -1;
	*cap = al_poolcap_project_bytes(cfg, share, quota_mb);
	if (*cap < AL_DISK_MB_MIN * MIB)
		return al_err_set(err, AL_ENOSPACE, 0,
				  "the pool leaves this project %" PRIu64
				  " MiB; a sandbox needs %u MiB (templates and "
				  "the reserve, AIRLOCK_POOL_RESERVE_MB, hold "
				  "the rest of it)",
				  *cap / MIB, AL_DISK_MB_MIN);
	if (*disk_bytes > *cap) {
		if (asked)
			return al_err_set(
				err, AL_EINVAL, 0,
				"'disk_mb' is at most %" PRIu64
				" on this host now: what the pool lets one "
				"project's sandboxes write (AIRLOCK_POOL_"
				"PROJECT_PCT=%u %% of the %" PRIu64
				" MiB sandboxes may write, or the project's "
				"disk quota of %" PRIu64 " MiB)",
				*cap / MIB, cfg->pool_project_pct, share / MIB,
				quota_mb);
		*disk_bytes = *cap;
	}
	if (used >= *cap)
		return al_err_set(err, AL_EQUOTA, 0,
				  "disk: this project's sandboxes have written "
				  "%" PRIu64 " of the %" PRIu64
				  " MiB they may write on the pool together; "
				  "delete some of them or their files",
				  used / MIB, *cap / MIB);
	return 0;
}

int al_poolcap_join(const al_config *cfg, const char *rootfs, int64_t n,
		    uint64_t bytes, int was_standby, al_err *err)
{
	if (n > 0 && al_store_group_set(cfg->pool_dir, AL_POOLCAP_PROJECT(n),
					AL_POOLCAP_ALL, bytes, err) < 0)
		return -1;
	return al_store_group_join(rootfs,
				   n > 0 ? AL_POOLCAP_PROJECT(n)
					 : AL_POOLCAP_STANDBY,
				   was_standby ? AL_POOLCAP_STANDBY : 0, err);
}
