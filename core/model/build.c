/* build: template builds' rows, in PostgreSQL (who writes them:
 * build.h). */
#include "model/build.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"

static const char *const build_status_names[] = {
	[AL_BUILD_QUEUED] = "queued",
	[AL_BUILD_RUNNING] = "running",
	[AL_BUILD_SUCCEEDED] = "succeeded",
	[AL_BUILD_FAILED] = "failed",
};

const char *al_build_status_name(al_build_status s)
{
	if ((unsigned)s > AL_BUILD_FAILED)
		return "unknown";
	return build_status_names[s];
}

int al_build_insert(al_db *db, const char *id, const char *name,
		    const char *project, int public, int no_cache, al_err *err)
{
	if (id == NULL || !al_id_valid(id))
		return al_err_set(err, AL_EINVAL, 0, "invalid build id");
	if (name == NULL || !al_id_valid(name))
		return al_err_set(err, AL_EINVAL, 0,
				  "invalid template name: 1 to 63 of a-z, 0-9 "
				  "and '-', not starting with '-'");
	if (project == NULL || !al_id_valid(project))
		return al_err_set(err, AL_EINVAL, 0, "invalid project");
	const char *p[] = {id, name, no_cache ? "true" : "false", project,
			   public ? "true" : "false"};
	if (al_db_exec_rows(db,
			    "INSERT INTO template_builds (id, name, status,"
			    " no_cache, project, public) VALUES ($1, $2,"
			    " 'queued', $3::boolean, $4, $5::boolean)",
			    5, p, err) < 0)
		return -1;
	return 0;
}

int al_build_update(al_db *db, const char *id, al_build_status status, int step,
		    int steps, int version, const char *error, al_err *err)
{
	if (id == NULL || !al_id_valid(id))
		return al_err_set(err, AL_EINVAL, 0, "invalid build id");
	if ((unsigned)status > AL_BUILD_FAILED)
		return al_err_set(err, AL_EINTERNAL, 0, "bad build status");
	char sbuf[16], nbuf[16], vbuf[16], ebuf[1024];
	snprintf(sbuf, sizeof sbuf, "%d", step);
	snprintf(nbuf, sizeof nbuf, "%d", steps);
	snprintf(vbuf, sizeof vbuf, "%d", version);
	if (error != NULL)
		snprintf(ebuf, sizeof ebuf, "%s", error);
	const char *p[] = {
		id,   build_status_names[status], sbuf,
		nbuf, version > 0 ? vbuf : NULL,  error != NULL ? ebuf : NULL,
	};
	long long n = al_db_exec_rows(
		db,
		"UPDATE template_builds SET status = $2, step = $3::int,"
		" steps = $4::int, version = coalesce($5::int, version),"
		" error = $6, finished_at = CASE WHEN $2 IN ('succeeded',"
		" 'failed') THEN now() ELSE NULL END WHERE id = $1",
		6, p, err);
	if (n < 0)
		return -1;
	if (n != 1)
		return al_err_set(err, AL_ENOENT, 0, "no build '%s'", id);
	return 0;
}

static json_object *int_or_null(PGresult *res, int col)
{
	if (PQgetisnull(res, 0, col))
		return NULL;
	return json_object_new_int(atoi(PQgetvalue(res, 0, col)));
}

static json_object *str_or_null(PGresult *res, int col)
{
	if (PQgetisnull(res, 0, col))
		return NULL;
	return json_object_new_string(PQgetvalue(res, 0, col));
}

int al_build_claim(al_db *db, const char *id, int pid, al_build_claimed *out,
		   al_err *err)
{
	char pbuf[16];
	snprintf(pbuf, sizeof pbuf, "%d", pid);
	const char *p[] = {id, pbuf};
	PGresult *res = al_db_exec(
		db,
		"UPDATE template_builds SET status = 'running',"
		" builder_pid = $2::int WHERE id = $1 AND status = 'queued'"
		" RETURNING name, no_cache, project",
		2, p, err);
	if (res == NULL)
		return -1;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return al_err_set(err, AL_ESTATE, 0,
				  "build %s is unknown or not queued", id);
	}
	snprintf(out->name, sizeof out->name, "%s", PQgetvalue(res, 0, 0));
	out->no_cache = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
	snprintf(out->project, sizeof out->project, "%s",
		 PQgetvalue(res, 0, 2));
	PQclear(res);
	return 0;
}

int al_build_list_pending(al_db *db, al_build_pending **out, int *n,
			  al_err *err)
{
	PGresult *res = al_db_exec(
		db,
		"SELECT id, coalesce(builder_pid, 0),"
		" extract(epoch FROM now() - created_at)::int, steps"
		" FROM template_builds WHERE status IN ('queued', 'running')",
		0, NULL, err);
	if (res == NULL)
		return -1;
	int rows = PQntuples(res);
	al_build_pending *b = calloc(rows > 0 ? (size_t)rows : 1, sizeof *b);
	if (b == NULL) {
		PQclear(res);
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	}
	for (int i = 0; i < rows; i++) {
		snprintf(b[i].id, sizeof b[i].id, "%s", PQgetvalue(res, i, 0));
		b[i].builder_pid = atoi(PQgetvalue(res, i, 1));
		b[i].age_s = atoi(PQgetvalue(res, i, 2));
		b[i].steps = atoi(PQgetvalue(res, i, 3));
	}
	PQclear(res);
	*out = b;
	*n = rows;
	return 0;
}

json_object *al_build_get(al_db *db, const char *id, const char *project,
			  al_err *err)
{
	if (id == NULL || !al_id_valid(id)) {
		al_err_set(err, AL_ENOENT, 0, "no build '%s'",
			   id != NULL && strlen(id) < 80 ? id : "");
		return NULL;
	}
	const char *p[] = {id, project};
	PGresult *res = al_db_exec(
		db,
		"SELECT id, name, status, step, steps, version, error,"
		" to_char(created_at AT TIME ZONE 'UTC',"
		" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
		" to_char(finished_at AT TIME ZONE 'UTC',"
		" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), no_cache, project"
		" FROM template_builds WHERE id = $1"
		" AND ($2::text IS NULL OR project = $2)",
		2, p, err);
	if (res == NULL)
		return NULL;
	if (PQntuples(res) != 1) {
		PQclear(res);
		al_err_set(err, AL_ENOENT, 0, "no build '%s'", id);
		return NULL;
	}
	json_object *o = json_object_new_object();
	if (o == NULL) {
		PQclear(res);
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		return NULL;
	}
	json_object_object_add(o, "id", str_or_null(res, 0));
	json_object_object_add(o, "name", str_or_null(res, 1));
	json_object_object_add(o, "status", str_or_null(res, 2));
	json_object_object_add(o, "step", int_or_null(res, 3));
	json_object_object_add(o, "steps", int_or_null(res, 4));
	json_object_object_add(o, "version", int_or_null(res, 5));
	json_object_object_add(o, "error", str_or_null(res, 6));
	json_object_object_add(o, "created_at", str_or_null(res, 7));
	json_object_object_add(o, "finished_at", str_or_null(res, 8));
	json_object_object_add(o, "no_cache",
			       json_object_new_boolean(strcmp(PQgetvalue(res, 0,
									 9),
							      "t") == 0));
	json_object_object_add(o, "project", str_or_null(res, 10));
	PQclear(res);
	return o;
}
