#include "model/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "base/cleanup.h"
#include "base/file.h"
#include "base/log.h"

#define BOOTSTRAP_LOCK_KEY "1095324237"

static const char hexdig[] = "0123456789abcdef";

int al_auth_hash(const char *key, char out[65], al_err *err)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (EVP_Digest(key, strlen(key), md, &mdlen, EVP_sha256(), NULL) != 1 ||
	    mdlen != 32)
		return al_err_set(err, AL_EINTERNAL, 0, "sha256 failed");
	for (unsigned int i = 0; i < 32; i++) {
		out[2 * i] = hexdig[md[i] >> 4];
		out[2 * i + 1] = hexdig[md[i] & 15];
	}
	out[64] = '\0';
	return 0;
}

const char *al_role_name(al_role role)
{
	return role == AL_ROLE_ADMIN ? "admin" : "member";
}

int al_role_from_name(const char *name)
{
	if (name == NULL)
		return -1;
	if (strcmp(name, "admin") == 0)
		return AL_ROLE_ADMIN;
	if (strcmp(name, "member") == 0)
		return AL_ROLE_MEMBER;
	return -1;
}

int al_auth_identify(al_db *db, const char *key, al_identity *out, al_err *err)
{
	char hash[65];

	if (key == NULL || key[0] == '\0')
		return al_err_set(err, AL_EAUTH, 0, "missing API key");
	if (strnlen(key, AL_AUTH_KEY_MAX + 1) > AL_AUTH_KEY_MAX)
		return al_err_set(err, AL_EAUTH, 0, "invalid API key");
	if (al_auth_hash(key, hash, err) < 0)
		return -1;

	const char *params[] = {hash};
	PGresult *res = al_db_exec(db,
				   "SELECT id, project, role FROM api_keys"
				   " WHERE key_hash = $1"
				   " AND revoked_at IS NULL",
				   1, params, err);
	if (res == NULL)
		return -1;
	int role = PQntuples(res) == 1
			   ? al_role_from_name(PQgetvalue(res, 0, 2))
			   : -1;
	if (role < 0) {
		PQclear(res);
		return al_err_set(err, AL_EAUTH, 0, "invalid API key");
	}
	memset(out, 0, sizeof *out);
	out->key_id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	snprintf(out->project, sizeof out->project, "%s",
		 PQgetvalue(res, 0, 1));
	out->role = (al_role)role;
	PQclear(res);
	return 0;
}

int al_auth_key_active(al_db *db, long long key_id, al_err *err)
{
	char ibuf[24];
	snprintf(ibuf, sizeof ibuf, "%lld", key_id);
	const char *params[] = {ibuf};
	PGresult *res = al_db_exec(db,
				   "SELECT 1 FROM api_keys"
				   " WHERE id = $1::bigint"
				   " AND revoked_at IS NULL",
				   1, params, err);
	if (res == NULL)
		return -1;
	int n = PQntuples(res);
	PQclear(res);
	if (n != 1) {
		al_err_set(err, AL_EAUTH, 0, "API key revoked");
		return 0;
	}
	return 1;
}

int al_auth_new_key(char key[AL_AUTH_KEY_LEN + 1], char hash[65], al_err *err)
{
	unsigned char rnd[24];
	size_t got = 0;

	while (got < sizeof rnd) {
		ssize_t n = getrandom(rnd + got, sizeof rnd - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return al_err_sys(err, AL_ESYS, errno, "getrandom");
		got += (size_t)n;
	}
	memcpy(key, "al_", 3);
	for (size_t i = 0; i < sizeof rnd; i++) {
		key[3 + 2 * i] = hexdig[rnd[i] >> 4];
		key[3 + 2 * i + 1] = hexdig[rnd[i] & 15];
	}
	key[AL_AUTH_KEY_LEN] = '\0';
	explicit_bzero(rnd, sizeof rnd);
	return al_auth_hash(key, hash, err);
}

int al_auth_bootstrap(al_db *db, const char *key_file, int *created,
		      al_err *err)
{
	char key[AL_AUTH_KEY_LEN + 2];
	char hash[65];
	int rc = -1;

	*created = 0;
	PGresult *res = al_db_exec(db,
				   "SELECT pg_advisory_lock(" BOOTSTRAP_LOCK_KEY
				   ")",
				   0, NULL, err);
	if (res == NULL)
		return -1;
	PQclear(res);

	res = al_db_exec(db,
			 "SELECT 1 FROM api_keys WHERE role = 'admin'"
			 " AND revoked_at IS NULL LIMIT 1",
			 0, NULL, err);
	if (res == NULL)
		goto unlock;
	int have = PQntuples(res) > 0;
	PQclear(res);
	if (have) {
		rc = 0;
		goto unlock;
	}

	if (al_auth_new_key(key, hash, err) < 0)
		goto unlock;

	/* File first: a key in the database that nobody can read would
	 * block the next bootstrap from creating a usable one. */
	key[AL_AUTH_KEY_LEN] = '\n';
	key[AL_AUTH_KEY_LEN + 1] = '\0';
	if (al_file_replace(key_file, key, strlen(key), 0600, err) < 0)
		goto unlock;
	key[AL_AUTH_KEY_LEN] = '\0';

	const char *params[] = {hash};
	res = al_db_exec(db,
			 "INSERT INTO api_keys (name, key_hash, project, role)"
			 " VALUES ('admin', $1, 'default', 'admin')",
			 1, params, err);
	if (res == NULL) {
		unlink(key_file);
		goto unlock;
	}
	PQclear(res);
	*created = 1;
	al_info("created admin API key in %s", key_file);
	rc = 0;
unlock:
	explicit_bzero(key, sizeof key);
	res = al_db_exec(db,
			 "SELECT pg_advisory_unlock(" BOOTSTRAP_LOCK_KEY ")", 0,
			 NULL, NULL);
	PQclear(res);
	return rc;
}
