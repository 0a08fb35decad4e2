/* credential: the credential store (table credentials,
 * core/model/sql/009_credentials.sql). A credential belongs to a project
 * (NULL: global, made by admins), has a name, a scope that says which of
 * the project's sandboxes it applies to, the hosts it may be injected
 * toward, how (a header, or a placeholder "airlock-cred:<name>" swapped
 * by the gateway), an optional rate limit, and a value sealed with the
 * master key (core/cred/credcrypt.h). The value never leaves this module
 * except through al_credential_effective (for the controller's channel
 * to the gateways); every JSON view omits it.
 *
 * Scopes, most specific first: sandbox (one id), metadata (a sandbox
 * whose metadata contains the object), template (by name), project,
 * global. For one name the most specific applicable credential wins; of
 * two metadata matches the one with more keys, then the older. */
#ifndef AL_CREDENTIAL_H
#define AL_CREDENTIAL_H

#include <stddef.h>

#include <json-c/json.h>

#include "base/err.h"
#include "cred/credcrypt.h"
#include "cred/credproto.h"
#include "model/auth.h"
#include "model/db.h"

/* al_cred, al_cred_set, al_cred_scope and the field bounds are the
 * channel's (core/cred/credproto.h): one definition for the store, the
 * controller and the gateway. */
#define AL_CRED_BODY_MAX (64u * 1024) /* API bodies: 413 above */

/* What selects a sandbox's credentials. */
typedef struct al_sandbox_ref {
	char id[64];
	char project[64];
	char template_name[64];
	json_object *metadata;	  /* object; owned (NULL: none) */
	long long created_by_key; /* 0: unknown */
} al_sandbox_ref;

/* Load sandbox id's ref (AL_ENOENT if absent or deleted). */
int al_sandbox_ref_load(al_db *db, const char *id, al_sandbox_ref *out,
			al_err *err);
void al_sandbox_ref_free(al_sandbox_ref *sb);

/* The winning credential per name for sb, values decrypted with kr. */
int al_credential_effective(al_db *db, const al_keyring *kr,
			    const al_sandbox_ref *sb, al_cred_set *out,
			    al_err *err);
/* Only the winning names (no decryption): *names malloc'ed, *n of them,
 * sorted. For the env placeholders of a sandbox being created. */
int al_credential_names(al_db *db, const al_sandbox_ref *sb,
			char (**names)[AL_CRED_NAME_MAX + 1], size_t *n,
			al_err *err);
/* "AIRLOCK_CRED_" + name upper-cased, other than [A-Z0-9] as '_'. */
#define AL_CRED_ENV_MAX (13 + AL_CRED_NAME_MAX + 1)
void al_credential_env_name(const char *name, char out[AL_CRED_ENV_MAX]);
/* Add AIRLOCK_CRED_<N>=airlock-cred:<name> for every name applying to
 * sb to env (an object of strings), replacing what the caller put
 * under those names. */
int al_credential_env_add(al_db *db, const al_sandbox_ref *sb, json_object *env,
			  al_err *err);

/* ---- the API's model ---- */

/* A parsed POST /v1/credentials body:
 *   {"name":"github","value":"...",
 *    "scope":{"global":true} | {"project":true} | {"template":"node"} |
 *            {"sandbox":"<id>"} | {"metadata":{"k":"v"}}   (default project),
 *    "project":"p"            (admins only: another project's),
 *    "inject":{"hosts":["api.github.com","*.github.com"],
 *              "header":"Authorization","format":"Bearer {value}"},
 *    "rate_limit":{"requests":100,"per_seconds":60}}
 * A PUT (rotate) body has "value" and optionally "inject" and
 * "rate_limit" (replacing them; "rate_limit":null removes it). */
typedef struct al_cred_spec {
	al_cred c;	 /* name, scope, hosts, header, format, rate */
	int has_project; /* "project" named */
	char project[64];
	char scope_value[64];	     /* template or sandbox */
	json_object *scope_metadata; /* owned */
	int has_inject, has_rate;    /* (PUT) present */
	char *value;		     /* malloc'ed; wiped by _free */
	size_t value_len;
} al_cred_spec;

/* rotate: parse a PUT body. AL_EINVAL naming the field (never a value),
 * AL_ETOOBIG above AL_CRED_BODY_MAX. */
int al_cred_spec_parse(const char *buf, size_t len, int rotate,
		       al_cred_spec *out, al_err *err);
void al_cred_spec_free(al_cred_spec *s);

/* Insert spec for project (NULL with a global scope), sealing the
 * value; *out the new row's view. AL_EEXIST when that (project, name,
 * scope) exists; AL_ENOENT when a sandbox scope names no sandbox of
 * project, or a template scope no template project sees (its own or a
 * public one). */
int al_credential_create(al_db *db, const al_keyring *kr, const char *project,
			 const al_cred_spec *spec, json_object **out,
			 al_err *err);

/* Which rows a key may see: a member its project's; an admin also
 * global ones and any project's. */
typedef struct al_cred_who {
	const char *project; /* the key's */
	int admin;
} al_cred_who;

/* Views: {"id","name","project"(null: global),"scope":{...},
 * "inject":{"hosts","header","format"},"rate_limit","version",
 * "key_id"(master key),"created_at","updated_at"}; never the value. */
/* All visible to who; project_filter (admins; NULL: all visible). */
json_object *al_credential_list(al_db *db, const al_cred_who *who,
				const char *project_filter, al_err *err);
/* ref is an id or a name. A name resolves among who's project's and the
 * global ones; more than one match is AL_ESTATE (the message lists the
 * ids). AL_ENOENT when nothing visible matches; *hidden (if not NULL)
 * is set when ref names an existing credential who may not see (a
 * failed access to audit). *id gets the row's id. */
json_object *al_credential_get(al_db *db, const al_cred_who *who,
			       const char *ref, int *hidden,
			       char id[AL_CRED_ID_LEN + 1], al_err *err);
/* Rotate: new value sealed (version + 1) and the spec's inject /
 * rate_limit if present. Admins only for global rows (AL_EPERM).
 * Same resolution as _get. */
int al_credential_rotate(al_db *db, const al_keyring *kr,
			 const al_cred_who *who, const char *ref,
			 const al_cred_spec *spec, int *hidden,
			 json_object **out, al_err *err);
/* Delete; *out the deleted row's view. */
int al_credential_delete(al_db *db, const al_cred_who *who, const char *ref,
			 int *hidden, json_object **out, al_err *err);

/* Master key rotation step: re-seal up to batch rows not sealed with
 * kr->current (each in its own short statement, checked against the
 * row's version so a concurrent PUT wins); how many were re-sealed (0:
 * none left), or -1. */
long long al_credential_reseal(al_db *db, const al_keyring *kr, int batch,
			       al_err *err);
/* Key ids some row still uses: bit i of *used for key id i (< 64). */
int al_credential_keys_used(al_db *db, unsigned long long *used, al_err *err);

#endif
