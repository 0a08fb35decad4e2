/* expiry: see expiry.h. */
#include "expiry.h"

#include <stdlib.h>

#include "base/log.h"
#include "model/sandbox.h"
#include "model/sandbox_state.h"
#include "sandbox/reap.h"
#include "sandbox/shimctl.h"

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
