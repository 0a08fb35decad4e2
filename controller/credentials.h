/* The controller's part of the credential store: the master keys
 * (made on first start), audit retention, and master key rotation. */
#ifndef AL_CTL_CREDENTIALS_H
#define AL_CTL_CREDENTIALS_H

#include "base/config.h"
#include "model/db.h"

/* Make <state>/keys/master-1.key if there is no master key yet. */
int ctl_master_key_ensure(const al_config *cfg);
/* Delete audit rows older than AIRLOCK_AUDIT_RETENTION_DAYS. */
void ctl_audit_retain(const al_config *cfg, al_db *db);
/* --rotate-master-key: make master-<n+1>.key current, re-seal every
 * row in batches (each row its own short statement: the stack keeps
 * running and a concurrent rotate-by-PUT wins), then remove the old
 * keys no row uses any more. 0 ok, 111 on failure (the old keys stay;
 * running it again resumes). */
int ctl_rotate_master_key(const al_config *cfg, al_db *db);

#endif
