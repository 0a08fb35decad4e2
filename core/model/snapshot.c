/* Snapshot rows (snapshot.h). */
#include "model/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "model/sandbox_internal.h"
#include "model/sandbox_op.h"

#define SNAPSHOT_COLUMNS                                                       \
	"id, sandbox_id, project, kind, coalesce(name, ''), status, memory,"   \
	" driver, template, coalesce(template_version, 0), bytes,"             \
	" to_char(created_at AT TIME ZONE 'UTC',"                              \
	" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

static void copy_field(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src != NULL ? src : "");
}

static void row_to_snapshot(PGresult *res, int i, al_snapshot *out)
{
	memset(out, 0, sizeof *out);
	copy_field(out->id, sizeof out->id, PQgetvalue(res, i, 0));
	copy_field(out->sandbox_id, sizeof out->sandbox_id,
		   PQgetvalue(res, i, 1));
	copy_field(out->project, sizeof out->project, PQgetvalue(res, i, 2));
	copy_field(out->kind, sizeof out->kind, PQgetvalue(res, i, 3));
	copy_field(out->name, sizeof out->name, PQgetvalue(res, i, 4));
	copy_field(out->status, sizeof out->status, PQgetvalue(res, i, 5));
	out->memory = strcmp(PQgetvalue(res, i, 6), "t") == 0;
	copy_field(out->driver, sizeof out->driver, PQgetvalue(res, i, 7));
	copy_field(out->template_name, sizeof out->template_name,
		   PQgetvalue(res, i, 8));
	out->template_version = atoi(PQgetvalue(res, i, 9));
	out->bytes = strtoll(PQgetvalue(res, i, 10), NULL, 10);
	copy_field(out->created_at, sizeof out->created_at,
		   PQgetvalue(res, i, 11));
}

int al_snapshot_insert_pending(al_db *db, const char *id, const al_sandbox *sb,
			       const char *kind, const char *name, al_err *err)
{
	if (!al_id_valid(id) || !al_id_valid(sb->id))
		return al_err_set(err, AL_EINVAL, 0, "invalid snapshot id");
	char ver[16];
	snprintf(ver, sizeof ver, "%d", sb->template_version);
	const char *params[] = {
		id,
		sb->id,
		sb->project,
		kind,
		name,
		sb->driver,
		sb->template_name,
		sb->template_version > 0 ? ver : NULL,
	};
	PGresult *res = al_db_exec(
		db,
		"INSERT INTO snapshots (id, sandbox_id, project, kind, name,"
		" driver, template, template_version)"
		" SELECT $1, $2, $3, $4, $5, $6, $7, $8::int"
		" WHERE $4 <> 'named' OR (SELECT count(*) FROM snapshots"
		" WHERE sandbox_id = $2 AND kind = 'named')"
		" < " AL_SNAPSHOTS_PER_SANDBOX_STR,
		8, params, err);
	if (res == NULL)
		return -1;
	int added = strcmp(PQcmdTuples(res), "1") == 0;
	PQclear(res);
	if (!added)
		return al_err_set(
			err, AL_EQUOTA, 0,
			"sandbox %s keeps %d named snapshots already, "
			"the most one may: delete one first",
			sb->id, AL_SNAPSHOTS_PER_SANDBOX);
	return 0;
}

static int mark_ready(al_db *db, const char *id, long long bytes, int memory,
		      al_err *err)
{
	char b[24];
	snprintf(b, sizeof b, "%lld", bytes);
	const char *params[] = {id, b, memory < 0 ? NULL : memory ? "t" : "f"};
	PGresult *res = al_db_exec(db,
				   "UPDATE snapshots SET status = 'ready',"
				   " bytes = $2::bigint,"
				   " memory = coalesce($3::boolean, memory)"
				   " WHERE id = $1",
				   3, params, err);
	if (res == NULL)
		return -1;
	PQclear(res);
	return 0;
}

int al_snapshot_mark_ready(al_db *db, const char *id, long long bytes,
			   int memory, al_err *err)
{
	return mark_ready(db, id, bytes, memory, err);
}

int al_snapshot_list_of(al_db *db, const char *sb_id, const char *project,
			json_object **out, al_err *err)
{
	const char *params[] = {sb_id, project};
	PGresult *res = al_db_exec(
		db,
		"SELECT " SNAPSHOT_COLUMNS " FROM snapshots"
		" WHERE sandbox_id = $1 AND ($2::text IS NULL OR project = $2)"
		" ORDER BY created_at, id",
		2, params, err);
	if (res == NULL)
		return -1;
	json_object *arr = json_object_new_array();
	for (int i = 0; arr != NULL && i < PQntuples(res); i++) {
		al_snapshot s;
		row_to_snapshot(res, i, &s);
		json_object_array_add(arr, al_snapshot_to_json(&s));
	}
	PQclear(res);
	if (arr == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	*out = arr;
	return 0;
}

int al_snapshot_commit_suspend(al_db *db, const char *sb_id, const char *id,
			       long long bytes, int memory, al_err *err)
{
	const char *p2[] = {sb_id, id};
	if (al_db_begin(db, err) < 0)
		return -1;
	if (mark_ready(db, id, bytes, memory, err) < 0)
		goto fail;
	PGresult *res = al_db_exec(db,
				   "UPDATE sandboxes SET resume_snapshot = $2"
				   " WHERE id = $1",
				   2, p2, err);
	if (res == NULL)
		goto fail;
	PQclear(res);
	if (al_sandbox_op_end_locked(db, sb_id, AL_OP_SUSPENDING, AL_EV_SUSPEND,
				     id, 0, err) < 0 ||
	    al_db_commit(db, err) < 0)
		goto fail;
	return 0;
fail:
	al_db_rollback(db);
	return -1;
}

int al_snapshot_list_unneeded(al_db *db, char (*ids)[64], int max, int *n,
			      al_err *err)
{
	*n = 0;
	char lim[16];
	snprintf(lim, sizeof lim, "%d", max);
	const char *params[] = {lim};
	PGresult *res = al_db_exec(
		db,
		"SELECT p.id FROM snapshots p JOIN sandboxes s"
		" ON s.id = p.sandbox_id WHERE p.kind <> 'named'"
		" AND (s.state = 'deleted'"
		/* A suspend's snapshot once a newer suspend superseded it:
		 * only the one it resumes from is needed. */
		" OR (p.kind = 'suspend' AND p.status = 'ready'"
		" AND s.op IS NULL AND s.resume_snapshot IS NOT NULL"
		" AND p.id <> s.resume_snapshot AND p.created_at <"
		" (SELECT created_at FROM snapshots WHERE id = s.resume_snapshot)))"
		" ORDER BY p.created_at LIMIT $1::int",
		1, params, err);
	if (res == NULL)
		return -1;
	for (int i = 0; i < PQntuples(res) && *n < max; i++)
		snprintf(ids[(*n)++], 64, "%s", PQgetvalue(res, i, 0));
	PQclear(res);
	return 0;
}

/* "{a,b,...}": a PostgreSQL array literal of n ids (al_id_valid: no
 * quoting needed) or numbers; NULL when out of memory. */
static char *array_literal(char (*ids)[64], const long *nums, int n)
{
	size_t cap = 3 + (size_t)n * 65;
	char *s = malloc(cap);
	if (s == NULL)
		return NULL;
	size_t len = 0;
	s[len++] = '{';
	for (int i = 0; i < n; i++) {
		int w = ids != NULL ? snprintf(s + len, cap - len, "%s%s",
					       i > 0 ? "," : "", ids[i])
				    : snprintf(s + len, cap - len, "%s%ld",
					       i > 0 ? "," : "", nums[i]);
		len += (size_t)w;
	}
	snprintf(s + len, cap - len, "}");
	return s;
}

int al_snapshot_list_expired(al_db *db, char (*sb_ids)[64], const long *keep_s,
			     int n, char (*ids)[64], int max, int *got,
			     al_err *err)
{
	*got = 0;
	if (n == 0)
		return 0;
	for (int i = 0; i < n; i++)
		if (!al_id_valid(sb_ids[i]))
			return al_err_set(err, AL_EINVAL, 0,
					  "invalid sandbox id");
	char *a = array_literal(sb_ids, NULL, n);
	char *k = array_literal(NULL, keep_s, n);
	char lim[16];
	snprintf(lim, sizeof lim, "%d", max);
	const char *params[] = {a, k, lim};
	PGresult *res =
		a == NULL || k == NULL
			? NULL
			: al_db_exec(
				  db,
				  "SELECT p.id FROM snapshots p"
				  " JOIN unnest($1::text[], $2::bigint[])"
				  " AS k(sid, keep) ON p.sandbox_id = k.sid"
				  " JOIN sandboxes s ON s.id = p.sandbox_id"
				  " WHERE k.keep > 0"
				  " AND p.kind IN ('rolling', 'fork')"
				  " AND p.status = 'ready'"
				  " AND p.created_at < now() - make_interval("
				  "secs => k.keep::double precision)"
				  " AND s.op IS NULL AND s.state <> 'deleted'"
				  " AND NOT EXISTS (SELECT 1 FROM sandboxes r"
				  " WHERE r.resume_snapshot = p.id"
				  " AND r.state IN ('suspended', 'creating'))"
				  " ORDER BY p.created_at, p.id LIMIT $3::int",
				  3, params, err);
	if (res == NULL && (a == NULL || k == NULL))
		al_err_set(err, AL_ENOMEM, 0, "out of memory");
	free(a);
	free(k);
	if (res == NULL)
		return -1;
	for (int i = 0; i < PQntuples(res) && *got < max; i++)
		snprintf(ids[(*got)++], 64, "%s", PQgetvalue(res, i, 0));
	PQclear(res);
	return 0;
}

/* The newest snapshot of sb_id in status into id ("" for none). */
static int newest_of(al_db *db, const char *sb_id, const char *status, char *id,
		     al_err *err)
{
	id[0] = '\0';
	const char *params[] = {sb_id, status};
	PGresult *res =
		al_db_exec(db,
			   "SELECT id FROM snapshots WHERE sandbox_id = $1"
			   " AND status = $2"
			   " ORDER BY created_at DESC, id LIMIT 1",
			   2, params, err);
	if (res == NULL)
		return -1;
	if (PQntuples(res) == 1)
		snprintf(id, 64, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return 0;
}

int al_snapshot_pending_of(al_db *db, const char *sb_id, char *id, al_err *err)
{
	return newest_of(db, sb_id, "pending", id, err);
}

int al_snapshot_latest_of(al_db *db, const char *sb_id, char *id, al_err *err)
{
	return newest_of(db, sb_id, "ready", id, err);
}

int al_snapshot_recover(al_db *db, const char *sb_id, const char *id,
			al_err *err)
{
	char why[160];
	snprintf(why, sizeof why,
		 "its machine was lost; recovered from snapshot %s", id);
	const char *params[] = {sb_id, id};
	if (al_db_begin(db, err) < 0)
		return -1;
	if (al_sandbox_transition_locked(db, sb_id, AL_EV_SUSPEND, why, 0,
					 err) < 0)
		goto fail;
	PGresult *res = al_db_exec(db,
				   "UPDATE sandboxes SET resume_snapshot = $2,"
				   " recovered_from = $2, op = NULL,"
				   " op_started_at = NULL WHERE id = $1",
				   2, params, err);
	if (res == NULL)
		goto fail;
	PQclear(res);
	if (al_db_commit(db, err) < 0)
		goto fail;
	return 0;
fail:
	al_db_rollback(db);
	return -1;
}

int al_snapshot_delete_row(al_db *db, const char *id, al_err *err)
{
	const char *params[] = {id};
	PGresult *res = al_db_exec(
		db,
		"WITH u AS (UPDATE sandboxes SET resume_snapshot = NULL"
		" WHERE resume_snapshot = $1)"
		" DELETE FROM snapshots WHERE id = $1",
		1, params, err);
	if (res == NULL)
		return -1;
	PQclear(res);
	return 0;
}

int al_snapshot_known(al_db *db, const char *id, al_err *err)
{
	const char *params[] = {id};
	PGresult *res = al_db_exec(db, "SELECT 1 FROM snapshots WHERE id = $1",
				   1, params, err);
	if (res == NULL)
		return -1;
	int known = PQntuples(res) == 1;
	PQclear(res);
	return known;
}

int al_snapshot_get_in(al_db *db, const char *id, const char *project,
		       al_snapshot *out, al_err *err)
{
	if (!al_id_valid(id))
		return al_err_set(err, AL_ENOENT, 0, "no such snapshot");
	const char *params[] = {id, project};
	PGresult *res = al_db_exec(db,
				   "SELECT " SNAPSHOT_COLUMNS " FROM snapshots"
				   " WHERE id = $1"
				   " AND ($2::text IS NULL OR project = $2)",
				   2, params, err);
	if (res == NULL)
		return -1;
	int rc = 0;
	if (PQntuples(res) != 1)
		rc = al_err_set(err, AL_ENOENT, 0, "no snapshot '%s'", id);
	else
		row_to_snapshot(res, 0, out);
	PQclear(res);
	return rc;
}

json_object *al_snapshot_to_json(const al_snapshot *s)
{
	json_object *o = json_object_new_object();
	if (o == NULL)
		return NULL;
	json_object_object_add(o, "id", json_object_new_string(s->id));
	json_object_object_add(o, "sandbox_id",
			       json_object_new_string(s->sandbox_id));
	json_object_object_add(o, "kind", json_object_new_string(s->kind));
	json_object_object_add(o, "name",
			       s->name[0] != '\0'
				       ? json_object_new_string(s->name)
				       : NULL);
	json_object_object_add(o, "status", json_object_new_string(s->status));
	json_object_object_add(o, "memory", json_object_new_boolean(s->memory));
	json_object_object_add(o, "driver", json_object_new_string(s->driver));
	json_object_object_add(o, "template",
			       json_object_new_string(s->template_name));
	json_object_object_add(o, "bytes", json_object_new_int64(s->bytes));
	json_object_object_add(o, "created_at",
			       json_object_new_string(s->created_at));
	return o;
}
