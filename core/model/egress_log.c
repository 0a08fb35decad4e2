/* The egress log's SQL (see egress_log.h). */
#include "model/egress_log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"

/* What a record's place adds to its line: ,"seq":<20>,"idx":<10>} */
#define PLACE_MAX 48

int al_egress_log_insert(al_db *db, const al_egress_rec *recs, size_t n,
			 al_err *err)
{
	if (n == 0)
		return 0;
	/* One JSON array of the records' own lines, each with its place
	 * (seq, idx) added: one round trip. */
	size_t cap = n * (AL_EGRESS_LINE_MAX + PLACE_MAX) + 2;
	char *arr = malloc(cap);
	if (arr == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	size_t len = 0;
	arr[len++] = '[';
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			arr[len++] = ',';
		int k = al_egress_pack(&recs[i], arr + len, cap - len, err);
		if (k < 0) {
			free(arr);
			return -1;
		}
		/* Its closing brace (before the newline) opens again. */
		len += (size_t)k - 2;
		int w = snprintf(arr + len, cap - len,
				 ",\"seq\":%" PRIu64 ",\"idx\":%u}",
				 recs[i].seq, recs[i].idx);
		if (w < 0 || (size_t)w >= cap - len) {
			free(arr);
			return al_err_set(err, AL_EINTERNAL, 0,
					  "egress record too long");
		}
		len += (size_t)w;
	}
	arr[len++] = ']';
	arr[len] = '\0';
	const char *params[] = {arr};
	long long rows = al_db_exec_rows(
		db,
		"WITH ins AS (INSERT INTO egress_log (sandbox_id, at, allow,"
		" reason, protocol, name, port, method, path, dropped, seq,"
		" idx)"
		" SELECT sandbox, to_timestamp(at_ms / 1000.0), allow, reason,"
		" protocol, name, port, nullif(method, ''), nullif(path, ''),"
		" coalesce(dropped, 0), seq, idx"
		" FROM jsonb_to_recordset($1::jsonb) AS x(at_ms bigint,"
		" sandbox text, allow boolean, reason text, protocol text,"
		" name text, port integer, method text, path text,"
		" dropped bigint, seq bigint, idx integer)"
		/* A file read again after a crash between its commit and
		 * its unlink: its rows are there, and counted, already. */
		" ON CONFLICT (sandbox_id, seq, idx) DO NOTHING"
		" RETURNING sandbox_id, allow, dropped)"
		/* The counts in the same statement: never off by a batch. */
		" INSERT INTO egress_counts (sandbox_id, allowed, denied,"
		" dropped)"
		" SELECT sandbox_id, count(*) FILTER (WHERE allow),"
		" count(*) FILTER (WHERE NOT allow AND dropped = 0),"
		" sum(dropped) FROM ins GROUP BY sandbox_id"
		" ON CONFLICT (sandbox_id) DO UPDATE SET"
		" allowed = egress_counts.allowed + EXCLUDED.allowed,"
		" denied = egress_counts.denied + EXCLUDED.denied,"
		" dropped = egress_counts.dropped + EXCLUDED.dropped",
		1, params, err);
	free(arr);
	if (rows < 0) {
		al_err_wrap(err, "recording %zu egress decisions", n);
		return -1;
	}
	return 0;
}

int al_egress_log_list(al_db *db, const char *sandbox, int limit,
		       const char *before, json_object **out,
		       char next[AL_EGRESS_CURSOR_MAX], al_err *err)
{
	next[0] = '\0';
	*out = NULL;
	al_db_page pg;
	if (al_db_page_start(&pg, before, limit, AL_EGRESS_LIST_MAX, err) < 0)
		return -1;
	const char *params[] = {sandbox, pg.us[0] ? pg.us : NULL,
				pg.id[0] ? pg.id : NULL, pg.lim};
	PGresult *res = al_db_exec(
		db,
		"SELECT to_char(at AT TIME ZONE 'UTC',"
		" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
		" allow, reason, protocol, name, port, coalesce(method, ''),"
		" coalesce(path, ''), dropped,"
		" (extract(epoch FROM at) * 1000000)::bigint, id"
		" FROM egress_log WHERE sandbox_id = $1"
		/* Exact µs: a float division could skip or repeat a row. */
		" AND ($2::bigint IS NULL OR (at, id) < ('epoch'::timestamptz +"
		" $2::bigint * interval '1 microsecond', $3::bigint))"
		" ORDER BY at DESC, id DESC LIMIT $4::int",
		4, params, err);
	if (res == NULL)
		return -1;
	json_object *arr = json_object_new_array();
	int rows = PQntuples(res);
	for (int i = 0; arr != NULL && i < rows && i < limit; i++) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "at",
				       json_object_new_string(PQgetvalue(res, i,
									 0)));
		json_object_object_add(
			o, "allow",
			json_object_new_boolean(PQgetvalue(res, i, 1)[0] ==
						't'));
		json_object_object_add(o, "reason",
				       json_object_new_string(PQgetvalue(res, i,
									 2)));
		json_object_object_add(o, "protocol",
				       json_object_new_string(PQgetvalue(res, i,
									 3)));
		json_object_object_add(o, "name",
				       json_object_new_string(PQgetvalue(res, i,
									 4)));
		json_object_object_add(
			o, "port",
			json_object_new_int(atoi(PQgetvalue(res, i, 5))));
		if (PQgetvalue(res, i, 6)[0] != '\0')
			json_object_object_add(
				o, "method",
				json_object_new_string(PQgetvalue(res, i, 6)));
		if (PQgetvalue(res, i, 7)[0] != '\0')
			json_object_object_add(
				o, "path",
				json_object_new_string(PQgetvalue(res, i, 7)));
		long long dropped = strtoll(PQgetvalue(res, i, 8), NULL, 10);
		if (dropped > 0)
			json_object_object_add(o, "dropped",
					       json_object_new_int64(dropped));
		json_object_array_add(arr, o);
		if (i == limit - 1 && rows > limit)
			snprintf(next, AL_EGRESS_CURSOR_MAX, "%s-%s",
				 PQgetvalue(res, i, 9), PQgetvalue(res, i, 10));
	}
	PQclear(res);
	if (arr == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	*out = arr;
	return 0;
}

int al_egress_log_counts(al_db *db, const char *sandbox, al_egress_counts *out,
			 al_err *err)
{
	memset(out, 0, sizeof *out);
	const char *params[] = {sandbox};
	PGresult *res = al_db_exec(db,
				   "SELECT allowed, denied, dropped FROM"
				   " egress_counts WHERE sandbox_id = $1",
				   1, params, err);
	if (res == NULL)
		return -1;
	if (PQntuples(res) == 1) {
		out->allowed = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
		out->denied = strtoull(PQgetvalue(res, 0, 1), NULL, 10);
		out->dropped = strtoull(PQgetvalue(res, 0, 2), NULL, 10);
	}
	PQclear(res);
	return 0;
}

long long al_egress_log_prune(al_db *db, unsigned days, al_err *err)
{
	return al_db_prune_older(db, "egress_log", days, err);
}
