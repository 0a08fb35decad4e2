/* credstore: the credential service's store (controller/credsvc.h) over
 * core/credential and core/audit, on a database connection of its own
 * (the service runs on its own thread) and the master keyring. */
#ifndef AL_CONTROLLER_CREDSTORE_H
#define AL_CONTROLLER_CREDSTORE_H

#include "base/config.h"
#include "cred/credcrypt.h"
#include "credsvc.h"
#include "model/db.h"

typedef struct ctl_credstore {
	al_db *db;
	al_keyring kr;
} ctl_credstore;

/* Connect and load the keys; out gets the callbacks (arg = cs). */
int ctl_credstore_open(ctl_credstore *cs, const al_config *cfg,
		       al_credsvc_store *out, al_err *err);
void ctl_credstore_close(ctl_credstore *cs);

#endif
