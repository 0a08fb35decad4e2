/* auth: API keys. A key is "al_" + 48 hex characters from getrandom();
 * only its sha256 (hex) is stored, in api_keys. Every key belongs to a
 * project and has a role (core/model/sql/004_tenancy.sql). */
#ifndef AL_AUTH_H
#define AL_AUTH_H

#include "base/err.h"
#include "model/db.h"

#define AL_AUTH_KEY_MAX 256 /* longer presented keys are rejected unhashed */
#define AL_AUTH_KEY_LEN 51  /* "al_" + 48 hex */

typedef enum al_role { AL_ROLE_MEMBER, AL_ROLE_ADMIN } al_role;

/* Who a request is: the key's row. */
typedef struct al_identity {
	long long key_id;
	char project[64];
	al_role role;
} al_identity;

/* "admin" / "member"; al_role_from_name is -1 for anything else. */
const char *al_role_name(al_role role);
int al_role_from_name(const char *name);

/* If no active admin key exists, create one, store its hash and write the
 * key to key_file (mode 0600, written to a temporary file and renamed).
 * *created is 1 when a key was created, 0 when one already existed.
 * Serialized across processes with an advisory lock. */
int al_auth_bootstrap(al_db *db, const char *key_file, int *created,
		      al_err *err);
/* Fill out from the row of key if it is active (not revoked): one
 * indexed lookup by its hash, every time, so a revoked key is refused
 * from the next request on. -1 with AL_EAUTH for a missing, malformed
 * or unknown key (AL_EDB / AL_EUNAVAIL when the database cannot answer). */
int al_auth_identify(al_db *db, const char *key, al_identity *out, al_err *err);
/* 1 while key id is active, 0 once revoked (AL_EAUTH in err), -1 when
 * the database cannot answer. */
int al_auth_key_active(al_db *db, long long key_id, al_err *err);
/* sha256 of key as 64 lowercase hex characters + NUL. */
int al_auth_hash(const char *key, char out[65], al_err *err);
/* A fresh key (AL_AUTH_KEY_LEN characters + NUL) and its hash. */
int al_auth_new_key(char key[AL_AUTH_KEY_LEN + 1], char hash[65], al_err *err);

#endif
