-- Each project's number among the pool's qgroups (core/pool/poolcap.h): its
-- sandboxes' disks sit in qgroup 1/<pool_group>, whose cap bounds what
-- they may write together. 0 is the warm-pool standbys' group, so the
-- numbers start at 1; existing projects are numbered by this statement.
ALTER TABLE projects ADD COLUMN pool_group bigserial UNIQUE;
