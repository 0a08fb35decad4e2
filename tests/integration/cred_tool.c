/* cred-tool: what the controller's channel would push to one sandbox's
 * gateway, for the tests (the store's side of issue 11 without the
 * channel): the stack's configuration from the environment, then
 *
 *   cred-tool effective <sandbox id>
 *
 * prints the CRED_SET (core/cred/credproto.h) the controller would push,
 * from al_credential_effective (values decrypted with the state dir's
 * master keys). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "cred/credcrypt.h"
#include "cred/credproto.h"
#include "model/credential.h"
#include "model/db.h"

int main(int argc, char **argv)
{
	if (argc != 3 || strcmp(argv[1], "effective") != 0) {
		fprintf(stderr, "usage: cred-tool effective SANDBOX\n");
		return 2;
	}
	al_config cfg;
	al_err err = {0};
	al_keyring kr;
	al_sandbox_ref ref;
	al_cred_set set;
	if (al_config_load(&cfg, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	al_db *db = al_db_open(cfg.db_conninfo, &err);
	if (db == NULL || al_keyring_load(&kr, cfg.state_dir, 0, &err) < 0 ||
	    al_sandbox_ref_load(db, argv[2], &ref, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	int rc = al_credential_effective(db, &kr, &ref, &set, &err);
	al_keyring_wipe(&kr);
	al_sandbox_ref_free(&ref);
	al_db_close(db);
	if (rc < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	/* The very CRED_SET the controller would push (core/credproto). */
	char *txt = al_cred_set_pack(&set, &err);
	al_cred_set_free(&set);
	if (txt == NULL) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	puts(txt);
	free(txt);
	return 0;
}
