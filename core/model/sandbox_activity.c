/* Sandbox activity (sandbox_activity.h). */
#include "model/sandbox_activity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

int al_sandbox_touch(al_db *db, const char *id, const char *project,
		     al_err *err)
{
	const char *params[] = {id, project};
	PGresult *res = al_db_exec(
		db,
		"UPDATE sandboxes SET last_activity_at = now()"
		" WHERE id = $1 AND ($2::text IS NULL OR project = $2)"
		" AND state <> 'deleted'"
		" AND last_activity_at < now() - interval '1 second'",
		2, params, err);
	if (res == NULL)
		return -1;
	PQclear(res);
	return 0;
}

int al_sandbox_idle_list(al_db *db, const char *after, al_sandbox_idle *out,
			 int max, int *n, al_err *err)
{
	*n = 0;
	char lim[16];
	snprintf(lim, sizeof lim, "%d", max);
	const char *params[] = {after, lim};
	PGresult *res = al_db_exec(
		db,
		"SELECT s.id, s.project, s.template, s.driver, s.state,"
		" s.metadata::text,"
		" floor(extract(epoch FROM now() - s.last_activity_at))::bigint,"
		" floor(extract(epoch FROM now() - coalesce((SELECT"
		" max(p.created_at) FROM snapshots p WHERE p.sandbox_id = s.id),"
		" s.created_at)))::bigint,"
		" (SELECT count(*) FROM stream_leases l"
		" WHERE l.sandbox_id = s.id)"
		" FROM sandboxes s"
		" WHERE s.state IN ('running', 'paused', 'suspended')"
		" AND s.op IS NULL AND s.id > $1"
		" ORDER BY s.id LIMIT $2::int",
		2, params, err);
	if (res == NULL)
		return -1;
	for (int i = 0; i < PQntuples(res) && *n < max; i++) {
		al_sandbox_idle *s = &out[*n];
		memset(s, 0, sizeof *s);
		snprintf(s->id, sizeof s->id, "%s", PQgetvalue(res, i, 0));
		snprintf(s->project, sizeof s->project, "%s",
			 PQgetvalue(res, i, 1));
		snprintf(s->template_name, sizeof s->template_name, "%s",
			 PQgetvalue(res, i, 2));
		snprintf(s->driver, sizeof s->driver, "%s",
			 PQgetvalue(res, i, 3));
		s->state = (al_state)al_state_from_name(PQgetvalue(res, i, 4));
		const char *meta = PQgetvalue(res, i, 5);
		s->metadata = al_json_parse_object(meta, strlen(meta), NULL);
		s->idle_s = strtol(PQgetvalue(res, i, 6), NULL, 10);
		s->snapshot_age_s = strtol(PQgetvalue(res, i, 7), NULL, 10);
		s->streams = atoi(PQgetvalue(res, i, 8));
		(*n)++;
	}
	PQclear(res);
	return 0;
}

void al_sandbox_idle_free(al_sandbox_idle *s)
{
	json_object_put(s->metadata);
	s->metadata = NULL;
}
