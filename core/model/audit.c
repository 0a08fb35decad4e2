/* The credential audit log's SQL (see audit.h). */
#include "model/audit.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* rec as one JSON object for jsonb_to_recordset (absent = NULL). */
static json_object *rec_json(const al_audit_rec *r)
{
	json_object *o = json_object_new_object();
	const struct {
		const char *k, *v;
	} strs[] = {
		{"project", r->project},
		{"sandbox", r->sandbox},
		{"credential", r->credential},
		{"action", r->action},
		{"host", r->host},
		{"method", r->method},
		{"path", r->path},
		{"decision", r->decision},
		{"reason", r->reason},
	};
	for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
		if (strs[i].v != NULL)
			json_object_object_add(
				o, strs[i].k,
				json_object_new_string(strs[i].v));
	if (r->at_us > 0)
		json_object_object_add(o, "at_us",
				       json_object_new_int64(r->at_us));
	if (r->key_id > 0)
		json_object_object_add(o, "key_id",
				       json_object_new_int64(r->key_id));
	if (r->status >= 0)
		json_object_object_add(o, "status",
				       json_object_new_int(r->status));
	return o;
}

int al_audit_insert(al_db *db, const al_audit_rec *recs, size_t n, al_err *err)
{
	if (n == 0)
		return 0;
	json_object *arr = json_object_new_array();
	for (size_t i = 0; arr != NULL && i < n; i++) {
		if (recs[i].action == NULL) {
			json_object_put(arr);
			return al_err_set(err, AL_EINVAL, 0,
					  "audit record without an action");
		}
		json_object_array_add(arr, rec_json(&recs[i]));
	}
	if (arr == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	const char *params[] = {
		json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PLAIN)};
	/* One statement, one round trip, whatever the batch. */
	long long rows = al_db_exec_rows(
		db,
		"INSERT INTO audit_log (at, project, sandbox, key_id,"
		" credential, action, host, method, path, status, decision,"
		" reason)"
		" SELECT coalesce('epoch'::timestamptz + at_us *"
		" interval '1 microsecond', now()),"
		" project, sandbox, key_id, credential, action, host, method,"
		" path, status, decision, reason"
		" FROM jsonb_to_recordset($1::jsonb) AS x(at_us bigint,"
		" project text, sandbox text, key_id bigint, credential text,"
		" action text, host text, method text, path text,"
		" status integer, decision text, reason text)",
		1, params, err);
	json_object_put(arr);
	if (rows < 0) {
		al_err_wrap(err, "recording %zu audit rows", n);
		return -1;
	}
	return 0;
}

static const al_db_col cols[] = {
	{"id", AL_DB_INT},	{"at", AL_DB_STR},
	{"project", AL_DB_STR}, {"sandbox", AL_DB_STR},
	{"key_id", AL_DB_INT},	{"credential", AL_DB_STR},
	{"action", AL_DB_STR},	{"host", AL_DB_STR},
	{"method", AL_DB_STR},	{"path", AL_DB_STR},
	{"status", AL_DB_INT},	{"decision", AL_DB_STR},
	{"reason", AL_DB_STR},
};
#define NCOLS ((int)(sizeof cols / sizeof cols[0]))

int al_audit_list(al_db *db, const al_audit_filter *f, int limit,
		  const char *before, json_object **out,
		  char next[AL_AUDIT_CURSOR_MAX], al_err *err)
{
	char since[24] = "";
	next[0] = '\0';
	*out = NULL;
	al_db_page pg;
	if (al_db_page_start(&pg, before, limit, AL_AUDIT_LIST_MAX, err) < 0)
		return -1;
	if (f->since_us > 0)
		snprintf(since, sizeof since, "%" PRId64, f->since_us);
	const char *params[] = {
		f->project,
		f->credential,
		f->sandbox,
		since[0] ? since : NULL,
		pg.us[0] ? pg.us : NULL,
		pg.id[0] ? pg.id : NULL,
		pg.lim,
	};
	PGresult *res = al_db_exec(
		db,
		"SELECT id, to_char(at AT TIME ZONE 'UTC',"
		" 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), project, sandbox,"
		" key_id, credential, action, host, method, path, status,"
		" decision, reason, (extract(epoch FROM at) * 1000000)::bigint"
		" FROM audit_log WHERE ($1::text IS NULL OR project = $1)"
		" AND ($2::text IS NULL OR credential = $2)"
		" AND ($3::text IS NULL OR sandbox = $3)"
		" AND ($4::bigint IS NULL OR at >= 'epoch'::timestamptz +"
		" $4::bigint * interval '1 microsecond')"
		/* Exact µs: a float division could skip or repeat a row. */
		" AND ($5::bigint IS NULL OR (at, id) < ('epoch'::timestamptz +"
		" $5::bigint * interval '1 microsecond', $6::bigint))"
		" ORDER BY at DESC, id DESC LIMIT $7::int",
		7, params, err);
	if (res == NULL)
		return -1;
	int rows = PQntuples(res);
	json_object *arr = json_object_new_array();
	for (int i = 0; arr != NULL && i < rows && i < limit; i++) {
		json_object_array_add(arr, al_db_row_json(res, i, cols, NCOLS));
		if (i == limit - 1 && rows > limit)
			snprintf(next, AL_AUDIT_CURSOR_MAX, "%s-%s",
				 PQgetvalue(res, i, 13), PQgetvalue(res, i, 0));
	}
	PQclear(res);
	if (arr == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	*out = arr;
	return 0;
}

long long al_audit_prune(al_db *db, unsigned days, al_err *err)
{
	return al_db_prune_older(db, "audit_log", days, err);
}
