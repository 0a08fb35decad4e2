#include "sandbox.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "config.h"

/* clang-format off */
static const char *const state_names[AL_ST_MAX] = {
	[AL_ST_CREATING] = "creating", [AL_ST_RUNNING] = "running",
	[AL_ST_PAUSED] = "paused",     [AL_ST_SUSPENDED] = "suspended",
	[AL_ST_ERROR] = "error",       [AL_ST_DELETED] = "deleted",
};

static const char *const event_names[AL_EV_MAX] = {
	[AL_EV_READY] = "ready",     [AL_EV_PAUSE] = "pause",
	[AL_EV_RESUME] = "resume",   [AL_EV_SUSPEND] = "suspend",
	[AL_EV_FAIL] = "fail",	     [AL_EV_DELETE] = "delete",
};

/* The lifecycle: handlers[state][event] is the next state or REJECT.
 * Every cell is written out so that adding a state or an event forces a
 * decision for each combination. */
#define REJECT (-1)
static const int handlers[AL_ST_MAX][AL_EV_MAX] = {
	[AL_ST_CREATING] = {
		[AL_EV_READY] = AL_ST_RUNNING,
		[AL_EV_PAUSE] = REJECT,
		[AL_EV_RESUME] = REJECT,
		[AL_EV_SUSPEND] = REJECT,
		[AL_EV_FAIL] = AL_ST_ERROR,
		[AL_EV_DELETE] = AL_ST_DELETED,
	},
	[AL_ST_RUNNING] = {
		[AL_EV_READY] = REJECT,
		[AL_EV_PAUSE] = AL_ST_PAUSED,
		[AL_EV_RESUME] = REJECT,
		[AL_EV_SUSPEND] = AL_ST_SUSPENDED,
		[AL_EV_FAIL] = AL_ST_ERROR,
		[AL_EV_DELETE] = AL_ST_DELETED,
	},
	[AL_ST_PAUSED] = {
		[AL_EV_READY] = REJECT,
		[AL_EV_PAUSE] = REJECT,
		[AL_EV_RESUME] = AL_ST_RUNNING,
		[AL_EV_SUSPEND] = AL_ST_SUSPENDED,
		[AL_EV_FAIL] = AL_ST_ERROR,
		[AL_EV_DELETE] = AL_ST_DELETED,
	},
	[AL_ST_SUSPENDED] = {
		[AL_EV_READY] = REJECT,
		[AL_EV_PAUSE] = REJECT,
		[AL_EV_RESUME] = AL_ST_RUNNING,
		[AL_EV_SUSPEND] = REJECT,
		/* Nothing runs while suspended, so nothing can fail. */
		[AL_EV_FAIL] = REJECT,
		[AL_EV_DELETE] = AL_ST_DELETED,
	},
	[AL_ST_ERROR] = {
		[AL_EV_READY] = REJECT,
		[AL_EV_PAUSE] = REJECT,
		[AL_EV_RESUME] = REJECT,
		[AL_EV_SUSPEND] = REJECT,
		[AL_EV_FAIL] = REJECT,
		[AL_EV_DELETE] = AL_ST_DELETED,
	},
	[AL_ST_DELETED] = {
		[AL_EV_READY] = REJECT,
		[AL_EV_PAUSE] = REJECT,
		[AL_EV_RESUME] = REJECT,
		[AL_EV_SUSPEND] = REJECT,
		[AL_EV_FAIL] = REJECT,
		[AL_EV_DELETE] = REJECT,
	},
};
/* clang-format on */

const char *al_state_name(al_state s)
{
	if ((unsigned)s >= AL_ST_MAX)
		return "unknown";
	return state_names[s];
}

int al_state_from_name(const char *name)
{
	if (name == NULL)
		return -1;
	for (int s = 0; s < AL_ST_MAX; s++)
		if (strcmp(state_names[s], name) == 0)
			return s;
	return -1;
}

const char *al_event_name(al_event e)
{
	if ((unsigned)e >= AL_EV_MAX)
		return "unknown";
	return event_names[e];
}

int al_state_next(al_state s, al_event e, al_err *err)
{
	if ((unsigned)s >= AL_ST_MAX || (unsigned)e >= AL_EV_MAX)
		return al_err_set(err, AL_EINTERNAL, 0,
				  "state %d / event %d out of range", (int)s,
				  (int)e);
	int next = handlers[s][e];
	if (next == REJECT)
		return al_err_set(err, AL_ESTATE, 0,
				  "cannot %s a sandbox that is %s",
				  event_names[e], state_names[s]);
	return next;
}

void al_sandbox_free_fields(al_sandbox *sb)
{
	json_object_put(sb->metadata);
	json_object_put(sb->env);
	sb->metadata = NULL;
	sb->env = NULL;
}

static const char *plain_json(json_object *o)
{
	return json_object_to_json_string_ext(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

int al_sandbox_insert(al_db *db, const al_sandbox *sb, int timeout_s,
		      al_err *err)
{
	char mem[24], pids[16], cpu[16], tmo[16], disk[24];

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
	if (sb->limits.disk_bytes == 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "sandbox %s has no disk limit", sb->id);
	const char *env = sb->env != NULL ? plain_json(sb->env)
					  : "{}";
	const char *meta = sb->metadata != NULL
				   ? plain_json(sb->metadata)
				   : "{}";
	if (sb->accel[0] != '\0' && strcmp(sb->accel, "kvm") != 0 &&
	    strcmp(sb->accel, "tcg") != 0)
		return al_err_set(err, AL_EINVAL, 0, "unknown accelerator");
	const char *params[] = {
		sb->id, sb->template_name, sb->driver, mem, pids, cpu, env,
		meta,	tmo,
		/* NULL for drivers without an accelerator */
		sb->accel[0] != '\0' ? sb->accel : NULL,
		disk,
		sb->project,
	};
	/* The row and its first event in one statement, so one commit. */
	PGresult *res = al_db_exec(
		db,
		"WITH s AS (INSERT INTO sandboxes (id, template, driver, state,"
		" memory_bytes, pids_max, cpu_shares, env, metadata,"
		" created_at, expires_at, updated_at, accel, template_version,"
		" disk_bytes, project)"
		" VALUES ($1, $2, $3, 'creating', $4, $5, $6, $7::jsonb,"
		" $8::jsonb, now(), now() + make_interval(secs => $9::int),"
		" now(), $10,"
		/* The template's current version, read in the same statement:
		 * the sandbox keeps it whatever is built later. */
		" (SELECT version FROM templates WHERE name = $2), $11, $12)"
		" RETURNING id)"
		" INSERT INTO sandbox_events (sandbox_id, from_state, to_state,"
		" event) SELECT id, NULL, 'creating', 'create' FROM s",
		12, params, err);
	if (res == NULL) {
		al_err_wrap(err, "inserting sandbox %s", sb->id);
		return -1;
	}
	PQclear(res);
	return 0;
}

#define SANDBOX_COLUMNS                                                        \
	"id, template, driver, state, coalesce(error, ''),"                    \
	" memory_bytes, pids_max, cpu_shares, env::text, metadata::text,"      \
	" coalesce(shim_pid, 0),"                                              \
	" to_char(created_at AT TIME ZONE 'UTC',"                              \
	" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"                               \
	" to_char(expires_at AT TIME ZONE 'UTC',"                              \
	" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"                               \
	" coalesce(accel, ''), coalesce(template_version, 0), disk_bytes,"      \
	" project"

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
	return 0;
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
	params[1] = metadata_filter != NULL
			    ? plain_json(metadata_filter)
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

int al_sandbox_transition(al_db *db, const char *id, al_event ev,
			  const char *detail, al_err *err)
{
	if (!al_id_valid(id))
		return al_err_set(err, AL_ENOENT, 0, "no such sandbox");
	if ((unsigned)ev >= AL_EV_MAX)
		return al_err_set(err, AL_EINTERNAL, 0, "event out of range");

	PGresult *res = al_db_exec(db, "BEGIN", 0, NULL, err);
	if (res == NULL)
		return -1;
	PQclear(res);

	const char *p1[] = {id};
	res = al_db_exec(db, "SELECT state FROM sandboxes WHERE id = $1"
			     " FOR UPDATE",
			 1, p1, err);
	if (res == NULL)
		goto fail;
	if (PQntuples(res) != 1) {
		PQclear(res);
		al_err_set(err, AL_ENOENT, 0, "no sandbox '%s'", id);
		goto fail;
	}
	int cur = al_state_from_name(PQgetvalue(res, 0, 0));
	PQclear(res);
	if (cur < 0) {
		al_err_set(err, AL_EDB, 0, "sandbox %s: unknown state", id);
		goto fail;
	}
	int next = al_state_next((al_state)cur, ev, err);
	if (next < 0)
		goto fail;

	char dbuf[512];
	snprintf(dbuf, sizeof dbuf, "%s", detail != NULL ? detail : "");
	const char *p2[] = {
		id,
		state_names[cur],
		state_names[next],
		event_names[ev],
		detail != NULL ? dbuf : NULL,
	};
	res = al_db_exec(
		db,
		"WITH u AS (UPDATE sandboxes SET state = $3,"
		" error = CASE WHEN $3 = 'error' THEN $5 ELSE error END,"
		" deleted_at = CASE WHEN $3 = 'deleted' THEN now()"
		" ELSE deleted_at END, updated_at = now()"
		" WHERE id = $1 RETURNING id)"
		" INSERT INTO sandbox_events (sandbox_id, from_state, to_state,"
		" event, detail) SELECT id, $2, $3, $4, $5 FROM u",
		5, p2, err);
	if (res == NULL)
		goto fail;
	PQclear(res);
	res = al_db_exec(db, "COMMIT", 0, NULL, err);
	if (res == NULL)
		goto fail;
	PQclear(res);
	return 0;
fail:
	al_db_rollback(db);
	return -1;
}

int al_sandbox_set_shim_pid(al_db *db, const char *id, int pid, al_err *err)
{
	char pbuf[16];
	snprintf(pbuf, sizeof pbuf, "%d", pid);
	const char *params[] = {id, pbuf};
	PGresult *res = al_db_exec(db,
				   "UPDATE sandboxes SET shim_pid = $2,"
				   " updated_at = now() WHERE id = $1",
				   2, params, err);
	if (res == NULL)
		return -1;
	int found = strcmp(PQcmdTuples(res), "1") == 0;
	PQclear(res);
	if (!found)
		return al_err_set(err, AL_ENOENT, 0, "no sandbox '%s'", id);
	return 0;
}

int al_sandbox_set_accel(al_db *db, const char *id, const char *accel,
			 al_err *err)
{
	if (accel == NULL)
		accel = "";
	if (accel[0] != '\0' && strcmp(accel, "kvm") != 0 &&
	    strcmp(accel, "tcg") != 0)
		return al_err_set(err, AL_EINVAL, 0, "unknown accelerator");
	const char *params[] = {id, accel[0] != '\0' ? accel : NULL};
	PGresult *res = al_db_exec(db,
				   "UPDATE sandboxes SET accel = $2,"
				   " updated_at = now() WHERE id = $1",
				   2, params, err);
	if (res == NULL)
		return -1;
	int found = strcmp(PQcmdTuples(res), "1") == 0;
	PQclear(res);
	if (!found)
		return al_err_set(err, AL_ENOENT, 0, "no sandbox '%s'", id);
	return 0;
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

json_object *al_sandbox_to_json(const al_sandbox *sb)
{
	json_object *o = json_object_new_object();
	if (o == NULL)
		return NULL;
	json_object *meta = sb->metadata != NULL
				    ? json_object_get(sb->metadata)
				    : json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(sb->id));
	if (sb->project[0] != '\0')
		json_object_object_add(o, "project",
				       json_object_new_string(sb->project));
	json_object_object_add(o, "state",
			       json_object_new_string(al_state_name(sb->state)));
	json_object_object_add(o, "template",
			       json_object_new_string(sb->template_name));
	json_object_object_add(o, "driver", json_object_new_string(sb->driver));
	if (sb->template_version > 0)
		json_object_object_add(o, "template_version",
				       json_object_new_int(sb->template_version));
	/* Only a vm has an accelerator; it is known once the shim ran it. */
	if (strcmp(sb->driver, "vm") == 0 && sb->accel[0] != '\0')
		json_object_object_add(o, "accel",
				       json_object_new_string(sb->accel));
	json_object_object_add(o, "created_at",
			       json_object_new_string(sb->created_at));
	json_object_object_add(o, "expires_at",
			       json_object_new_string(sb->expires_at));
	json_object_object_add(o, "metadata", meta);
	json_object_object_add(
		o, "memory_mb",
		json_object_new_int64((int64_t)(sb->limits.memory_bytes >> 20)));
	json_object_object_add(o, "pids",
			       json_object_new_int64(sb->limits.pids_max));
	json_object_object_add(o, "cpu_shares",
			       json_object_new_int64(sb->limits.cpu_shares));
	json_object_object_add(
		o, "disk_mb",
		json_object_new_int64((int64_t)(sb->limits.disk_bytes >> 20)));
	if (sb->state == AL_ST_ERROR && sb->error[0] != '\0')
		json_object_object_add(o, "error",
				       json_object_new_string(sb->error));
	return o;
}

int al_sandbox_new_id(char out[21], al_err *err)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char buf[64];
	size_t k = 0;

	while (k < 20) {
		ssize_t n = getrandom(buf, sizeof buf, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return al_err_sys(err, AL_ESYS, errno, "getrandom");
		}
		/* Reject bytes >= 252 so each of the 36 symbols is equally
		 * likely. */
		for (ssize_t i = 0; i < n && k < 20; i++)
			if (buf[i] < 252)
				out[k++] = alphabet[buf[i] % 36];
	}
	out[20] = '\0';
	return 0;
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
		out[i].creates =
			(uint32_t)strtoul(PQgetvalue(res, i, 2), NULL, 10);
	}
	PQclear(res);
	return 0;
}
