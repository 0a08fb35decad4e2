/* The sandbox model's SQL: rows, transitions and their events. What
 * needs no database is apart, so that a program without a database
 * connection (the shim) does not link this: the lifecycle table in
 * sandbox_state.c, a row's fields, API JSON and ids in sandbox_row.c. */
#include "model/sandbox.h"
#include "model/sandbox_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/capacity.h"
#include "base/config.h"
#include "base/json.h"
#include "base/log.h"
#include "model/sandbox_state.h"

/* The same as the column's default in core/model/sql/008_network.sql. */
#define AL_SANDBOX_NETWORK_DEFAULT                                             \
	"'{\"mode\":\"allowlist\",\"allow\":[],\"deny\":[]}'::jsonb"

static const char *plain_json(json_object *o)
{
	return json_object_to_json_string_ext(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

int al_sandbox_insert(al_db *db, const al_sandbox *sb, int timeout_s,
		      al_err *err)
{
	char mem[24], pids[16], cpu[16], tmo[16], disk[24], millis[16];

	if (!al_id_valid(sb->id))
		return al_err_set(err, AL_EINVAL, 0, "invalid sandbox id");
	if (!al_id_valid(sb->project))
		return al_err_set(err, AL_EINVAL, 0, "invalid project");
	if (timeout_s <= 0)
		return al_err_set(err, AL_EINVAL, 0, "timeout must be > 0");
	snprintf(mem, sizeof mem, "%" PRIu64, sb->limits.memory_bytes);
	snprintf(pids, sizeof pids, "%" PRIu32, sb->limits.pids_max);
	snprintf(cpu, sizeof cpu, "%" PRIu32, sb->limits.cpu_shares);
	snprintf(tmo, sizeof tmo, "%d", timeout_s);
	snprintf(disk, sizeof disk, "%" PRIu64, sb->limits.disk_bytes);
	snprintf(millis, sizeof millis, "%" PRIu32, sb->limits.cpu_millis);
	if (sb->limits.disk_bytes == 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "sandbox %s has no disk limit", sb->id);
	if (sb->limits.cpu_millis == 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "sandbox %s has no CPU limit", sb->id);
	const char *env = sb->env != NULL ? plain_json(sb->env) : "{}";
	const char *meta = sb->metadata != NULL ? plain_json(sb->metadata)
						: "{}";
	if (sb->accel[0] != '\0' && strcmp(sb->accel, "kvm") != 0 &&
	    strcmp(sb->accel, "tcg") != 0)
		return al_err_set(err, AL_EINVAL, 0, "unknown accelerator");
	char ver[16], key[24];
	snprintf(ver, sizeof ver, "%d", sb->template_version);
	snprintf(key, sizeof key, "%lld", sb->created_by_key);
	const char *params[] = {
		sb->id,
		sb->template_name,
		sb->driver,
		mem,
		pids,
		cpu,
		env,
		meta,
		tmo,
		/* NULL for drivers without an accelerator */
		sb->accel[0] != '\0' ? sb->accel : NULL,
		disk,
		sb->project,
		/* The version the shim is told to run (al_shim_spec_pack);
		 * unknown (0): the template's current one. */
		sb->template_version > 0 ? ver : NULL,
		sb->network != NULL ? plain_json(sb->network) : NULL,
		sb->created_by_key > 0 ? key : NULL,
		millis,
		sb->resume_snapshot[0] != '\0' ? sb->resume_snapshot : NULL,
		sb->on_timeout_suspend ? "suspend" : "delete",
		sb->auto_resume ? "t" : "f",
	};
	/* The row and its first event in one statement, so one commit. */
	PGresult *res = al_db_exec(
		db,
		"WITH s AS (INSERT INTO sandboxes (id, template, driver, state,"
		" memory_bytes, pids_max, cpu_shares, env, metadata,"
		" created_at, expires_at, updated_at, accel, template_version,"
		" disk_bytes, project, network, created_by_key, cpu_millis,"
		" resume_snapshot, on_timeout, auto_resume)"
		" VALUES ($1, $2, $3, 'creating', $4, $5, $6, $7::jsonb,"
		" $8::jsonb, now(), now() + make_interval(secs => $9::int),"
		" now(), $10,"
		/* The sandbox keeps its version whatever is built later. */
		" coalesce($13::int,"
		" (SELECT version FROM templates WHERE name = $2)), $11, $12,"
		/* NULL: the column's default (allowlist, empty lists). */
		" coalesce($14::jsonb, " AL_SANDBOX_NETWORK_DEFAULT "),"
		" $15::bigint, $16::int, $17, $18, $19::boolean)"
		" RETURNING id)"
		" INSERT INTO sandbox_events (sandbox_id, from_state, to_state,"
		" event) SELECT id, NULL, 'creating', 'create' FROM s",
		19, params, err);
	if (res == NULL) {
		al_err_wrap(err, "inserting sandbox %s", sb->id);
		return -1;
	}
	PQclear(res);
	return 0;
}

#define SANDBOX_COLUMNS                                                         \
	"id, template, driver, state, coalesce(error, ''),"                     \
	" memory_bytes, pids_max, cpu_shares, env::text, metadata::text,"       \
	" coalesce(shim_pid, 0),"                                               \
	" to_char(created_at AT TIME ZONE 'UTC',"                               \
	" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"                                \
	" to_char(expires_at AT TIME ZONE 'UTC',"                               \
	" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"                                \
	" coalesce(accel, ''), coalesce(template_version, 0), disk_bytes,"      \
	" project, network::text, cpu_millis, coalesce(op, ''),"                \
	" to_char(last_activity_at AT TIME ZONE 'UTC',"                         \
	" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), coalesce(resume_snapshot, '')," \
	" coalesce(recovered_from, ''), on_timeout = 'suspend', auto_resume"

static void copy_field(char *dst, size_t dstlen, const char *src)
{
	snprintf(dst, dstlen, "%s", src != NULL ? src : "");
}

/* Fill out from row i of a SANDBOX_COLUMNS result. */
static int row_to_sandbox(PGresult *res, int i, al_sandbox *out, al_err *err)
{
	memset(out, 0, sizeof *out);
	copy_field(out->id, sizeof out->id, PQgetvalue(res, i, 0));
	copy_field(out->template_name, sizeof out->template_name,
		   PQgetvalue(res, i, 1));
	copy_field(out->driver, sizeof out->driver, PQgetvalue(res, i, 2));
	int st = al_state_from_name(PQgetvalue(res, i, 3));
	if (st < 0)
		return al_err_set(err, AL_EDB, 0, "sandbox %s: unknown state",
				  out->id);
	out->state = (al_state)st;
	copy_field(out->error, sizeof out->error, PQgetvalue(res, i, 4));
	out->limits.memory_bytes = strtoull(PQgetvalue(res, i, 5), NULL, 10);
	out->limits.pids_max = (uint32_t)strtoul(PQgetvalue(res, i, 6), NULL,
						 10);
	out->limits.cpu_shares = (uint32_t)strtoul(PQgetvalue(res, i, 7), NULL,
						   10);
	out->env = json_tokener_parse(PQgetvalue(res, i, 8));
	out->metadata = json_tokener_parse(PQgetvalue(res, i, 9));
	if (out->env == NULL || out->metadata == NULL) {
		al_sandbox_free_fields(out);
		return al_err_set(err, AL_EDB, 0,
				  "sandbox %s: unreadable env or metadata",
				  out->id);
	}
	out->shim_pid = (int)strtol(PQgetvalue(res, i, 10), NULL, 10);
	copy_field(out->created_at, sizeof out->created_at,
		   PQgetvalue(res, i, 11));
	copy_field(out->expires_at, sizeof out->expires_at,
		   PQgetvalue(res, i, 12));
	copy_field(out->accel, sizeof out->accel, PQgetvalue(res, i, 13));
	out->template_version = atoi(PQgetvalue(res, i, 14));
	out->limits.disk_bytes = strtoull(PQgetvalue(res, i, 15), NULL, 10);
	copy_field(out->project, sizeof out->project, PQgetvalue(res, i, 16));
	out->network = json_tokener_parse(PQgetvalue(res, i, 17));
	if (out->network == NULL) {
		al_sandbox_free_fields(out);
		return al_err_set(err, AL_EDB, 0,
				  "sandbox %s: unreadable network", out->id);
	}
	out->limits.cpu_millis = (uint32_t)strtoul(PQgetvalue(res, i, 18), NULL,
						   10);
	copy_field(out->op, sizeof out->op, PQgetvalue(res, i, 19));
	copy_field(out->last_activity_at, sizeof out->last_activity_at,
		   PQgetvalue(res, i, 20));
	copy_field(out->resume_snapshot, sizeof out->resume_snapshot,
		   PQgetvalue(res, i, 21));
	copy_field(out->recovered_from, sizeof out->recovered_from,
		   PQgetvalue(res, i, 22));
	out->on_timeout_suspend = strcmp(PQgetvalue(res, i, 23), "t") == 0;
	out->auto_resume = strcmp(PQgetvalue(res, i, 24), "t") == 0;
	return 0;
}

int al_sandbox_set_network(al_db *db, const char *id, const char *project,
			   json_object *network, al_err *err)
{
	if (!al_id_valid(id))
		return al_err_set(err, AL_ENOENT, 0, "no such sandbox");
	const char *params[] = {id, project, plain_json(network)};
	PGresult *res = al_db_exec(db,
				   "UPDATE sandboxes SET network = $3::jsonb,"
				   " updated_at = now()"
				   " WHERE id = $1 AND state <> 'deleted'"
				   " AND ($2::text IS NULL OR project = $2)",
				   3, params, err);
	if (res == NULL)
		return -1;
	int rc = 0;
	if (strcmp(PQcmdTuples(res), "1") != 0)
		rc = al_err_set(err, AL_ENOENT, 0, "no sandbox '%s'", id);
	PQclear(res);
	return rc;
}

int al_sandbox_get(al_db *db, const char *id, al_sandbox *out, al_err *err)
{
	return al_sandbox_get_in(db, id, NULL, out, err);
}

int al_sandbox_get_in(al_db *db, const char *id, const char *project,
		      al_sandbox *out, al_err *err)
{
	if (!al_id_valid(id))
		return al_err_set(err, AL_ENOENT, 0, "no such sandbox");
	const char *params[] = {id, project};
	PGresult *res = al_db_exec(db,
				   "SELECT " SANDBOX_COLUMNS " FROM sandboxes"
				   " WHERE id = $1 AND state <> 'deleted'"
				   " AND ($2::text IS NULL OR project = $2)",
				   2, params, err);
	if (res == NULL)
		return -1;
	int rc;
	if (PQntuples(res) != 1)
		rc = al_err_set(err, AL_ENOENT, 0, "no sandbox '%s'", id);
	else
		rc = row_to_sandbox(res, 0, out, err);
	PQclear(res);
	return rc;
}

int al_sandbox_list(al_db *db, const char *project, int state,
		    json_object *metadata_filter, json_object **out,
		    al_err *err)
{
	char st[16], lim[16];
	const char *params[4];

	/* -1 means every state but deleted. */
	snprintf(st, sizeof st, "%s",
		 state >= 0 ? al_state_name((al_state)state) : "");
	params[0] = st;
	params[1] = metadata_filter != NULL ? plain_json(metadata_filter)
					    : "{}";
	snprintf(lim, sizeof lim, "%d", AL_SANDBOX_LIST_MAX);
	params[2] = lim;
	params[3] = project;
	PGresult *res = al_db_exec(
		db,
		"SELECT " SANDBOX_COLUMNS " FROM sandboxes"
		" WHERE (($1 = '' AND state <> 'deleted') OR state = $1)"
		" AND metadata @> $2::jsonb"
		" AND ($4::text IS NULL OR project = $4)"
		" ORDER BY created_at, id LIMIT $3::int",
		4, params, err);
	if (res == NULL)
		return -1;
	json_object *arr = json_object_new_array();
	if (arr == NULL) {
		PQclear(res);
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	}
	int n = PQntuples(res);
	for (int i = 0; i < n; i++) {
		al_sandbox sb;
		if (row_to_sandbox(res, i, &sb, err) < 0)
			goto fail;
		json_object *o = al_sandbox_to_json(&sb);
		al_sandbox_free_fields(&sb);
		if (o == NULL || json_object_array_add(arr, o) < 0) {
			json_object_put(o);
			al_err_set(err, AL_ENOMEM, 0, "out of memory");
			goto fail;
		}
	}
	PQclear(res);
	*out = arr;
	return 0;
fail:
	PQclear(res);
	json_object_put(arr);
	return -1;
}

int al_sandbox_transition_locked(al_db *db, const char *id, al_event ev,
				 const char *detail, int64_t at_ms, al_err *err)
{
	const char *p1[] = {id};
	PGresult *res = al_db_exec(db,
				   "SELECT state FROM sandboxes"
				   " WHERE id = $1 FOR UPDATE",
				   1, p1, err);
	if (res == NULL)
		return -1;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return al_err_set(err, AL_ENOENT, 0, "no sandbox '%s'", id);
	}
	int cur = al_state_from_name(PQgetvalue(res, 0, 0));
	PQclear(res);
	if (cur < 0)
		return al_err_set(err, AL_EDB, 0, "sandbox %s: unknown state",
				  id);
	int next = al_state_next((al_state)cur, ev, err);
	if (next < 0)
		return -1;

	char dbuf[512], at[24];
	snprintf(dbuf, sizeof dbuf, "%s", detail != NULL ? detail : "");
	snprintf(at, sizeof at, "%lld", (long long)at_ms);
	const char *p2[] = {
		id,
		al_state_name((al_state)cur),
		al_state_name((al_state)next),
		al_event_name(ev),
		detail != NULL ? dbuf : NULL,
		at_ms > 0 ? at : NULL,
	};
	res = al_db_exec(
		db,
		"WITH t AS (SELECT coalesce(to_timestamp($6::bigint / 1000.0),"
		" now()) AS at),"
		" u AS (UPDATE sandboxes SET state = $3,"
		" error = CASE WHEN $3 = 'error' THEN $5 ELSE error END,"
		" deleted_at = CASE WHEN $3 = 'deleted' THEN (SELECT at FROM t)"
		" ELSE deleted_at END, updated_at = now()"
		" WHERE id = $1 RETURNING id)"
		" INSERT INTO sandbox_events (sandbox_id, at, from_state,"
		" to_state, event, detail)"
		" SELECT id, (SELECT at FROM t), $2, $3, $4, $5 FROM u",
		6, p2, err);
	if (res == NULL)
		return -1;
	PQclear(res);
	return 0;
}

int al_sandbox_transition(al_db *db, const char *id, al_event ev,
			  const char *detail, al_err *err)
{
	if (!al_id_valid(id))
		return al_err_set(err, AL_ENOENT, 0, "no such sandbox");
	if ((unsigned)ev >= AL_EV_MAX)
		return al_err_set(err, AL_EINTERNAL, 0, "event out of range");
	if (al_db_begin(db, err) < 0)
		return -1;
	if (al_sandbox_transition_locked(db, id, ev, detail, 0, err) < 0 ||
	    al_db_commit(db, err) < 0) {
		al_db_rollback(db);
		return -1;
	}
	return 0;
}

int al_sandbox_record_events(al_db *db, const al_sandbox_event *evs, int n,
			     int *applied, al_err *err)
{
	*applied = 0;
	if (n <= 0)
		return 0;
	if (al_db_begin(db, err) < 0)
		return -1;
	int done = 0;
	for (int i = 0; i < n; i++) {
		al_err e = {0};
		if (!al_id_valid(evs[i].id) || (unsigned)evs[i].ev >= AL_EV_MAX)
			continue; /* the spool's parser lets none through */
		if (al_sandbox_transition_locked(db, evs[i].id, evs[i].ev,
						 evs[i].detail, evs[i].at_ms,
						 &e) == 0) {
			done++;
			continue;
		}
		/* Moot: the row is there already, or gone. */
		if (e.code == AL_ESTATE || e.code == AL_ENOENT)
			continue;
		*err = e;
		al_db_rollback(db);
		return -1;
	}
	if (al_db_commit(db, err) < 0) {
		al_db_rollback(db);
		return -1;
	}
	*applied = done;
	return 0;
}

int al_sandbox_mark_running(al_db *db, const char *id, int shim_pid,
			    const char *accel, al_sandbox *out, al_err *err)
{
	if (!al_id_valid(id))
		return al_err_set(err, AL_ENOENT, 0, "no such sandbox");
	if (accel == NULL)
		accel = "";
	if (accel[0] != '\0' && strcmp(accel, "kvm") != 0 &&
	    strcmp(accel, "tcg") != 0)
		return al_err_set(err, AL_EINVAL, 0, "unknown accelerator");
	if (shim_pid <= 0)
		return al_err_set(err, AL_EINVAL, 0, "invalid shim pid");
	char pbuf[16];
	snprintf(pbuf, sizeof pbuf, "%d", shim_pid);
	const char *params[] = {id, pbuf, accel[0] != '\0' ? accel : NULL};
	/* The row, its pid, accelerator and state with the event row: one
	 * statement, so one commit; the WHERE makes it race a shim's own
	 * end (spooled) safely: whichever comes second finds no row to
	 * change. */
	PGresult *res = al_db_exec(
		db,
		"WITH u AS (UPDATE sandboxes SET state = 'running',"
		" shim_pid = $2, accel = $3, updated_at = now()"
		" WHERE id = $1 AND state = 'creating' RETURNING *),"
		" e AS (INSERT INTO sandbox_events (sandbox_id, from_state,"
		" to_state, event, detail) SELECT id, 'creating', 'running',"
		" 'ready', 'agent ready' FROM u)"
		" SELECT " SANDBOX_COLUMNS " FROM u",
		3, params, err);
	if (res == NULL)
		return -1;
	int rc;
	if (PQntuples(res) != 1)
		rc = al_err_set(err, AL_ESTATE, 0,
				"sandbox %s is no longer creating", id);
	else
		rc = row_to_sandbox(res, 0, out, err);
	PQclear(res);
	return rc;
}

static int list_ids(al_db *db, const char *sql, char (**ids)[64], int *n,
		    al_err *err)
{
	PGresult *res = al_db_exec(db, sql, 0, NULL, err);
	if (res == NULL)
		return -1;
	int rows = PQntuples(res);
	char(*out)[64] = calloc(rows > 0 ? (size_t)rows : 1, sizeof *out);
	if (out == NULL) {
		PQclear(res);
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	}
	int k = 0;
	for (int i = 0; i < rows; i++) {
		const char *v = PQgetvalue(res, i, 0);
		if (!al_id_valid(v))
			continue;
		snprintf(out[k++], sizeof out[0], "%s", v);
	}
	PQclear(res);
	*ids = out;
	*n = k;
	return 0;
}

int al_sandbox_set_timeout(al_db *db, const char *id, const char *project,
			   uint32_t timeout_s, al_err *err)
{
	if (!al_id_valid(id))
		return al_err_set(err, AL_ENOENT, 0, "no such sandbox");
	char secs[16];
	snprintf(secs, sizeof secs, "%u", timeout_s);
	const char *params[] = {id, project, secs};
	PGresult *res =
		al_db_exec(db,
			   "UPDATE sandboxes SET expires_at = now() +"
			   " make_interval(secs => $3::int), updated_at = now()"
			   " WHERE id = $1 AND state <> 'deleted'"
			   " AND ($2::text IS NULL OR project = $2)",
			   3, params, err);
	if (res == NULL)
		return -1;
	int rc = 0;
	if (strcmp(PQcmdTuples(res), "1") != 0)
		rc = al_err_set(err, AL_ENOENT, 0, "no sandbox '%s'", id);
	PQclear(res);
	return rc;
}

int al_sandbox_list_expired(al_db *db, char (**ids)[64], int *n, al_err *err)
{
	return list_ids(db,
			"SELECT id FROM sandboxes WHERE state <> 'deleted'"
			" AND expires_at <= now() ORDER BY expires_at",
			ids, n, err);
}

int al_sandbox_list_live(al_db *db, char (**ids)[64], int *n, al_err *err)
{
	return list_ids(db,
			"SELECT id FROM sandboxes WHERE state IN"
			" ('creating', 'running', 'paused') ORDER BY id",
			ids, n, err);
}

int al_sandbox_recent_creates(al_db *db, uint32_t window_s,
			      al_sandbox_creates *out, int max, int *n,
			      al_err *err)
{
	char secs[16], lim[16];
	snprintf(secs, sizeof secs, "%u", window_s);
	snprintf(lim, sizeof lim, "%d", max);
	const char *params[] = {secs, lim};
	PGresult *res = al_db_exec(
		db,
		"SELECT template, driver, count(*) FROM sandboxes"
		" WHERE created_at > now() - make_interval(secs => $1::int)"
		" GROUP BY template, driver ORDER BY template, driver"
		" LIMIT $2::int",
		2, params, err);
	if (res == NULL)
		return -1;
	*n = PQntuples(res);
	for (int i = 0; i < *n; i++) {
		snprintf(out[i].template_name, sizeof out[i].template_name,
			 "%s", PQgetvalue(res, i, 0));
		snprintf(out[i].driver, sizeof out[i].driver, "%s",
			 PQgetvalue(res, i, 1));
		out[i].creates = (uint32_t)strtoul(PQgetvalue(res, i, 2), NULL,
						   10);
	}
	PQclear(res);
	return 0;
}

void al_sandbox_start_failed(al_db *db, const char *id, al_err *e,
			     int *retry_after_s)
{
	int refused = al_capacity_exhausted(e);
	al_err tmp;
	al_warn("sandbox %s: start %s: %s", id,
		refused ? "refused for capacity" : "failed", e->msg);
	/* The shim's spooled end may have been recorded first (state error
	 * or deleted): then the state table rejects this one. */
	if (al_sandbox_transition(db, id, refused ? AL_EV_DELETE : AL_EV_FAIL,
				  e->msg, &tmp) < 0 &&
	    tmp.code != AL_ESTATE)
		al_warn("sandbox %s: recording the failed start: %s", id,
			tmp.msg);
	if (refused) {
		e->code = AL_EUNAVAIL;
		*retry_after_s = AL_CAPACITY_RETRY_S;
	} else if (al_code_http_status(e->code) < 500) {
		/* Whatever the shim said, this is the server failing. */
		e->code = AL_EINTERNAL;
	}
}
