#include "model/project.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

const al_quota_field al_quota_fields[AL_QUOTA_NFIELDS] = {
	{"running_sandboxes", "running_sandboxes", "running sandboxes", 0, 0,
	 offsetof(al_quota, running_sandboxes)},
	{"memory_mb", "memory_mb", "memory", 1, 0,
	 offsetof(al_quota, memory_mb)},
	{"disk_mb", "disk_mb", "disk", 1, 0, offsetof(al_quota, disk_mb)},
	{"concurrent_builds", "concurrent_builds", "concurrent builds", 0, 0,
	 offsetof(al_quota, concurrent_builds)},
	{"concurrent_streams", "concurrent_streams", "concurrent streams", 0, 0,
	 offsetof(al_quota, concurrent_streams)},
	{"creates_per_minute", "creates_per_minute", "creates per minute", 0, 0,
	 offsetof(al_quota, creates_per_minute)},
	{"cpus", "cpu_millis", "cpus", 0, 1, offsetof(al_quota, cpu_millis)},
};

/* The column list of the quotas, in al_quota_fields' order. */
#define QUOTA_COLUMNS                                                          \
	"running_sandboxes, memory_mb, disk_mb, concurrent_builds,"            \
	" concurrent_streams, creates_per_minute, cpu_millis"

static uint64_t *quota_slot(al_quota *q, size_t field)
{
	return (uint64_t *)(void *)((char *)q + al_quota_fields[field].offset);
}

uint64_t al_quota_value(const al_quota *q, size_t field)
{
	uint64_t v;
	memcpy(&v, (const char *)q + al_quota_fields[field].offset, sizeof v);
	return v;
}

int al_quota_check(const al_quota *limit, const al_quota *used,
		   const al_quota *asked, size_t *field, al_err *err)
{
	for (size_t i = 0; i < AL_QUOTA_NFIELDS; i++) {
		const al_quota_field *f = &al_quota_fields[i];
		uint64_t a = al_quota_value(asked, i);
		uint64_t u = al_quota_value(used, i);
		uint64_t l = al_quota_value(limit, i);
		if (a == 0 || (u <= l && a <= l - u))
			continue;
		if (field != NULL)
			*field = i;
		if (f->mib)
			return al_err_set(err, AL_EQUOTA, 0,
					  "%s: %" PRIu64 " of %" PRIu64
					  " MiB in use, %" PRIu64 " MiB asked",
					  f->what, u, l, a);
		if (f->milli) {
			char us[AL_MILLIS_STRLEN], ls[AL_MILLIS_STRLEN],
				as[AL_MILLIS_STRLEN];
			al_millis_format(u, us);
			al_millis_format(l, ls);
			al_millis_format(a, as);
			return al_err_set(err, AL_EQUOTA, 0,
					  "%s: %s of %s in use, %s asked",
					  f->what, us, ls, as);
		}
		return al_err_set(err, AL_EQUOTA, 0,
				  "%s: %" PRIu64 " of %" PRIu64, f->what, u, l);
	}
	return 0;
}

int al_quota_update_parse(const char *buf, size_t len, al_quota_update *out,
			  al_err *err)
{
	const char *names[AL_QUOTA_NFIELDS];
	int milli[AL_QUOTA_NFIELDS];
	al_json_setting s[AL_QUOTA_NFIELDS];
	memset(out, 0, sizeof *out);
	for (size_t i = 0; i < AL_QUOTA_NFIELDS; i++) {
		names[i] = al_quota_fields[i].name;
		milli[i] = al_quota_fields[i].milli;
	}
	/* The quota columns are bigint: anything up to 2^62 fits. */
	if (al_json_settings_parse_milli(buf, len, names, milli,
					 AL_QUOTA_NFIELDS, INT64_C(1) << 62, s,
					 err) < 0)
		return -1;
	for (size_t i = 0; i < AL_QUOTA_NFIELDS; i++) {
		out->set[i] = s[i].set;
		out->is_null[i] = s[i].is_null;
		*quota_slot(&out->value, i) = (uint64_t)s[i].value;
	}
	return 0;
}

static int exec_cmd(al_db *db, const char *sql, int n,
		    const char *const *params, al_err *err)
{
	PGresult *res = al_db_exec(db, sql, n, params, err);
	if (res == NULL)
		return -1;
	PQclear(res);
	return 0;
}

int al_project_create(al_db *db, const char *name, al_err *err)
{
	if (name == NULL || !al_id_valid(name))
		return al_err_set(err, AL_EINVAL, 0,
				  "'name' must be 1-63 characters of "
				  "[a-z0-9-], not starting with '-'");
	const char *p[] = {name};
	if (exec_cmd(db, "INSERT INTO projects (name) VALUES ($1)", 1, p, err) <
	    0) {
		if (err != NULL && err->code == AL_EEXIST)
			al_err_set(err, AL_EEXIST, 0,
				   "project '%s' exists already", name);
		return -1;
	}
	return 0;
}

int al_project_exists(al_db *db, const char *name, al_err *err)
{
	if (name == NULL || !al_id_valid(name))
		return 0;
	const char *p[] = {name};
	PGresult *res = al_db_exec(db, "SELECT 1 FROM projects WHERE name = $1",
				   1, p, err);
	if (res == NULL)
		return -1;
	int n = PQntuples(res);
	PQclear(res);
	return n == 1;
}

/* Effective quotas of row i (columns from col on, QUOTA_COLUMNS order);
 * own[k] tells whether the project set field k itself. */
static void row_quota(PGresult *res, int i, int col, const al_config *cfg,
		      al_quota *q, int own[AL_QUOTA_NFIELDS])
{
	*q = cfg->quota;
	for (size_t k = 0; k < AL_QUOTA_NFIELDS; k++) {
		own[k] = !PQgetisnull(res, i, col + (int)k);
		if (own[k])
			*quota_slot(q, k) = strtoull(PQgetvalue(res, i,
								col + (int)k),
						     NULL, 10);
	}
}

static json_object *project_json(PGresult *res, int i, const al_config *cfg)
{
	al_quota q;
	int own[AL_QUOTA_NFIELDS];
	row_quota(res, i, 2, cfg, &q, own);
	static const al_db_col cols[] = {
		{"name", AL_DB_STR},
		{"created_at", AL_DB_STR},
	};
	json_object *o = al_db_row_json(res, i, cols, 2);
	json_object *quota = json_object_new_object();
	json_object *defaults = json_object_new_array();
	for (size_t k = 0; k < AL_QUOTA_NFIELDS; k++) {
		const char *name = al_quota_fields[k].name;
		uint64_t v = al_quota_value(&q, k);
		json_object_object_add(
			quota, name,
			al_quota_fields[k].milli
				? al_json_new_millis(v)
				: json_object_new_int64((int64_t)v));
		if (!own[k])
			json_object_array_add(defaults,
					      json_object_new_string(name));
	}
	json_object_object_add(o, "quota", quota);
	json_object_object_add(o, "quota_defaults", defaults);
	/* Its sandboxes' qgroup on the pool is 1/<this> (core/pool/poolcap.h). */
	json_object_object_add(o, "pool_group",
			       json_object_new_int64(strtoll(
				       PQgetvalue(res, i,
						  2 + (int)AL_QUOTA_NFIELDS),
				       NULL, 10)));
	return o;
}

#define PROJECT_SELECT                                                         \
	"SELECT name, to_char(created_at AT TIME ZONE 'UTC',"                  \
	" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), " QUOTA_COLUMNS                \
	", pool_group FROM projects"

json_object *al_project_list(al_db *db, const al_config *cfg, al_err *err)
{
	PGresult *res = al_db_exec(db, PROJECT_SELECT " ORDER BY name", 0, NULL,
				   err);
	if (res == NULL)
		return NULL;
	json_object *arr = json_object_new_array();
	for (int i = 0; i < PQntuples(res); i++)
		json_object_array_add(arr, project_json(res, i, cfg));
	PQclear(res);
	return arr;
}

json_object *al_project_get(al_db *db, const al_config *cfg, const char *name,
			    al_err *err)
{
	if (name == NULL || !al_id_valid(name)) {
		al_err_set(err, AL_ENOENT, 0, "no such project");
		return NULL;
	}
	const char *p[] = {name};
	PGresult *res = al_db_exec(db, PROJECT_SELECT " WHERE name = $1", 1, p,
				   err);
	if (res == NULL)
		return NULL;
	json_object *o = NULL;
	if (PQntuples(res) == 1)
		o = project_json(res, 0, cfg);
	else
		al_err_set(err, AL_ENOENT, 0, "no project '%s'", name);
	PQclear(res);
	return o;
}

int al_project_set_quota(al_db *db, const char *name, const al_quota_update *u,
			 al_err *err)
{
	char vals[AL_QUOTA_NFIELDS][24];
	const char *p[1 + 2 * AL_QUOTA_NFIELDS];
	if (name == NULL || !al_id_valid(name))
		return al_err_set(err, AL_ENOENT, 0, "no such project");
	p[0] = name;
	/* Per field: whether to change it ($2k) and the value ($2k+1, NULL
	 * = back to the default). */
	for (size_t k = 0; k < AL_QUOTA_NFIELDS; k++) {
		snprintf(vals[k], sizeof vals[k], "%" PRIu64,
			 al_quota_value(&u->value, k));
		p[1 + 2 * k] = u->set[k] ? "t" : "f";
		p[2 + 2 * k] = u->set[k] && !u->is_null[k] ? vals[k] : NULL;
	}
	long long n = al_db_exec_rows(
		db,
		"UPDATE projects SET"
		" running_sandboxes = CASE WHEN $2::boolean THEN $3::bigint"
		"  ELSE running_sandboxes END,"
		" memory_mb = CASE WHEN $4::boolean THEN $5::bigint"
		"  ELSE memory_mb END,"
		" disk_mb = CASE WHEN $6::boolean THEN $7::bigint"
		"  ELSE disk_mb END,"
		" concurrent_builds = CASE WHEN $8::boolean THEN $9::bigint"
		"  ELSE concurrent_builds END,"
		" concurrent_streams = CASE WHEN $10::boolean THEN $11::bigint"
		"  ELSE concurrent_streams END,"
		" creates_per_minute = CASE WHEN $12::boolean THEN $13::bigint"
		"  ELSE creates_per_minute END,"
		" cpu_millis = CASE WHEN $14::boolean THEN $15::bigint"
		"  ELSE cpu_millis END"
		" WHERE name = $1",
		1 + 2 * AL_QUOTA_NFIELDS, p, err);
	if (n < 0)
		return -1;
	if (n != 1)
		return al_err_set(err, AL_ENOENT, 0, "no project '%s'", name);
	return 0;
}

/* name's quotas (and its pool group, when pool_group is not NULL); with
 * lock, its row stays locked until the transaction ends. */
static int read_quota(al_db *db, const al_config *cfg, const char *name,
		      int lock, al_quota *limit, int64_t *pool_group,
		      al_err *err)
{
	if (name == NULL || !al_id_valid(name))
		return al_err_set(err, AL_ENOENT, 0, "no such project");
	const char *p[] = {name};
	static const char locked[] = "SELECT " QUOTA_COLUMNS ", pool_group"
				     " FROM projects WHERE name = $1"
				     " FOR UPDATE";
	static const char plain[] = "SELECT " QUOTA_COLUMNS ", pool_group"
				    " FROM projects WHERE name = $1";
	PGresult *res = al_db_exec(db, lock ? locked : plain, 1, p, err);
	if (res == NULL)
		return -1;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return al_err_set(err, AL_ENOENT, 0, "no project '%s'", name);
	}
	int own[AL_QUOTA_NFIELDS];
	row_quota(res, 0, 0, cfg, limit, own);
	if (pool_group != NULL)
		*pool_group = strtoll(PQgetvalue(res, 0, AL_QUOTA_NFIELDS),
				      NULL, 10);
	PQclear(res);
	return 0;
}

/* BEGIN, lock the project's row, read its quotas. */
static int begin_locked(al_db *db, const al_config *cfg, const char *name,
			al_quota *limit, int64_t *pool_group, al_err *err)
{
	if (al_db_begin(db, err) < 0)
		return -1;
	if (read_quota(db, cfg, name, 1, limit, pool_group, err) < 0) {
		al_db_rollback(db);
		return -1;
	}
	return 0;
}

int al_project_begin_sandbox(al_db *db, const al_config *cfg, const char *name,
			     uint64_t memory_mb, uint64_t disk_mb,
			     al_project_pool *pool, uint64_t cpu_millis,
			     int *retry_after_s, al_err *err)
{
	al_quota limit, used = {0};
	al_quota asked = {
		.running_sandboxes = 1,
		.memory_mb = memory_mb,
		.disk_mb = disk_mb,
		.creates_per_minute = 1,
		.cpu_millis = cpu_millis,
	};
	*retry_after_s = 0;
	if (begin_locked(db, cfg, name, &limit, &pool->group, err) < 0)
		return -1;
	pool->disk_quota_mb = limit.disk_mb;
	/* The project's row stays locked until this transaction commits:
	 * waiting for its WAL flush there serialised a burst's creates on
	 * the disk's fsync. The row is made durable before the create is
	 * answered by the next synchronous commit, the running mark
	 * (al_sandbox_mark_running): WAL is flushed in order. A crash in
	 * between loses a row whose create was never answered; the
	 * controller's reconcile removes what its start left. */
	PGresult *sc = al_db_exec(db, "SET LOCAL synchronous_commit TO off", 0,
				  NULL, err);
	if (sc == NULL)
		goto fail;
	PQclear(sc);
	char lim[24];
	snprintf(lim, sizeof lim, "%" PRIu64,
		 limit.creates_per_minute > 0 ? limit.creates_per_minute : 1);
	const char *p[] = {name, lim};
	/* Live sandboxes, their memory, disk and CPU limits, the creates of
	 * the last minute and when the oldest of the last `lim` of them
	 * leaves that minute. */
	PGresult *res = al_db_exec(
		db,
		"SELECT count(*) FILTER (WHERE state IN ('creating', 'running',"
		"  'paused')),"
		" (coalesce(sum(memory_bytes) FILTER (WHERE state IN"
		"  ('creating', 'running', 'paused')), 0) / 1048576)::bigint,"
		" (coalesce(sum(disk_bytes) FILTER (WHERE state IN"
		"  ('creating', 'running', 'paused')), 0) / 1048576)::bigint,"
		" count(*) FILTER (WHERE created_at >"
		"  now() - interval '1 min'),"
		" (SELECT ceil(extract(epoch FROM created_at + interval '1 min'"
		"   - now())) FROM sandboxes WHERE project = $1"
		"   AND created_at > now() - interval '1 min'"
		"   ORDER BY created_at DESC OFFSET $2::bigint - 1 LIMIT 1),"
		" coalesce(sum(cpu_millis) FILTER (WHERE state IN"
		"  ('creating', 'running', 'paused')), 0)::bigint"
		" FROM sandboxes WHERE project = $1 AND (state <> 'deleted'"
		"  OR created_at > now() - interval '1 min')",
		2, p, err);
	if (res == NULL)
		goto fail;
	used.running_sandboxes = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
	used.memory_mb = strtoull(PQgetvalue(res, 0, 1), NULL, 10);
	used.disk_mb = strtoull(PQgetvalue(res, 0, 2), NULL, 10);
	used.creates_per_minute = strtoull(PQgetvalue(res, 0, 3), NULL, 10);
	int wait = PQgetisnull(res, 0, 4) ? 0 : atoi(PQgetvalue(res, 0, 4));
	used.cpu_millis = strtoull(PQgetvalue(res, 0, 5), NULL, 10);
	PQclear(res);
	size_t over = 0;
	if (al_quota_check(&limit, &used, &asked, &over, err) < 0) {
		/* The rate frees itself by waiting this long; the others
		 * when one of the project's sandboxes ends, which a client
		 * in a burst can only poll for. */
		if (al_quota_fields[over].offset ==
		    offsetof(al_quota, creates_per_minute))
			*retry_after_s = wait > 0 ? wait : 1;
		else
			*retry_after_s = AL_QUOTA_RETRY_S;
		goto fail;
	}
	return 0;
fail:
	al_db_rollback(db);
	return -1;
}

int al_project_each_pool(al_db *db, const al_config *cfg,
			 int (*fn)(const char *name, const al_project_pool *p,
				   void *arg),
			 void *arg, al_err *err)
{
	PGresult *res = al_db_exec(db,
				   "SELECT name, pool_group, " QUOTA_COLUMNS
				   " FROM projects ORDER BY pool_group",
				   0, NULL, err);
	if (res == NULL)
		return -1;
	int rc = 0;
	for (int i = 0; i < PQntuples(res) && rc == 0; i++) {
		al_quota q;
		int own[AL_QUOTA_NFIELDS];
		row_quota(res, i, 2, cfg, &q, own);
		al_project_pool p = {
			.group = strtoll(PQgetvalue(res, i, 1), NULL, 10),
			.disk_quota_mb = q.disk_mb,
		};
		rc = fn(PQgetvalue(res, i, 0), &p, arg);
	}
	PQclear(res);
	return rc;
}

int al_project_begin_build(al_db *db, const al_config *cfg, const char *name,
			   al_err *err)
{
	al_quota limit, used = {0}, asked = {.concurrent_builds = 1};
	if (begin_locked(db, cfg, name, &limit, NULL, err) < 0)
		return -1;
	const char *p[] = {name};
	PGresult *res = al_db_exec(db,
				   "SELECT count(*) FROM template_builds"
				   " WHERE project = $1 AND status IN"
				   " ('queued', 'running')",
				   1, p, err);
	if (res == NULL)
		goto fail;
	used.concurrent_builds = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	if (al_quota_check(&limit, &used, &asked, NULL, err) < 0)
		goto fail;
	return 0;
fail:
	al_db_rollback(db);
	return -1;
}

int al_project_begin_stream(al_db *db, const al_config *cfg,
			    const char *project, al_err *err)
{
	al_quota limit;
	return begin_locked(db, cfg, project, &limit, NULL, err);
}

int al_project_stream_add(al_db *db, const al_config *cfg, const char *project,
			  const char *sandbox, long long key_id,
			  const char *lease, al_err *err)
{
	al_quota limit, used = {0}, asked = {.concurrent_streams = 1};
	if (read_quota(db, cfg, project, 0, &limit, NULL, err) < 0)
		return -1;
	const char *p[] = {project};
	PGresult *res = al_db_exec(db,
				   "SELECT count(*) FROM stream_leases"
				   " WHERE project = $1",
				   1, p, err);
	if (res == NULL)
		return -1;
	used.concurrent_streams = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	if (al_quota_check(&limit, &used, &asked, NULL, err) < 0)
		return -1;
	char kbuf[24];
	snprintf(kbuf, sizeof kbuf, "%lld", key_id);
	const char *ip[] = {lease, project, sandbox, kbuf};
	return exec_cmd(db,
			"INSERT INTO stream_leases (lease, project, sandbox_id,"
			" key_id) VALUES ($1, $2, $3, $4::bigint)",
			4, ip, err);
}

void al_project_stream_release(al_db *db, const char *lease)
{
	const char *p[] = {lease};
	exec_cmd(db, "DELETE FROM stream_leases WHERE lease = $1", 1, p, NULL);
}

json_object *al_project_stream_leases(al_db *db, const char *project,
				      long long key_id, al_err *err)
{
	char kbuf[24];
	snprintf(kbuf, sizeof kbuf, "%lld", key_id);
	const char *p[] = {project, kbuf};
	PGresult *res =
		al_db_exec(db,
			   "SELECT lease, sandbox_id FROM stream_leases"
			   " WHERE ($1::text IS NULL OR project = $1)"
			   " AND ($2::bigint = 0 OR key_id = $2::bigint)"
			   " ORDER BY sandbox_id, lease LIMIT 100000",
			   2, p, err);
	if (res == NULL)
		return NULL;
	static const al_db_col cols[] = {
		{"lease", AL_DB_STR},
		{"sandbox_id", AL_DB_STR},
	};
	json_object *arr = al_db_rows_json(res, cols, 2);
	PQclear(res);
	if (arr == NULL)
		al_err_set(err, AL_ENOMEM, 0, "out of memory");
	return arr;
}

/* ---- keys ---- */

static int key_name_valid(const char *name)
{
	size_t n = name != NULL ? strlen(name) : 0;
	if (n == 0 || n > AL_KEY_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return 0;
	return 1;
}

int al_project_key_create(al_db *db, const char *project, al_role role,
			  const char *name, long long *id,
			  char key[AL_AUTH_KEY_LEN + 1], al_err *err)
{
	char hash[65];
	if (!key_name_valid(name))
		return al_err_set(err, AL_EINVAL, 0,
				  "'name' must be 1-%d characters, no control "
				  "characters",
				  AL_KEY_NAME_MAX);
	int exists = al_project_exists(db, project, err);
	if (exists < 0)
		return -1;
	if (!exists)
		return al_err_set(err, AL_EINVAL, 0, "no project '%s'",
				  project != NULL && al_id_valid(project)
					  ? project
					  : "");
	if (al_auth_new_key(key, hash, err) < 0)
		return -1;
	const char *p[] = {name, hash, project, al_role_name(role)};
	PGresult *res = al_db_exec(db,
				   "INSERT INTO api_keys (name, key_hash,"
				   " project, role) VALUES ($1, $2, $3, $4)"
				   " RETURNING id",
				   4, p, err);
	if (res == NULL) {
		explicit_bzero(key, AL_AUTH_KEY_LEN + 1);
		return -1;
	}
	*id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return 0;
}

json_object *al_project_key_list(al_db *db, const char *project, al_err *err)
{
	const char *p[] = {project};
	PGresult *res = al_db_exec(
		db,
		"SELECT id, name, project, role,"
		" to_char(created_at AT TIME ZONE 'UTC',"
		" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
		" FROM api_keys WHERE revoked_at IS NULL"
		" AND ($1::text IS NULL OR project = $1) ORDER BY id",
		1, p, err);
	if (res == NULL)
		return NULL;
	static const al_db_col cols[] = {
		{"id", AL_DB_INT},	   {"name", AL_DB_STR},
		{"project", AL_DB_STR},	   {"role", AL_DB_STR},
		{"created_at", AL_DB_STR},
	};
	json_object *arr = al_db_rows_json(res, cols, 5);
	PQclear(res);
	return arr;
}

int al_project_key_revoke(al_db *db, long long id, al_err *err)
{
	char ibuf[24];
	snprintf(ibuf, sizeof ibuf, "%lld", id);
	const char *p[] = {ibuf};
	long long n = al_db_exec_rows(db,
				      "UPDATE api_keys SET revoked_at = now()"
				      " WHERE id = $1::bigint"
				      " AND revoked_at IS NULL",
				      1, p, err);
	if (n < 0)
		return -1;
	if (n != 1)
		return al_err_set(err, AL_ENOENT, 0, "no key %lld", id);
	return 0;
}
