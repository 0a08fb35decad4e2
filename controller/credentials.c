/* Master keys, audit retention, rotation (see credentials.h). */
#include "credentials.h"

#include <unistd.h>

#include "base/log.h"
#include "cred/credcrypt.h"
#include "model/audit.h"
#include "model/credential.h"

#define RESEAL_BATCH 100
/* Between re-sealing and removing a key: a fcgi request that loaded
 * the keyring just before the new key appeared may still seal with the
 * old one; such a row is re-sealed in the second pass. */
#define SETTLE_S 2

int ctl_master_key_ensure(const al_config *cfg)
{
	al_keyring kr;
	al_err err = {0};
	int rc = al_keyring_load(&kr, cfg->state_dir, 1, &err);
	al_keyring_wipe(&kr);
	if (rc < 0)
		al_error("master key: %s", err.msg);
	return rc;
}

void ctl_audit_retain(const al_config *cfg, al_db *db)
{
	al_err err = {0};
	long long n = al_audit_prune(db, cfg->audit_retention_days, &err);
	if (n < 0)
		al_warn("audit retention: %s", err.msg);
	else if (n > 0)
		al_info("audit retention: deleted %lld rows older than %u days",
			n, cfg->audit_retention_days);
}

/* Re-seal until no row uses an older key; how many, or -1. */
static long long reseal_all(al_db *db, const al_keyring *kr)
{
	al_err err = {0};
	long long total = 0, n;
	while ((n = al_credential_reseal(db, kr, RESEAL_BATCH, &err)) > 0)
		total += n;
	if (n < 0) {
		al_error("re-sealing credentials: %s", err.msg);
		return -1;
	}
	return total;
}

int ctl_rotate_master_key(const al_config *cfg, al_db *db)
{
	al_keyring kr;
	al_err err = {0};
	if (al_keyring_load(&kr, cfg->state_dir, 1, &err) < 0 ||
	    al_keyring_add(&kr, &err) < 0) {
		al_error("master key rotation: %s", err.msg);
		al_keyring_wipe(&kr);
		return 111;
	}
	al_info("master key %d made current", kr.current);
	long long n = reseal_all(db, &kr);
	if (n >= 0) {
		sleep(SETTLE_S);
		long long late = reseal_all(db, &kr);
		n = late < 0 ? -1 : n + late;
	}
	unsigned long long used = 0;
	if (n < 0 || al_credential_keys_used(db, &used, &err) < 0) {
		if (n >= 0)
			al_error("master key rotation: %s", err.msg);
		al_keyring_wipe(&kr);
		return 111;
	}
	al_info("master key rotation: %lld credentials re-sealed", n);
	/* Keys some row still uses (one sealed after the second pass) stay
	 * for the next rotation. */
	int ids[AL_KEYRING_MAX], nids = 0;
	for (int i = 0; i < kr.n; i++)
		if (kr.keys[i].id != kr.current && kr.keys[i].id < 64 &&
		    !(used & (1ull << kr.keys[i].id)))
			ids[nids++] = kr.keys[i].id;
	int rc = 0;
	for (int i = 0; i < nids; i++) {
		if (al_keyring_drop(&kr, ids[i], &err) < 0) {
			al_error("master key rotation: %s", err.msg);
			rc = 111;
			break;
		}
		al_info("master key %d removed (no credential uses it)",
			ids[i]);
	}
	al_keyring_wipe(&kr);
	return rc;
}
