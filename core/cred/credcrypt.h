/* credcrypt: the master keys that seal credential values at rest, and
 * the sealing itself (AES-256-GCM, OpenSSL EVP).
 *
 * Keys live in <state>/keys/master-<n>.key: 32 random bytes each, mode
 * 0600, never in PostgreSQL (a dump alone reveals nothing). The highest
 * n is the current key: new values are sealed with it. Older keys stay
 * until no row uses them (airlock-controller --rotate-master-key makes
 * n+1, re-encrypts every row, then drops the unused ones).
 *
 * A sealed value is nonce (12 random bytes) || ciphertext || tag (16),
 * authenticated with the AAD "<credential id>:<version>", so a row's
 * ciphertext cannot be moved to another row or an older version. Keys
 * and plaintexts are wiped (OPENSSL_cleanse) when released. */
#ifndef AL_CREDCRYPT_H
#define AL_CREDCRYPT_H

#include <stddef.h>

#include "base/err.h"

#define AL_MASTER_KEY_LEN 32
#define AL_KEYRING_MAX 32 /* key files loaded at most */
#define AL_SEAL_NONCE_LEN 12
#define AL_SEAL_TAG_LEN 16
#define AL_SEAL_OVERHEAD (AL_SEAL_NONCE_LEN + AL_SEAL_TAG_LEN)

typedef struct al_master_key {
	int id; /* n of master-<n>.key, >= 1 */
	unsigned char key[AL_MASTER_KEY_LEN];
} al_master_key;

typedef struct al_keyring {
	int n;	     /* keys loaded, ascending by id */
	int current; /* id of the newest key (seals new values) */
	al_master_key keys[AL_KEYRING_MAX];
	char dir[512];	   /* <state>/keys */
	long long seen_ns; /* the dir's mtime at the last load */
} al_keyring;

/* Load every master-<n>.key of <state_dir>/keys. With create, a missing
 * dir (0700) and first key are made, race-safely: concurrent first
 * starts (controller, fcgi workers) end up with the same single key
 * (written to a temporary file, linked into place without replacing).
 * Without create, no key at all is AL_ENOENT. A key file that is not
 * exactly 32 bytes or readable by others is refused (AL_EPERM). */
int al_keyring_load(al_keyring *kr, const char *state_dir, int create,
		    al_err *err);
/* Load again if keys/ changed since (a rotation added or dropped a
 * key): a long-lived holder (the controller's channel) calls it before
 * sealing or opening, so it never seals with a key a rotation is
 * retiring nor misses the new one. */
int al_keyring_refresh(al_keyring *kr, al_err *err);
/* Make master-<current+1>.key and make it current. */
int al_keyring_add(al_keyring *kr, al_err *err);
/* Remove key id's file and drop it from kr (never the current key:
 * AL_ESTATE). */
int al_keyring_drop(al_keyring *kr, int id, al_err *err);
/* Wipe every key in kr. */
void al_keyring_wipe(al_keyring *kr);

/* Seal pt[0..len) with the current key: *out (malloc'ed, len +
 * AL_SEAL_OVERHEAD bytes, *out_len) and *key_id the key used. */
int al_cred_seal(const al_keyring *kr, const char *aad, const void *pt,
		 size_t len, unsigned char **out, size_t *out_len, int *key_id,
		 al_err *err);
/* Open what al_cred_seal made with key key_id and aad: *out (malloc'ed,
 * NUL-terminated, *out_len bytes; release with al_secret_free).
 * AL_ENOENT for an unknown key id; AL_EPERM when authentication fails
 * (wrong key, wrong AAD, tampered bytes). */
int al_cred_open(const al_keyring *kr, int key_id, const char *aad,
		 const unsigned char *ct, size_t len, char **out,
		 size_t *out_len, al_err *err);
/* Wipe p[0..len) and free it (NULL is fine). */
void al_secret_free(void *p, size_t len);

#endif
