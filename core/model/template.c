/* template: templates and their versions, in PostgreSQL (the pool's
 * side, and the order both go in: core/template/versions.c). */
#include "model/template.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Advisory lock key of a template name: a 64-bit hash computed by the
 * server, salted so it cannot collide with the migration lock. */
#define LOCK_SQL                                                               \
	"SELECT pg_advisory_xact_lock(hashtextextended("                       \
	"'airlock-template:' || $1, 0))"

int al_template_lock(al_db *db, const char *name, al_err *err)
{
	if (al_db_begin(db, err) < 0)
		return -1;
	const char *p[] = {name};
	if (al_db_exec_rows(db, LOCK_SQL, 1, p, err) < 0) {
		al_db_rollback(db);
		return -1;
	}
	return 0;
}

static json_object *parse_json_col(PGresult *res, int col)
{
	if (PQgetisnull(res, 0, col))
		return NULL;
	return json_tokener_parse(PQgetvalue(res, 0, col));
}

int al_template_get_version(al_db *db, const char *name, int version,
			    al_template_version *out, al_err *err)
{
	memset(out, 0, sizeof *out);
	if (name == NULL || !al_id_valid(name))
		return al_err_set(err, AL_ENOENT, 0, "no template '%s'",
				  name != NULL ? name : "");
	if (version < 0)
		return al_err_set(err, AL_EINVAL, 0, "invalid version");
	char vbuf[16];
	snprintf(vbuf, sizeof vbuf, "%d", version);
	const char *p[] = {name, vbuf};
	PGresult *res = al_db_exec(
		db,
		"SELECT v.version, v.env::text, v.workdir, v.run_user,"
		" v.start_cmd::text, v.ready_cmd::text"
		" FROM template_versions v JOIN templates t ON t.name = v.name"
		" WHERE v.name = $1 AND v.version = CASE WHEN $2::int = 0"
		" THEN t.version ELSE $2::int END",
		2, p, err);
	if (res == NULL)
		return -1;
	if (PQntuples(res) != 1) {
		PQclear(res);
		if (version == 0)
			return al_err_set(err, AL_ENOENT, 0, "no template '%s'",
					  name);
		return al_err_set(err, AL_ENOENT, 0,
				  "template '%s' has no version %d", name,
				  version);
	}
	snprintf(out->name, sizeof out->name, "%s", name);
	out->version = atoi(PQgetvalue(res, 0, 0));
	snprintf(out->workdir, sizeof out->workdir, "%s",
		 PQgetvalue(res, 0, 2));
	snprintf(out->user, sizeof out->user, "%s", PQgetvalue(res, 0, 3));
	out->env = parse_json_col(res, 1);
	out->start = parse_json_col(res, 4);
	out->ready = parse_json_col(res, 5);
	PQclear(res);
	if (out->env == NULL ||
	    !json_object_is_type(out->env, json_type_object)) {
		al_template_version_free(out);
		return al_err_set(err, AL_EDB, 0,
				  "template %s: env is not an object", name);
	}
	return 0;
}

/* The integer sql (of one parameter, name) answers in its first row, 0
 * when it answers none, or -1. */
static int int_of_name(al_db *db, const char *sql, const char *name,
		       al_err *err)
{
	const char *p[] = {name};
	PGresult *res = al_db_exec(db, sql, 1, p, err);
	if (res == NULL)
		return -1;
	int v = PQntuples(res) == 1 ? atoi(PQgetvalue(res, 0, 0)) : 0;
	PQclear(res);
	return v;
}

int al_template_current_version(al_db *db, const char *name, al_err *err)
{
	return int_of_name(db, "SELECT version FROM templates WHERE name = $1",
			   name, err);
}

int al_template_first_version(al_db *db, const char *name, al_err *err)
{
	int first = int_of_name(db,
				"SELECT coalesce(min(version), 1)"
				" FROM template_versions WHERE name = $1",
				name, err);
	if (first < 0)
		return -1;
	return first > 0 ? first : 1;
}

int al_template_next_version(al_db *db, const char *name, al_err *err)
{
	int version = int_of_name(db,
				  "SELECT coalesce(max(version), 0) + 1"
				  " FROM template_versions WHERE name = $1",
				  name, err);
	if (version < 0)
		return -1;
	if (version == 0)
		return al_err_set(err, AL_EDB, 0, "template %s: bad version",
				  name);
	return version;
}

/* The version's fields as SQL parameters. */
static const char *json_or_null(json_object *o)
{
	return o != NULL
		       ? json_object_to_json_string_ext(o,
							JSON_C_TO_STRING_PLAIN)
		       : NULL;
}

int al_template_insert_version(al_db *db, const al_config *cfg,
			       const al_template_version *tv, int version,
			       const char *build_id, const char *airlockfile,
			       al_err *err)
{
	const char *name = tv->name;
	char vbuf[16], mem[24], pids[16], cpu[16], disk[16];
	snprintf(vbuf, sizeof vbuf, "%d", version);
	snprintf(mem, sizeof mem, "%llu",
		 (unsigned long long)(cfg->default_memory_bytes >> 20));
	snprintf(pids, sizeof pids, "%u", cfg->default_pids);
	snprintf(cpu, sizeof cpu, "%u", cfg->default_cpu_shares);
	snprintf(disk, sizeof disk, "%u", cfg->default_disk_mb);
	const char *p2[] = {name, vbuf, mem, pids, cpu, build_id, disk};
	/* Owner and visibility come from the build on the first version. A
	 * later one is an admin's build (public) or one of the owning
	 * project's, never of a public template. */
	long long wrote = al_db_exec_rows(
		db,
		"INSERT INTO templates (name, version, driver,"
		" memory_mb, pids, cpu_shares, disk_mb, project,"
		" public)"
		" SELECT $1, $2::int, 'ns', greatest($3::bigint, 1),"
		" greatest($4::int, 1), greatest($5::int, 1),"
		" greatest($7::int, 1), b.project, b.public"
		" FROM template_builds b WHERE b.id = $6"
		" ON CONFLICT (name) DO UPDATE SET version = $2::int"
		" WHERE excluded.public OR (NOT templates.public AND"
		" templates.project = excluded.project)",
		7, p2, err);
	if (wrote < 0)
		return -1;
	if (wrote != 1)
		return al_err_set(err, AL_EEXIST, 0,
				  "template name '%s' is taken by another "
				  "project or a public template",
				  name);
	const char *p3[] = {
		name,
		vbuf,
		build_id,
		airlockfile,
		tv->env != NULL ? json_or_null(tv->env) : "{}",
		tv->workdir[0] != '\0' ? tv->workdir : "/",
		tv->user[0] != '\0' ? tv->user : "root",
		json_or_null(tv->start),
		json_or_null(tv->ready),
	};
	PGresult *res =
		al_db_exec(db,
			   "INSERT INTO template_versions (name, version,"
			   " build_id, airlockfile, env, workdir, run_user,"
			   " start_cmd, ready_cmd) VALUES ($1, $2::int, $3, $4,"
			   " $5::jsonb, $6, $7, $8::jsonb, $9::jsonb)",
			   9, p3, err);
	if (res == NULL)
		return -1;
	PQclear(res);
	return 0;
}

int al_template_owner_get(al_db *db, const char *name, al_template_owner *out,
			  al_err *err)
{
	memset(out, 0, sizeof *out);
	if (name == NULL || !al_id_valid(name))
		return al_err_set(err, AL_ENOENT, 0, "no such template");
	al_template_row row;
	if (al_template_row_get(db, name, &row, err) < 0)
		return -1;
	*out = row.owner;
	return 0;
}

int al_template_may(const al_template_owner *o, const al_identity *who,
		    int change)
{
	if (who->role == AL_ROLE_ADMIN)
		return 1;
	if (o->public)
		return !change;
	return strcmp(o->project, who->project) == 0;
}

int al_template_access(al_db *db, const char *name, const al_identity *who,
		       int change, al_err *err)
{
	al_template_owner o;
	if (al_template_owner_get(db, name, &o, err) < 0)
		return -1;
	if (al_template_may(&o, who, 0) != 1)
		return al_err_set(err, AL_ENOENT, 0, "no template '%s'", name);
	if (change && al_template_may(&o, who, 1) != 1)
		return al_err_set(err, AL_EPERM, 0,
				  "template '%s' is public: only admin keys "
				  "can change it",
				  name);
	return 0;
}

json_object *al_template_list(al_db *db, const char *visible_to,
			      const char *project, al_err *err)
{
	const char *p[] = {visible_to, project};
	PGresult *res = al_db_exec(
		db,
		"SELECT name, version, driver, memory_mb, pids, cpu_shares,"
		" disk_mb, to_char(created_at AT TIME ZONE 'UTC',"
		" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), project, public"
		" FROM templates WHERE ($1::text IS NULL OR public"
		" OR project = $1) AND ($2::text IS NULL OR project = $2)"
		" ORDER BY name",
		2, p, err);
	if (res == NULL)
		return NULL;
	static const al_db_col cols[] = {
		{"name", AL_DB_STR},	{"version", AL_DB_INT},
		{"driver", AL_DB_STR},	{"memory_mb", AL_DB_INT},
		{"pids", AL_DB_INT},	{"cpu_shares", AL_DB_INT},
		{"disk_mb", AL_DB_INT}, {"created_at", AL_DB_STR},
		{"project", AL_DB_STR}, {"public", AL_DB_BOOL},
	};
	json_object *arr = al_db_rows_json(res, cols, 10);
	PQclear(res);
	return arr;
}

/* ---- warm pool bounds ---- */

#define POOL_COLUMNS "pool_ns_min, pool_ns_max, pool_vm_min, pool_vm_max"

/* The AL_POOL_NBOUNDS columns from col on: -1 for NULL. */
static void pool_bounds_get(const PGresult *res, int row, int col, int *out)
{
	for (int k = 0; k < AL_POOL_NBOUNDS; k++)
		out[k] = PQgetisnull(res, row, col + k)
				 ? -1
				 : atoi(PQgetvalue(res, row, col + k));
}

int al_template_pool_set(al_db *db, const char *name,
			 const al_json_setting u[AL_POOL_NBOUNDS], al_err *err)
{
	if (name == NULL || !al_id_valid(name))
		return al_err_set(err, AL_ENOENT, 0, "no such template");
	char vals[AL_POOL_NBOUNDS][24];
	const char *p[1 + 2 * AL_POOL_NBOUNDS];
	p[0] = name;
	/* Per bound: whether to change it ($2k) and the value ($2k+1, NULL
	 * = back to the default). */
	for (int k = 0; k < AL_POOL_NBOUNDS; k++) {
		snprintf(vals[k], sizeof vals[k], "%lld",
			 (long long)u[k].value);
		p[1 + 2 * k] = u[k].set ? "t" : "f";
		p[2 + 2 * k] = u[k].set && !u[k].is_null ? vals[k] : NULL;
	}
	long long n = al_db_exec_rows(
		db,
		"UPDATE templates SET"
		" pool_ns_min = CASE WHEN $2::boolean THEN $3::int"
		"  ELSE pool_ns_min END,"
		" pool_ns_max = CASE WHEN $4::boolean THEN $5::int"
		"  ELSE pool_ns_max END,"
		" pool_vm_min = CASE WHEN $6::boolean THEN $7::int"
		"  ELSE pool_vm_min END,"
		" pool_vm_max = CASE WHEN $8::boolean THEN $9::int"
		"  ELSE pool_vm_max END"
		" WHERE name = $1",
		1 + 2 * AL_POOL_NBOUNDS, p, err);
	if (n < 0)
		return -1;
	if (n != 1)
		return al_err_set(err, AL_ENOENT, 0, "no template '%s'", name);
	return 0;
}

int al_template_row_get(al_db *db, const char *name, al_template_row *out,
			al_err *err)
{
	memset(out, 0, sizeof *out);
	const char *p[] = {name};
	PGresult *res = al_db_exec(
		db,
		"SELECT driver, version, memory_mb, pids,"
		" cpu_shares, disk_mb, project, public, " POOL_COLUMNS
		" FROM templates WHERE name = $1",
		1, p, err);
	if (res == NULL)
		return -1;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return al_err_set(err, AL_ENOENT, 0, "no template '%s'", name);
	}
	snprintf(out->driver, sizeof out->driver, "%s", PQgetvalue(res, 0, 0));
	out->version = atoi(PQgetvalue(res, 0, 1));
	out->memory_mb = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
	out->pids = strtoll(PQgetvalue(res, 0, 3), NULL, 10);
	out->cpu_shares = strtoll(PQgetvalue(res, 0, 4), NULL, 10);
	out->disk_mb = strtoll(PQgetvalue(res, 0, 5), NULL, 10);
	snprintf(out->owner.project, sizeof out->owner.project, "%s",
		 PQgetvalue(res, 0, 6));
	out->owner.public = strcmp(PQgetvalue(res, 0, 7), "t") == 0;
	pool_bounds_get(res, 0, 8, out->pool);
	PQclear(res);
	return 0;
}

json_object *al_template_versions(al_db *db, const char *name, al_err *err)
{
	const char *p[] = {name};
	PGresult *res = al_db_exec(
		db,
		"SELECT version, build_id, to_char(created_at AT TIME ZONE"
		" 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
		" FROM template_versions WHERE name = $1 ORDER BY version",
		1, p, err);
	if (res == NULL)
		return NULL;
	static const al_db_col cols[] = {
		{"version", AL_DB_INT},
		{"build_id", AL_DB_STR},
		{"created_at", AL_DB_STR},
	};
	json_object *arr = al_db_rows_json(res, cols, 3);
	PQclear(res);
	if (arr == NULL)
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	return arr;
}

int al_template_refs(al_db *db, al_template_ref *out, int max, al_err *err)
{
	char lim[16];
	snprintf(lim, sizeof lim, "%d", max);
	const char *p[] = {lim};
	PGresult *res =
		al_db_exec(db,
			   "SELECT name, version, " POOL_COLUMNS
			   " FROM templates ORDER BY name LIMIT $1::int",
			   1, p, err);
	if (res == NULL)
		return -1;
	int n = PQntuples(res) < max ? PQntuples(res) : max;
	for (int i = 0; i < n; i++) {
		snprintf(out[i].name, sizeof out[i].name, "%s",
			 PQgetvalue(res, i, 0));
		out[i].version = atoi(PQgetvalue(res, i, 1));
		pool_bounds_get(res, i, 2, out[i].pool);
	}
	PQclear(res);
	return n;
}

int al_template_in_use(al_db *db, const char *name, al_err *err)
{
	if (name == NULL || !al_id_valid(name))
		return 0;
	const char *p[] = {name};
	PGresult *res = al_db_exec(db,
				   "SELECT 1 FROM sandboxes WHERE template = $1"
				   " AND state <> 'deleted' LIMIT 1",
				   1, p, err);
	if (res == NULL)
		return -1;
	int used = PQntuples(res) > 0;
	PQclear(res);
	return used;
}

int al_template_delete_rows(al_db *db, const char *name, al_err *err)
{
	if (name == NULL || !al_id_valid(name))
		return al_err_set(err, AL_ENOENT, 0, "no template '%s'",
				  name != NULL ? name : "");
	const char *p[] = {name};
	PGresult *res = al_db_exec(db,
				   "SELECT 1 FROM templates WHERE name = $1"
				   " FOR UPDATE",
				   1, p, err);
	if (res == NULL)
		return -1;
	int exists = PQntuples(res) == 1;
	PQclear(res);
	if (!exists)
		return al_err_set(err, AL_ENOENT, 0, "no template '%s'", name);
	int used = al_template_in_use(db, name, err);
	if (used < 0)
		return -1;
	if (used)
		return al_err_set(err, AL_ESTATE, 0,
				  "template '%s' is used by a sandbox; delete "
				  "its sandboxes first",
				  name);
	/* Builds are history: they stay. Versions go with the row. */
	res = al_db_exec(db, "DELETE FROM templates WHERE name = $1", 1, p,
			 err);
	if (res == NULL)
		return -1;
	PQclear(res);
	return 0;
}
