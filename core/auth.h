/* auth: API keys. A key is "al_" + 48 hex characters from getrandom();
 * only its sha256 (hex) is stored, in api_keys. */
#ifndef AL_AUTH_H
#define AL_AUTH_H

#include "db.h"
#include "err.h"

#define AL_AUTH_KEY_MAX 256 /* longer presented keys are rejected unhashed */

/* If no active admin key exists, create one, store its hash and write the
 * key to key_file (mode 0600, written to a temporary file and renamed).
 * *created is 1 when a key was created, 0 when one already existed.
 * Serialized across processes with an advisory lock. */
int al_auth_bootstrap(al_db *db, const char *key_file, int *created,
		      al_err *err);
/* 0 if key is an active (not revoked) key, -1 with AL_EAUTH otherwise
 * (AL_EDB / AL_EUNAVAIL when the database cannot answer). */
int al_auth_check(al_db *db, const char *key, al_err *err);
/* sha256 of key as 64 lowercase hex characters + NUL. */
int al_auth_hash(const char *key, char out[65], al_err *err);

#endif
