/* cred-tool: what the controller's channel would push to one sandbox's
 * gateway, for the tests (the store's side of issue 11 without the
 * channel): the stack's configuration from the environment, then
 *
 *   cred-tool effective <sandbox id>
 *
 * prints {"creds":[{"id","name","scope","version","value","hosts",
 * "header","format","rate"}]} from al_credential_effective (values
 * decrypted with the state dir's master keys). */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "config.h"
#include "credcrypt.h"
#include "credential.h"
#include "db.h"

static json_object *cred_json(const al_cred *c)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(c->id));
	json_object_object_add(o, "name", json_object_new_string(c->name));
	json_object_object_add(
		o, "scope",
		json_object_new_string(al_cred_scope_name(c->scope)));
	json_object_object_add(o, "version", json_object_new_int(c->version));
	json_object_object_add(o, "value",
			       json_object_new_string_len(c->value,
							  (int)c->value_len));
	json_object *h = json_object_new_array();
	for (size_t i = 0; i < c->nhosts; i++)
		json_object_array_add(h, json_object_new_string(c->hosts[i]));
	json_object_object_add(o, "hosts", h);
	json_object_object_add(o, "header",
			       c->header[0] ? json_object_new_string(c->header)
					    : NULL);
	json_object_object_add(o, "format", json_object_new_string(c->format));
	json_object *rate = NULL;
	if (c->rate_requests > 0) {
		rate = json_object_new_object();
		json_object_object_add(rate, "requests",
				       json_object_new_int(c->rate_requests));
		json_object_object_add(
			rate, "per_seconds",
			json_object_new_int(c->rate_per_seconds));
	}
	json_object_object_add(o, "rate", rate);
	return o;
}

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
	json_object *arr = json_object_new_array();
	for (size_t i = 0; i < set.n; i++)
		json_object_array_add(arr, cred_json(&set.creds[i]));
	al_cred_set_free(&set);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "creds", arr);
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return 0;
}
