/* The operation column of a sandbox's row (sandbox_op.h). */
#include "model/sandbox_op.h"

#include <stdio.h>
#include <string.h>

#include "base/config.h"
#include "model/sandbox_internal.h"

static const char *const op_names[AL_OP_MAX] = {
	[AL_OP_PAUSING] = "pausing",
	[AL_OP_RESUMING] = "resuming",
	[AL_OP_SUSPENDING] = "suspending",
	[AL_OP_SNAPSHOTTING] = "snapshotting",
	[AL_OP_FORKING] = "forking",
};

const char *al_op_name(al_op op)
{
	if ((unsigned)op >= AL_OP_MAX)
		return "unknown";
	return op_names[op];
}

int al_op_from_name(const char *name)
{
	for (int i = 0; name != NULL && i < AL_OP_MAX; i++)
		if (strcmp(op_names[i], name) == 0)
			return i;
	return -1;
}

/* The event an op leads to; AL_EV_MAX for those that keep the state. */
static al_event op_event(al_op op)
{
	switch (op) {
	case AL_OP_PAUSING:
		return AL_EV_PAUSE;
	case AL_OP_RESUMING:
		return AL_EV_RESUME;
	case AL_OP_SUSPENDING:
		return AL_EV_SUSPEND;
	case AL_OP_SNAPSHOTTING:
	case AL_OP_FORKING:
	case AL_OP_MAX:
	default:
		return AL_EV_MAX;
	}
}

/* 1 if op may begin in state s. */
static int op_allowed(al_op op, al_state s)
{
	al_event ev = op_event(op);
	if (ev != AL_EV_MAX) {
		al_err ignored;
		return al_state_next(s, ev, &ignored) >= 0;
	}
	if (s == AL_ST_RUNNING || s == AL_ST_PAUSED)
		return 1;
	return op == AL_OP_FORKING && s == AL_ST_SUSPENDED;
}

/* The states op may begin in, as a PostgreSQL text array literal. */
static void allowed_states(al_op op, char *out, size_t len)
{
	size_t k = (size_t)snprintf(out, len, "{");
	for (int s = 0; s < AL_ST_MAX && k < len; s++)
		if (op_allowed(op, (al_state)s))
			k += (size_t)snprintf(out + k, len - k, "%s%s",
					      k > 1 ? "," : "",
					      al_state_name((al_state)s));
	if (k < len)
		snprintf(out + k, len - k, "}");
}

/* Why op could not begin on id: it is gone, busy, or in a state that
 * does not allow it. */
static int refusal(al_db *db, const char *id, const char *project, al_op op,
		   al_err *err)
{
	const char *params[] = {id, project};
	PGresult *res = al_db_exec(db,
				   "SELECT state, coalesce(op, '')"
				   " FROM sandboxes"
				   " WHERE id = $1 AND state <> 'deleted'"
				   " AND ($2::text IS NULL OR project = $2)",
				   2, params, err);
	if (res == NULL)
		return -1;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return al_err_set(err, AL_ENOENT, 0, "no sandbox '%s'", id);
	}
	char state[16], busy[16];
	snprintf(state, sizeof state, "%s", PQgetvalue(res, 0, 0));
	snprintf(busy, sizeof busy, "%s", PQgetvalue(res, 0, 1));
	PQclear(res);
	if (busy[0] != '\0')
		return al_err_set(err, AL_ESTATE, 0,
				  "the sandbox is %s: wait until that is done",
				  busy);
	if (strcmp(state, al_state_name(AL_ST_PAUSED)) == 0 &&
	    op == AL_OP_PAUSING)
		return al_err_set(err, AL_ESTATE, 0,
				  "the sandbox is paused already");
	if (strcmp(state, al_state_name(AL_ST_RUNNING)) == 0 &&
	    op == AL_OP_RESUMING)
		return al_err_set(err, AL_ESTATE, 0,
				  "the sandbox is running already");
	return al_err_set(err, AL_ESTATE, 0,
			  "cannot begin %s a sandbox that is %s",
			  al_op_name(op), state);
}

int al_sandbox_op_begin(al_db *db, const char *id, const char *project,
			al_op op, al_state *from, al_err *err)
{
	if (!al_id_valid(id))
		return al_err_set(err, AL_ENOENT, 0, "no such sandbox");
	if ((unsigned)op >= AL_OP_MAX)
		return al_err_set(err, AL_EINTERNAL, 0, "op out of range");
	char states[128];
	allowed_states(op, states, sizeof states);
	const char *params[] = {id, al_op_name(op), states, project};
	PGresult *res = al_db_exec(
		db,
		"UPDATE sandboxes SET op = $2, op_started_at = now(),"
		" updated_at = now()"
		" WHERE id = $1 AND op IS NULL AND state = ANY($3::text[])"
		" AND ($4::text IS NULL OR project = $4)"
		" RETURNING state",
		4, params, err);
	if (res == NULL)
		return -1;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return refusal(db, id, project, op, err);
	}
	int st = al_state_from_name(PQgetvalue(res, 0, 0));
	PQclear(res);
	if (st < 0)
		return al_err_set(err, AL_EDB, 0, "sandbox %s: unknown state",
				  id);
	*from = (al_state)st;
	return 0;
}

int al_sandbox_op_end_locked(al_db *db, const char *id, al_op op, al_event ev,
			     const char *detail, int shim_pid, al_err *err)
{
	char pid[16];
	snprintf(pid, sizeof pid, "%d", shim_pid);
	const char *params[] = {id, al_op_name(op), shim_pid > 0 ? pid : NULL};
	PGresult *res = al_db_exec(
		db,
		"UPDATE sandboxes SET op = NULL, op_started_at = NULL,"
		" shim_pid = coalesce($3::int, shim_pid), updated_at = now()"
		" WHERE id = $1 AND op = $2",
		3, params, err);
	if (res == NULL)
		return -1;
	int ended = strcmp(PQcmdTuples(res), "1") == 0;
	PQclear(res);
	if (!ended)
		return al_err_set(err, AL_ESTATE, 0, "sandbox %s is not %s", id,
				  al_op_name(op));
	if (ev != AL_EV_MAX &&
	    al_sandbox_transition_locked(db, id, ev, detail, 0, err) < 0)
		return -1;
	return 0;
}

/* End op on id (its shim now shim_pid, when > 0), applying ev. */
static int op_end(al_db *db, const char *id, al_op op, al_event ev,
		  const char *detail, int shim_pid, al_err *err)
{
	if (!al_id_valid(id))
		return al_err_set(err, AL_ENOENT, 0, "no such sandbox");
	if (al_db_begin(db, err) < 0)
		return -1;
	if (al_sandbox_op_end_locked(db, id, op, ev, detail, shim_pid, err) <
		    0 ||
	    al_db_commit(db, err) < 0) {
		al_db_rollback(db);
		return -1;
	}
	return 0;
}

int al_sandbox_op_end(al_db *db, const char *id, al_op op, al_event ev,
		      const char *detail, al_err *err)
{
	return op_end(db, id, op, ev, detail, 0, err);
}

int al_sandbox_op_finish(al_db *db, const char *id, al_op op, al_state from,
			 al_event ev, al_err *err)
{
	int next = al_state_next(from, ev, err);
	if (next < 0)
		return -1;
	const char *params[] = {id, al_op_name(op), al_state_name(from),
				al_state_name((al_state)next),
				al_event_name(ev)};
	PGresult *res = al_db_exec(
		db,
		"WITH u AS (UPDATE sandboxes SET op = NULL,"
		" op_started_at = NULL, state = $4, updated_at = now()"
		" WHERE id = $1 AND op = $2 AND state = $3 RETURNING id)"
		" INSERT INTO sandbox_events (sandbox_id, from_state,"
		" to_state, event) SELECT id, $3, $4, $5 FROM u",
		5, params, err);
	if (res == NULL)
		return -1;
	int done = strcmp(PQcmdTuples(res), "1") == 0;
	PQclear(res);
	if (!done)
		return al_err_set(err, AL_ESTATE, 0,
				  "sandbox %s is not %s from %s", id,
				  al_op_name(op), al_state_name(from));
	return 0;
}

int al_sandbox_op_end_resumed(al_db *db, const char *id, int shim_pid,
			      al_err *err)
{
	return op_end(db, id, AL_OP_RESUMING, AL_EV_RESUME, NULL, shim_pid,
		      err);
}

int al_sandbox_op_stale(al_db *db, int older_s, char (*ids)[64], al_op *ops,
			int max, int *n, al_err *err)
{
	*n = 0;
	char secs[16], lim[16];
	snprintf(secs, sizeof secs, "%d", older_s);
	snprintf(lim, sizeof lim, "%d", max);
	const char *params[] = {secs, lim};
	PGresult *res = al_db_exec(
		db,
		"SELECT id, op FROM sandboxes WHERE op IS NOT NULL"
		" AND op_started_at < now() - make_interval(secs => $1::int)"
		" ORDER BY op_started_at LIMIT $2::int",
		2, params, err);
	if (res == NULL)
		return -1;
	for (int i = 0; i < PQntuples(res) && *n < max; i++) {
		int op = al_op_from_name(PQgetvalue(res, i, 1));
		if (op < 0)
			continue;
		snprintf(ids[*n], 64, "%s", PQgetvalue(res, i, 0));
		ops[*n] = (al_op)op;
		(*n)++;
	}
	PQclear(res);
	return 0;
}
