/* poolcap: how much of the pool sandboxes may write, so that no tenant
 * can fill it for the others. Three levels of btrfs qgroups
 * (core/pool/store.h), each capped on what its members write anew:
 *
 *   2/0  every sandbox: the pool less what is not sandboxes' (templates,
 *        builds, spares) and less the reserve (AIRLOCK_POOL_RESERVE_MB);
 *   1/p  project p's sandboxes (p = its pool_group, core/model/project.h): at
 *        most AIRLOCK_POOL_PROJECT_PCT % of 2/0's cap, never above the
 *        project's disk quota; 1/0 holds the warm pool's standbys;
 *   0/s  one sandbox: its own disk_mb.
 *
 * A writer past any of them gets EDQUOT inside its own sandbox; the
 * reserve stays free for template builds and the host whatever the
 * sandboxes write. The controller sets 2/0 at start and keeps it up to
 * date (al_poolcap_refresh); a sandbox's start puts it in its project's
 * group (al_poolcap_join). */
#ifndef AL_POOLCAP_H
#define AL_POOLCAP_H

#include <stdint.h>

#include "base/config.h"
#include "base/err.h"
#include "pool/store.h"

#define AL_POOLCAP_ALL AL_STORE_QGROUP(2, 0)
#define AL_POOLCAP_STANDBY AL_STORE_QGROUP(1, 0)
#define AL_POOLCAP_PROJECT(n) AL_STORE_QGROUP(1, (uint64_t)(n))

/* The reserve of a pool of size bytes: AIRLOCK_POOL_RESERVE_MB, or a
 * tenth of the pool when the operator set none. */
uint64_t al_poolcap_reserve(const al_config *cfg, uint64_t size);

/* What every sandbox together may hold: what they hold now (used) and
 * what is free beyond the reserve (avail less reserve, none when below).
 * Pure arithmetic, for the controller's refresh and the tests. */
uint64_t al_poolcap_share_of(uint64_t used, uint64_t avail, uint64_t reserve);

/* One project's cap within share: AIRLOCK_POOL_PROJECT_PCT % of it, and
 * at most the project's disk quota (MiB). */
uint64_t al_poolcap_project_bytes(const al_config *cfg, uint64_t share,
				  uint64_t disk_quota_mb);

/* At the controller's start: -1 with AL_EINVAL naming
 * AIRLOCK_POOL_RESERVE_MB when the reserve leaves sandboxes nothing of
 * the pool; else makes 2/0 and 1/0 and sets 2/0's cap. */
int al_poolcap_init(const al_config *cfg, al_err *err);

/* Set 2/0's cap from the pool as it is now; *share (may be NULL): the
 * cap set. */
int al_poolcap_refresh(const al_config *cfg, uint64_t *share, al_err *err);

/* What every sandbox together may hold now (the cap al_poolcap_refresh
 * sets), from the pool as it is: a create is not judged by a cap the
 * controller has yet to follow. */
int al_poolcap_share(const al_config *cfg, uint64_t *share, al_err *err);

/* Project group n's use now and its cap (0 when the group has none
 * yet: it is made by its project's first sandbox). */
int al_poolcap_project_usage(const al_config *cfg, int64_t n, uint64_t *used,
			     uint64_t *cap, al_err *err);

/* A create's disk against what the pool can give project group n (its
 * disk quota quota_mb): *disk_bytes above the project's cap is refused
 * (AL_EINVAL naming the most it may be) when asked, else lowered to
 * the cap; a project whose sandboxes have written their cap already is
 * refused (AL_EQUOTA: a new sandbox could not write a byte). *cap: the
 * project group's cap, for al_poolcap_join. */
int al_poolcap_admit(const al_config *cfg, int64_t n, uint64_t quota_mb,
		     int asked, uint64_t *disk_bytes, uint64_t *cap,
		     al_err *err);

/* Put the sandbox whose root is rootfs into project group n (n = 0: the
 * standbys' group), capped at bytes, leaving the standbys' group first
 * when it was a standby. */
int al_poolcap_join(const al_config *cfg, const char *rootfs, int64_t n,
		    uint64_t bytes, int was_standby, al_err *err);

#endif
