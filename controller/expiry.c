/* expiry: see expiry.h. */
#include "expiry.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "model/sandbox.h"
#include "model/sandbox_state.h"
#include "sandbox/lifecycle_ops.h"
#include "sandbox/reap.h"
#include "sandbox/shimctl.h"

/* A sandbox its timeout suspended is kept that long, then deleted. */
#define EXPIRY_SUSPENDED_KEEP_S (7 * 24 * 3600)
#define EXPIRY_RETRY_S 60

/* A sandbox created with "on_timeout": "suspend" is suspended at its
 * deadline (a vm with its memory, ns its files) and kept suspended for
 * EXPIRY_SUSPENDED_KEEP_S; a suspend that fails is tried again after
 * EXPIRY_RETRY_S. 1 when it was not to be deleted now. */
static int suspend_instead(ctl *c, const char *id)
{
	al_err err = {0};
	al_sandbox sb;
	if (al_sandbox_get(c->db, id, &sb, &err) < 0)
		return 0;
	int live = sb.state == AL_ST_RUNNING || sb.state == AL_ST_PAUSED;
	int want = sb.on_timeout_suspend && live && sb.op[0] == '\0';
	int vm = strcmp(sb.driver, "vm") == 0;
	al_sandbox_free_fields(&sb);
	if (!want)
		return 0;
	char snap[64];
	uint32_t keep = EXPIRY_SUSPENDED_KEEP_S;
	if (al_lifecycle_suspend(c->cfg, c->db, id, NULL, vm, snap, &err) ==
	    0) {
		al_info("sandbox %s reached its timeout: suspended to %s (%s)",
			id, snap, vm ? "memory and files" : "files only");
	} else {
		al_warn("sandbox %s reached its timeout; suspending it "
			"failed: %s",
			id, err.msg);
		keep = EXPIRY_RETRY_S;
	}
	if (al_sandbox_set_timeout(c->db, id, NULL, keep, &err) < 0)
		al_warn("sandbox %s: %s", id, err.msg);
	return 1;
}

void ctl_expire(ctl *c)
{
	const al_config *cfg = c->cfg;
	al_db *db = c->db;
	al_err err = {0};
	char(*ids)[64] = NULL;
	int n = 0;
	if (al_sandbox_list_expired(db, &ids, &n, &err) < 0) {
		al_warn("listing expired sandboxes: %s", err.msg);
		return;
	}
	for (int i = 0; i < n; i++) {
		al_err e = {0};
		if (suspend_instead(c, ids[i]))
			continue;
		al_info("sandbox %s expired", ids[i]);
		if (al_shimctl_destroy(cfg, ids[i], &e) == 0)
			continue;
		/* No shim to ask: release what is left ourselves. */
		al_err e2 = {0};
		if (al_reap_sandbox(cfg, ids[i], &e2) < 0)
			al_warn("sandbox %s: %s", ids[i], e2.msg);
		if (al_sandbox_transition(db, ids[i], AL_EV_DELETE, "expired",
					  &e2) < 0)
			al_warn("sandbox %s: %s", ids[i], e2.msg);
	}
	free(ids);
}
