/* The controller's part of the egress log: the gateways' decision files
 * (core/net/egress.h) into PostgreSQL (core/model/egress_log.h), and retention. */
#ifndef AL_CTL_EGRESS_INGEST_H
#define AL_CTL_EGRESS_INGEST_H

#include <stdbool.h>

#include "base/config.h"
#include "model/db.h"

/* Record what waits in run/egress, a batch of whole files per statement,
 * and unlink each file once its batch is in. With tidy, also remove the
 * empty directories of sandboxes that are gone. */
void ctl_egress_ingest(const al_config *cfg, al_db *db, bool tidy);
/* Delete rows older than AIRLOCK_EGRESS_RETENTION_DAYS. */
void ctl_egress_retain(const al_config *cfg, al_db *db);

#endif
