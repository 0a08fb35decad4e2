/* poolcaps: see poolcaps.h. */
#include "poolcaps.h"

#include "base/log.h"
#include "model/project.h"
#include "pool/poolcap.h"

typedef struct {
	const al_config *cfg;
	uint64_t share;
} refresh_ctx;

static int refresh_project(const char *name, const al_project_pool *p,
			   void *arg)
{
	refresh_ctx *c = arg;
	uint64_t used, cap;
	al_err err = {0};
	if (al_poolcap_project_usage(c->cfg, p->group, &used, &cap, &err) < 0) {
		al_warn("pool group of project %s: %s", name, err.msg);
		return 0;
	}
	/* A group is made by its project's first sandbox; none, no cap. */
	if (cap == 0)
		return 0;
	uint64_t want = al_poolcap_project_bytes(c->cfg, c->share,
						 p->disk_quota_mb);
	if (want == 0)
		want = 1; /* 0 would lift the cap */
	if (want != cap &&
	    al_store_group_set(c->cfg->pool_dir, AL_POOLCAP_PROJECT(p->group),
			       AL_POOLCAP_ALL, want, &err) < 0)
		al_warn("pool group of project %s: %s", name, err.msg);
	return 0;
}

void ctl_poolcaps_refresh(const al_config *cfg, al_db *db)
{
	refresh_ctx c = {.cfg = cfg};
	al_err err = {0};
	if (al_poolcap_refresh(cfg, &c.share, &err) < 0) {
		al_warn("pool cap of all sandboxes: %s", err.msg);
		return;
	}
	if (db != NULL &&
	    al_project_each_pool(db, cfg, refresh_project, &c, &err) < 0)
		al_warn("pool groups of projects: %s", err.msg);
}
