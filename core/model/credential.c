/* The credential store's SQL (see credential.h). */
#include "model/credential.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "base/config.h"
#include "model/auth.h"
#include "model/sandbox.h"
#include "model/template.h"

/* The columns of a view, in row_view's order. */
#define VIEW_COLS                                                              \
	"id, name, project, scope_kind, coalesce(scope_template,"              \
	" scope_sandbox, scope_metadata::text), array_to_string(hosts, ' '),"  \
	" header, format, rate_requests, rate_per_seconds, version, key_id,"   \
	" to_char(created_at AT TIME ZONE 'UTC',"                              \
	" 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), to_char(updated_at AT TIME ZONE"  \
	" 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"

static json_object *str_or_null(const PGresult *res, int i, int c)
{
	return PQgetisnull(res, i, c)
		       ? NULL
		       : json_object_new_string(PQgetvalue(res, i, c));
}

static json_object *scope_view(const char *kind, const char *value)
{
	json_object *s = json_object_new_object();
	int k = al_cred_scope_from_name(kind);
	json_object *v;
	if (k == AL_CRED_GLOBAL || k == AL_CRED_PROJECT)
		v = json_object_new_boolean(1);
	else if (k == AL_CRED_METADATA)
		v = json_tokener_parse(value);
	else
		v = json_object_new_string(value);
	json_object_object_add(s, kind, v);
	return s;
}

static json_object *row_view(const PGresult *res, int i)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "id", str_or_null(res, i, 0));
	json_object_object_add(o, "name", str_or_null(res, i, 1));
	json_object_object_add(o, "project", str_or_null(res, i, 2));
	json_object_object_add(o, "scope",
			       scope_view(PQgetvalue(res, i, 3),
					  PQgetvalue(res, i, 4)));
	json_object *inj = json_object_new_object();
	json_object *hosts = json_object_new_array();
	char *h = strdup(PQgetvalue(res, i, 5)), *save = NULL;
	for (char *t = h != NULL ? strtok_r(h, " ", &save) : NULL; t != NULL;
	     t = strtok_r(NULL, " ", &save))
		json_object_array_add(hosts, json_object_new_string(t));
	free(h);
	json_object_object_add(inj, "hosts", hosts);
	json_object_object_add(inj, "header", str_or_null(res, i, 6));
	json_object_object_add(inj, "format", str_or_null(res, i, 7));
	json_object_object_add(o, "inject", inj);
	json_object *rate = NULL;
	if (!PQgetisnull(res, i, 8)) {
		rate = json_object_new_object();
		json_object_object_add(
			rate, "requests",
			json_object_new_int(atoi(PQgetvalue(res, i, 8))));
		json_object_object_add(
			rate, "per_seconds",
			json_object_new_int(atoi(PQgetvalue(res, i, 9))));
	}
	json_object_object_add(o, "rate_limit", rate);
	json_object_object_add(o, "version",
			       json_object_new_int(atoi(PQgetvalue(res, i,
								   10))));
	json_object_object_add(o, "master_key",
			       json_object_new_int(atoi(PQgetvalue(res, i,
								   11))));
	json_object_object_add(o, "created_at", str_or_null(res, i, 12));
	json_object_object_add(o, "updated_at", str_or_null(res, i, 13));
	return o;
}

/* Hex of sealed bytes for bytea's decode(.., 'hex'); malloc'ed. */
static char *to_hex(const unsigned char *p, size_t n)
{
	char *s = malloc(2 * n + 1);
	size_t len = 0;
	if (s != NULL &&
	    OPENSSL_buf2hexstr_ex(s, 2 * n + 1, &len, p, n, '\0') != 1) {
		free(s);
		s = NULL;
	}
	return s;
}

/* Open the hex ciphertext of one row (id, version, key id). */
static int open_row(const al_keyring *kr, const char *id, const char *version,
		    int key_id, const char *hex, char **value, size_t *len,
		    al_err *err)
{
	size_t hn = strlen(hex), n = 0;
	unsigned char *ct = malloc(hn / 2 + 1);
	if (ct == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	if (OPENSSL_hexstr2buf_ex(ct, hn / 2 + 1, &n, hex, '\0') != 1) {
		free(ct);
		return al_err_set(err, AL_EDB, 0,
				  "credential %s: unreadable ciphertext", id);
	}
	char aad[AL_CRED_ID_LEN + 16];
	snprintf(aad, sizeof aad, "%s:%s", id, version);
	int rc = al_cred_open(kr, key_id, aad, ct, n, value, len, err);
	free(ct);
	if (rc < 0)
		al_err_wrap(err, "credential %s: ", id);
	return rc;
}

/* Seal value for (id, version): hex ciphertext and the key used. */
static char *seal_hex(const al_keyring *kr, const char *id, int version,
		      const char *value, size_t len, int *key_id, al_err *err)
{
	char aad[AL_CRED_ID_LEN + 16];
	snprintf(aad, sizeof aad, "%s:%d", id, version);
	unsigned char *ct = NULL;
	size_t n = 0;
	if (al_cred_seal(kr, aad, value, len, &ct, &n, key_id, err) < 0)
		return NULL;
	char *hex = to_hex(ct, n);
	free(ct);
	if (hex == NULL)
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	return hex;
}

int al_sandbox_ref_load(al_db *db, const char *id, al_sandbox_ref *out,
			al_err *err)
{
	memset(out, 0, sizeof *out);
	if (!al_id_valid(id))
		return al_err_set(err, AL_ENOENT, 0, "no such sandbox");
	const char *params[] = {id};
	PGresult *res = al_db_exec(db,
				   "SELECT project, template, metadata::text,"
				   " coalesce(created_by_key, 0) FROM sandboxes"
				   " WHERE id = $1 AND state <> 'deleted'",
				   1, params, err);
	if (res == NULL)
		return -1;
	int rc = 0;
	if (PQntuples(res) != 1) {
		rc = al_err_set(err, AL_ENOENT, 0, "no sandbox '%s'", id);
	} else {
		snprintf(out->id, sizeof out->id, "%s", id);
		snprintf(out->project, sizeof out->project, "%s",
			 PQgetvalue(res, 0, 0));
		snprintf(out->template_name, sizeof out->template_name, "%s",
			 PQgetvalue(res, 0, 1));
		out->metadata = json_tokener_parse(PQgetvalue(res, 0, 2));
		out->created_by_key = strtoll(PQgetvalue(res, 0, 3), NULL, 10);
	}
	PQclear(res);
	return rc;
}

/* The winner per name for sb: a project's row of the most specific
 * applicable scope, else a global one. Columns: id, name, scope_kind,
 * version, hosts, header, format, rate_requests, rate_per_seconds,
 * ciphertext (hex), key_id. */
static PGresult *effective_rows(al_db *db, const al_sandbox_ref *sb,
				al_err *err)
{
	const char *meta =
		sb->metadata != NULL
			? json_object_to_json_string_ext(sb->metadata,
							 JSON_C_TO_STRING_PLAIN)
			: "{}";
	const char *params[] = {sb->project, sb->template_name, sb->id, meta};
	return al_db_exec(
		db,
		"SELECT DISTINCT ON (name) id, name, scope_kind, version,"
		" array_to_string(hosts, ' '), coalesce(header, ''), format,"
		" coalesce(rate_requests, 0), coalesce(rate_per_seconds, 0),"
		" encode(ciphertext, 'hex'), key_id FROM credentials"
		" WHERE scope_kind = 'global' OR (project = $1 AND"
		" (scope_kind = 'project'"
		" OR (scope_kind = 'template' AND scope_template = $2)"
		" OR (scope_kind = 'sandbox' AND scope_sandbox = $3)"
		" OR (scope_kind = 'metadata' AND $4::jsonb @> scope_metadata)))"
		" ORDER BY name, CASE scope_kind WHEN 'sandbox' THEN 4"
		" WHEN 'metadata' THEN 3 WHEN 'template' THEN 2"
		" WHEN 'project' THEN 1 ELSE 0 END DESC,"
		" (SELECT count(*) FROM jsonb_object_keys(coalesce("
		" scope_metadata, '{}'::jsonb))) DESC, created_at, id",
		4, params, err);
}

static void row_to_cred(const PGresult *res, int i, al_cred *c)
{
	snprintf(c->id, sizeof c->id, "%s", PQgetvalue(res, i, 0));
	snprintf(c->name, sizeof c->name, "%s", PQgetvalue(res, i, 1));
	int k = al_cred_scope_from_name(PQgetvalue(res, i, 2));
	c->scope = k >= 0 ? (al_cred_scope)k : AL_CRED_GLOBAL;
	c->version = atoi(PQgetvalue(res, i, 3));
	char *h = strdup(PQgetvalue(res, i, 4)), *save = NULL;
	c->nhosts = 0;
	for (char *t = h != NULL ? strtok_r(h, " ", &save) : NULL;
	     t != NULL && c->nhosts < AL_CRED_HOSTS_MAX;
	     t = strtok_r(NULL, " ", &save))
		snprintf(c->hosts[c->nhosts++], sizeof c->hosts[0], "%s", t);
	free(h);
	snprintf(c->header, sizeof c->header, "%s", PQgetvalue(res, i, 5));
	snprintf(c->format, sizeof c->format, "%s", PQgetvalue(res, i, 6));
	c->rate_requests = atoi(PQgetvalue(res, i, 7));
	c->rate_per_seconds = atoi(PQgetvalue(res, i, 8));
}

int al_credential_effective(al_db *db, const al_keyring *kr,
			    const al_sandbox_ref *sb, al_cred_set *out,
			    al_err *err)
{
	memset(out, 0, sizeof *out);
	PGresult *res = effective_rows(db, sb, err);
	if (res == NULL)
		return -1;
	int rows = PQntuples(res), rc = 0;
	if (rows > 0 &&
	    (out->creds = calloc((size_t)rows, sizeof *out->creds)) == NULL)
		rc = al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	for (int i = 0; rc == 0 && i < rows; i++) {
		al_cred *c = &out->creds[i];
		row_to_cred(res, i, c);
		rc = open_row(kr, c->id, PQgetvalue(res, i, 3),
			      atoi(PQgetvalue(res, i, 10)),
			      PQgetvalue(res, i, 9), &c->value, &c->value_len,
			      err);
		if (rc == 0)
			out->n++;
	}
	/* The hex of ciphertexts only, but it held them: not left lying. */
	PQclear(res);
	if (rc < 0)
		al_cred_set_free(out);
	return rc;
}

int al_credential_names(al_db *db, const al_sandbox_ref *sb,
			char (**names)[AL_CRED_NAME_MAX + 1], size_t *n,
			al_err *err)
{
	*names = NULL;
	*n = 0;
	PGresult *res = effective_rows(db, sb, err);
	if (res == NULL)
		return -1;
	int rows = PQntuples(res);
	if (rows > 0 &&
	    (*names = calloc((size_t)rows, sizeof **names)) == NULL) {
		PQclear(res);
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	}
	for (int i = 0; i < rows; i++)
		snprintf((*names)[i], sizeof **names, "%s",
			 PQgetvalue(res, i, 1));
	*n = (size_t)rows;
	PQclear(res);
	return 0;
}

int al_credential_env_add(al_db *db, const al_sandbox_ref *sb, json_object *env,
			  al_err *err)
{
	char(*names)[AL_CRED_NAME_MAX + 1] = NULL;
	size_t n = 0;
	if (al_credential_names(db, sb, &names, &n, err) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char var[AL_CRED_ENV_MAX], ph[AL_CRED_NAME_MAX + 16];
		al_credential_env_name(names[i], var);
		snprintf(ph, sizeof ph, "airlock-cred:%s", names[i]);
		json_object_object_add(env, var, json_object_new_string(ph));
	}
	free(names);
	return 0;
}

/* ---- the API's model ---- */

/* text[] literal of the spec's hosts (canonical names: nothing to
 * quote). */
static void hosts_literal(const al_cred *c, char *out, size_t cap)
{
	size_t o = (size_t)snprintf(out, cap, "{");
	for (size_t i = 0; i < c->nhosts && o < cap; i++)
		o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? "," : "",
				      c->hosts[i]);
	if (o < cap)
		snprintf(out + o, cap - o, "}");
}

#define HOSTS_LIT_MAX (AL_CRED_HOSTS_MAX * (AL_CRED_HOST_MAX + 1) + 4)

/* A sandbox or template scope names an object project sees (a
 * template: its own or a public one); else the AL_ENOENT of an unknown
 * one, as any reference to another project's object is answered. A
 * scope nobody can match would be accepted and never apply. */
static int scope_seen(al_db *db, const char *project, const al_cred_spec *spec,
		      al_err *err)
{
	if (spec->c.scope == AL_CRED_SANDBOX) {
		al_sandbox sb;
		if (al_sandbox_get_in(db, spec->scope_value, project, &sb,
				      err) < 0)
			return -1;
		al_sandbox_free_fields(&sb);
	} else if (spec->c.scope == AL_CRED_TEMPLATE) {
		al_identity member = {.role = AL_ROLE_MEMBER};
		snprintf(member.project, sizeof member.project, "%s", project);
		return al_template_access(db, spec->scope_value, &member, 0,
					  err);
	}
	return 0;
}

int al_credential_create(al_db *db, const al_keyring *kr, const char *project,
			 const al_cred_spec *spec, json_object **out,
			 al_err *err)
{
	*out = NULL;
	const al_cred *c = &spec->c;
	if ((project == NULL) != (c->scope == AL_CRED_GLOBAL))
		return al_err_set(err, AL_EINTERNAL, 0,
				  "a credential is global or a project's");
	if (scope_seen(db, project, spec, err) < 0)
		return -1;
	unsigned char rnd[10];
	char id[AL_CRED_ID_LEN + 1];
	if (RAND_bytes(rnd, sizeof rnd) != 1)
		return al_err_set(err, AL_EINTERNAL, 0, "no randomness");
	int o = snprintf(id, sizeof id, "cr_");
	for (size_t i = 0; i < sizeof rnd; i++)
		o += snprintf(id + o, sizeof id - (size_t)o, "%02x", rnd[i]);
	int key_id = 0;
	char *hex = seal_hex(kr, id, 1, spec->value, spec->value_len, &key_id,
			     err);
	if (hex == NULL)
		return -1;
	char kid[16], rq[16], per[16], hosts[HOSTS_LIT_MAX];
	snprintf(kid, sizeof kid, "%d", key_id);
	snprintf(rq, sizeof rq, "%d", c->rate_requests);
	snprintf(per, sizeof per, "%d", c->rate_per_seconds);
	hosts_literal(c, hosts, sizeof hosts);
	const char *meta =
		spec->scope_metadata != NULL
			? json_object_to_json_string_ext(spec->scope_metadata,
							 JSON_C_TO_STRING_PLAIN)
			: NULL;
	const char *params[] = {
		id,
		project,
		c->name,
		al_cred_scope_name(c->scope),
		c->scope == AL_CRED_TEMPLATE ? spec->scope_value : NULL,
		c->scope == AL_CRED_SANDBOX ? spec->scope_value : NULL,
		c->scope == AL_CRED_METADATA ? meta : NULL,
		hosts,
		c->header[0] ? c->header : NULL,
		c->format,
		c->rate_requests > 0 ? rq : NULL,
		c->rate_requests > 0 ? per : NULL,
		hex,
		kid,
	};
	PGresult *res = al_db_exec(
		db,
		"INSERT INTO credentials (id, project, name, scope_kind,"
		" scope_template, scope_sandbox, scope_metadata, hosts, header,"
		" format, rate_requests, rate_per_seconds, ciphertext, key_id)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::text[], $9,"
		" $10, $11::int, $12::int, decode($13, 'hex'), $14::int)"
		" RETURNING " VIEW_COLS,
		14, params, err);
	free(hex);
	if (res == NULL) {
		if (err->code == AL_EEXIST)
			al_err_set(err, AL_EEXIST, 0,
				   "a credential '%s' with that scope exists"
				   " (PUT rotates it)",
				   c->name);
		return -1;
	}
	*out = row_view(res, 0);
	PQclear(res);
	return 0;
}

json_object *al_credential_list(al_db *db, const al_cred_who *who,
				const char *project_filter, al_err *err)
{
	/* Members: their project's and the global ones. Admins: all, or
	 * one project's (and the global ones). */
	const char *params[] = {who->admin ? "t" : "f", who->project,
				project_filter};
	PGresult *res = al_db_exec(
		db,
		"SELECT " VIEW_COLS " FROM credentials WHERE"
		" (project IS NULL OR ($3::text IS NULL AND $1::bool)"
		" OR project = coalesce($3, $2))"
		" ORDER BY project NULLS FIRST, name, scope_kind, id",
		3, params, err);
	if (res == NULL)
		return NULL;
	json_object *arr = json_object_new_array();
	for (int i = 0; i < PQntuples(res); i++)
		json_object_array_add(arr, row_view(res, i));
	PQclear(res);
	return arr;
}

/* Resolve ref for who: 0 with the row's view (and id, version, project
 * NULL-ness in *global), -1 AL_ENOENT / AL_ESTATE. */
static int resolve(al_db *db, const al_cred_who *who, const char *ref,
		   int *hidden, PGresult **row, al_err *err)
{
	if (hidden != NULL)
		*hidden = 0;
	*row = NULL;
	const char *params[] = {ref, who->admin ? "t" : "f", who->project};
	/* Visible by id: an admin any, a member its project's and the
	 * global ones. By name: the project's, else a global one. */
	PGresult *res = al_db_exec(
		db,
		"SELECT " VIEW_COLS
		", (id = $1 AND ($2::bool OR project IS NULL"
		" OR project = $3)) OR (name = $1 AND (project = $3 OR"
		" project IS NULL)) AS visible FROM credentials"
		" WHERE id = $1 OR name = $1"
		" ORDER BY (id = $1) DESC, project NULLS LAST, id",
		3, params, err);
	if (res == NULL)
		return -1;
	int rows = PQntuples(res), vis = -1, nvis = 0, in_project = 0;
	char ids[400] = "";
	for (int i = 0; i < rows; i++) {
		if (PQgetvalue(res, i, 14)[0] != 't')
			continue;
		int mine = !PQgetisnull(res, i, 2);
		/* A project's row hides a global one of the same name. */
		if (in_project && !mine)
			continue;
		if (mine && !in_project) {
			in_project = 1;
			nvis = 0;
			ids[0] = '\0';
		}
		size_t l = strlen(ids);
		snprintf(ids + l, sizeof ids - l, "%s%s", l ? ", " : "",
			 PQgetvalue(res, i, 0));
		if (nvis++ == 0)
			vis = i;
		if (strcmp(PQgetvalue(res, i, 0), ref) == 0) {
			nvis = 1; /* an id is never ambiguous */
			vis = i;
			break;
		}
	}
	if (vis < 0) {
		if (hidden != NULL)
			*hidden = rows > 0;
		PQclear(res);
		return al_err_set(err, AL_ENOENT, 0, "no credential '%s'", ref);
	}
	if (nvis > 1) {
		PQclear(res);
		return al_err_set(err, AL_ESTATE, 0,
				  "'%s' names more than one credential (%s):"
				  " use the id",
				  ref, ids);
	}
	/* Keep just that row: move it first by copying its result. */
	*row = res;
	return vis;
}

json_object *al_credential_get(al_db *db, const al_cred_who *who,
			       const char *ref, int *hidden,
			       char id[AL_CRED_ID_LEN + 1], al_err *err)
{
	PGresult *res = NULL;
	int i = resolve(db, who, ref, hidden, &res, err);
	if (i < 0)
		return NULL;
	if (id != NULL)
		snprintf(id, AL_CRED_ID_LEN + 1, "%s", PQgetvalue(res, i, 0));
	json_object *o = row_view(res, i);
	PQclear(res);
	return o;
}

/* Resolve ref for a change: a global row only for admins. */
static int resolve_write(al_db *db, const al_cred_who *who, const char *ref,
			 int *hidden, char id[AL_CRED_ID_LEN + 1], al_err *err)
{
	PGresult *res = NULL;
	int i = resolve(db, who, ref, hidden, &res, err);
	if (i < 0)
		return -1;
	int global = PQgetisnull(res, i, 2);
	snprintf(id, AL_CRED_ID_LEN + 1, "%s", PQgetvalue(res, i, 0));
	PQclear(res);
	if (global && !who->admin)
		return al_err_set(err, AL_EPERM, 0,
				  "only admin keys change global"
				  " credentials");
	return 0;
}

/* The view of a RETURNING statement's one row into *out, or AL_ENOENT
 * when the row was gone; frees res. */
static int take_view(PGresult *res, const char *ref, json_object **out,
		     al_err *err)
{
	if (res == NULL)
		return -1;
	int rc = 0;
	if (PQntuples(res) == 1)
		*out = row_view(res, 0);
	else
		rc = al_err_set(err, AL_ENOENT, 0, "no credential '%s'", ref);
	PQclear(res);
	return rc;
}

/* Seal spec's value for the row's next version and write it; the caller
 * holds a transaction, in which the row stays locked from the version
 * read to the write. */
static int rotate_locked(al_db *db, const al_keyring *kr, const char *id,
			 const char *ref, const al_cred_spec *spec,
			 json_object **out, al_err *err)
{
	const char *lock[] = {id};
	PGresult *res = al_db_exec(db,
				   "SELECT version FROM credentials"
				   " WHERE id = $1 FOR UPDATE",
				   1, lock, err);
	if (res == NULL)
		return -1;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return al_err_set(err, AL_ENOENT, 0, "no credential '%s'", ref);
	}
	int version = atoi(PQgetvalue(res, 0, 0)), key_id = 0;
	PQclear(res);
	char *hex = seal_hex(kr, id, version + 1, spec->value, spec->value_len,
			     &key_id, err);
	if (hex == NULL)
		return -1;
	const al_cred *c = &spec->c;
	char kid[16], rq[16], per[16], hosts[HOSTS_LIT_MAX];
	snprintf(kid, sizeof kid, "%d", key_id);
	snprintf(rq, sizeof rq, "%d", c->rate_requests);
	snprintf(per, sizeof per, "%d", c->rate_per_seconds);
	hosts_literal(c, hosts, sizeof hosts);
	const char *params[] = {
		id,
		hex,
		kid,
		spec->has_inject ? "t" : "f",
		hosts,
		c->header[0] ? c->header : NULL,
		c->format,
		spec->has_rate ? "t" : "f",
		c->rate_requests > 0 ? rq : NULL,
		c->rate_requests > 0 ? per : NULL,
	};
	res = al_db_exec(
		db,
		"UPDATE credentials SET ciphertext = decode($2, 'hex'),"
		" key_id = $3::int, version = version + 1,"
		" updated_at = now(),"
		" hosts = CASE WHEN $4::bool THEN $5::text[] ELSE hosts"
		" END,"
		" header = CASE WHEN $4::bool THEN $6 ELSE header END,"
		" format = CASE WHEN $4::bool THEN $7 ELSE format END,"
		" rate_requests = CASE WHEN $8::bool THEN $9::int"
		" ELSE rate_requests END,"
		" rate_per_seconds = CASE WHEN $8::bool THEN $10::int"
		" ELSE rate_per_seconds END"
		" WHERE id = $1 RETURNING " VIEW_COLS,
		10, params, err);
	free(hex);
	return take_view(res, ref, out, err);
}

int al_credential_rotate(al_db *db, const al_keyring *kr,
			 const al_cred_who *who, const char *ref,
			 const al_cred_spec *spec, int *hidden,
			 json_object **out, al_err *err)
{
	*out = NULL;
	char id[AL_CRED_ID_LEN + 1];
	if (resolve_write(db, who, ref, hidden, id, err) < 0)
		return -1;
	/* Two PUTs at once queue on the row's lock, so both succeed and
	 * the later one's value stays; a master-key reseal meanwhile
	 * finds the version moved and leaves the row alone. */
	if (al_db_begin(db, err) < 0)
		return -1;
	if (rotate_locked(db, kr, id, ref, spec, out, err) < 0 ||
	    al_db_commit(db, err) < 0) {
		al_db_rollback(db);
		json_object_put(*out);
		*out = NULL;
		return -1;
	}
	return 0;
}

int al_credential_delete(al_db *db, const al_cred_who *who, const char *ref,
			 int *hidden, json_object **out, al_err *err)
{
	*out = NULL;
	char id[AL_CRED_ID_LEN + 1];
	if (resolve_write(db, who, ref, hidden, id, err) < 0)
		return -1;
	const char *params[] = {id};
	PGresult *res = al_db_exec(db,
				   "DELETE FROM credentials WHERE id = $1"
				   " RETURNING " VIEW_COLS,
				   1, params, err);
	return take_view(res, ref, out, err);
}

long long al_credential_reseal(al_db *db, const al_keyring *kr, int batch,
			       al_err *err)
{
	char cur[16], lim[16];
	snprintf(cur, sizeof cur, "%d", kr->current);
	snprintf(lim, sizeof lim, "%d", batch);
	const char *params[] = {cur, lim};
	PGresult *res = al_db_exec(db,
				   "SELECT id, version, key_id,"
				   " encode(ciphertext, 'hex') FROM credentials"
				   " WHERE key_id <> $1::int ORDER BY id"
				   " LIMIT $2::int",
				   2, params, err);
	if (res == NULL)
		return -1;
	long long done = 0;
	int rows = PQntuples(res);
	for (int i = 0; i < rows; i++) {
		const char *id = PQgetvalue(res, i, 0);
		const char *ver = PQgetvalue(res, i, 1);
		char *value = NULL;
		size_t len = 0;
		int key_id = 0;
		if (open_row(kr, id, ver, atoi(PQgetvalue(res, i, 2)),
			     PQgetvalue(res, i, 3), &value, &len, err) < 0) {
			PQclear(res);
			return -1;
		}
		char *hex = seal_hex(kr, id, atoi(ver), value, len, &key_id,
				     err);
		al_secret_free(value, len);
		if (hex == NULL) {
			PQclear(res);
			return -1;
		}
		char kid[16];
		snprintf(kid, sizeof kid, "%d", key_id);
		/* A PUT meanwhile sealed a new version with the current key:
		 * nothing to do for that row. */
		const char *up[] = {id, ver, PQgetvalue(res, i, 2), hex, kid};
		long long n = al_db_exec_rows(
			db,
			"UPDATE credentials SET ciphertext = decode($4, 'hex'),"
			" key_id = $5::int WHERE id = $1 AND version = $2::int"
			" AND key_id = $3::int",
			5, up, err);
		free(hex);
		if (n < 0) {
			PQclear(res);
			return -1;
		}
		done += n;
	}
	PQclear(res);
	/* Rows skipped because a PUT won still count as progress. */
	return rows > 0 && done == 0 ? rows : done;
}

int al_credential_keys_used(al_db *db, unsigned long long *used, al_err *err)
{
	*used = 0;
	PGresult *res = al_db_exec(db,
				   "SELECT DISTINCT key_id FROM credentials", 0,
				   NULL, err);
	if (res == NULL)
		return -1;
	for (int i = 0; i < PQntuples(res); i++) {
		int k = atoi(PQgetvalue(res, i, 0));
		if (k > 0 && k < 64)
			*used |= 1ull << k;
	}
	PQclear(res);
	return 0;
}
