#include "model/db.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"

/* Key of the advisory lock that serializes migrations between the
 * programs that start at the same time ("AIRL"). */
#define MIGRATE_LOCK_KEY "1095324236"
#define SQL_FILE_MAX (1 << 20)

/* libpq error text spans lines; keep the first one. */
static void first_line(char *dst, size_t dstlen, const char *src)
{
	if (src == NULL)
		src = "unknown error";
	size_t n = strcspn(src, "\n");
	if (n >= dstlen)
		n = dstlen - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static int conn_err(al_db *db, al_code code, const char *what, al_err *err)
{
	char line[256];
	first_line(line, sizeof line, PQerrorMessage(db->conn));
	return al_err_set(err, code, 0, "%s: %s", what, line);
}

/* Server notices ("relation exists, skipping") are not errors; keep
 * them out of stderr. */
static void notice_sink(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

/* Each process runs a handful of fixed statements over many connections
 * (an fcgi worker has one per thread), so a connection runs each only a
 * few times: under the default plan cache mode every one of those runs
 * was planned afresh (custom plans for a statement's first five runs),
 * the larger part of a create's PostgreSQL time in a burst. Their
 * parameters are keys and bounds whose plan does not depend on the
 * value. */
static int session_setup(al_db *db, al_err *err)
{
	PGresult *res = PQexec(db->conn,
			       "SET plan_cache_mode = force_generic_plan");
	int ok = res != NULL && PQresultStatus(res) == PGRES_COMMAND_OK;
	PQclear(res);
	return ok ? 0
		  : conn_err(db, AL_EUNAVAIL, "setting up the session", err);
}

al_db *al_db_open(const char *conninfo, al_err *err)
{
	if (conninfo == NULL ||
	    strlen(conninfo) >= sizeof((al_db *)0)->conninfo) {
		al_err_set(err, AL_EINVAL, 0, "database conninfo too long");
		return NULL;
	}
	al_db *db = calloc(1, sizeof *db);
	if (db == NULL) {
		al_err_set(err, AL_ENOMEM, 0, "out of memory");
		return NULL;
	}
	snprintf(db->conninfo, sizeof db->conninfo, "%s", conninfo);
	db->conn = PQconnectdb(conninfo);
	if (db->conn == NULL) {
		free(db);
		al_err_set(err, AL_ENOMEM, 0, "out of memory");
		return NULL;
	}
	if (PQstatus(db->conn) != CONNECTION_OK) {
		conn_err(db, AL_EUNAVAIL, "connecting to PostgreSQL", err);
		al_db_close(db);
		return NULL;
	}
	PQsetNoticeProcessor(db->conn, notice_sink, NULL);
	if (session_setup(db, err) < 0) {
		al_db_close(db);
		return NULL;
	}
	return db;
}

/* The server forgets a connection's statements with it. */
static void forget_prepared(al_db *db)
{
	for (int i = 0; i < db->nprepared; i++)
		free(db->prepared[i].sql);
	db->nprepared = 0;
}

void al_db_close(al_db *db)
{
	if (db == NULL)
		return;
	if (db->conn != NULL)
		PQfinish(db->conn);
	forget_prepared(db);
	free(db);
}

int al_db_ensure(al_db *db, al_err *err)
{
	if (PQstatus(db->conn) == CONNECTION_OK)
		return 0;
	forget_prepared(db);
	PQreset(db->conn);
	if (PQstatus(db->conn) != CONNECTION_OK)
		return conn_err(db, AL_EUNAVAIL, "reconnecting to PostgreSQL",
				err);
	if (session_setup(db, err) < 0)
		return -1;
	al_info("reconnected to PostgreSQL");
	return 0;
}

static unsigned long sql_hash(const char *s)
{
	unsigned long h = 5381;
	while (*s != '\0')
		h = h * 33 + (unsigned char)*s++;
	return h;
}

/* The name sql is prepared under on db's connection ("al<i>"), preparing
 * it now if it is new; 0 when it runs unprepared: the bound is reached,
 * or the server refused it (the unprepared run then reports why). */
static int prepared_name(al_db *db, const char *sql, int nparams, char name[16])
{
	unsigned long h = sql_hash(sql);
	int i = 0;
	while (i < db->nprepared && (db->prepared[i].hash != h ||
				     strcmp(db->prepared[i].sql, sql) != 0))
		i++;
	snprintf(name, 16, "al%d", i);
	if (i < db->nprepared)
		return 1;
	if (i == AL_DB_PREPARED_MAX)
		return 0;
	char *copy = strdup(sql);
	if (copy == NULL)
		return 0;
	PGresult *res = PQprepare(db->conn, name, sql, nparams, NULL);
	int ok = res != NULL && PQresultStatus(res) == PGRES_COMMAND_OK;
	PQclear(res);
	if (!ok) {
		free(copy);
		return 0;
	}
	db->prepared[i] = (al_db_stmt){.hash = h, .sql = copy};
	db->nprepared++;
	return 1;
}

static PGresult *exec_once(al_db *db, const char *sql, int nparams,
			   const char *const *params, al_err *err)
{
	char name[16];
	PGresult *res = prepared_name(db, sql, nparams, name)
				? PQexecPrepared(db->conn, name, nparams,
						 params, NULL, NULL, 0)
				: PQexecParams(db->conn, sql, nparams, NULL,
					       params, NULL, NULL, 0);
	if (res == NULL) {
		conn_err(db, AL_EDB, "query", err);
		return NULL;
	}
	ExecStatusType st = PQresultStatus(res);
	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
		return res;

	/* Only the primary message: the detail line can quote parameter
	 * values, which may be secrets. */
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	char line[256];
	first_line(line, sizeof line,
		   msg != NULL ? msg : PQerrorMessage(db->conn));
	al_code code = AL_EDB;
	if (state != NULL && strcmp(state, "23505") == 0)
		code = AL_EEXIST;
	else if (PQstatus(db->conn) != CONNECTION_OK)
		code = AL_EUNAVAIL;
	al_err_set(err, code, 0, "database: %s", line);
	PQclear(res);
	return NULL;
}

PGresult *al_db_exec(al_db *db, const char *sql, int nparams,
		     const char *const *params, al_err *err)
{
	if (db == NULL || db->conn == NULL) {
		al_err_set(err, AL_EUNAVAIL, 0, "no database connection");
		return NULL;
	}
	if (al_db_ensure(db, err) < 0)
		return NULL;
	PGTransactionStatusType ts = PQtransactionStatus(db->conn);
	al_err tmp;
	PGresult *res = exec_once(db, sql, nparams, params, &tmp);
	if (res != NULL)
		return res;
	/* A server restart shows up as a broken connection on first use.
	 * Outside a transaction the statement did not run on the old
	 * connection, so one retry on a fresh one is safe. */
	if (PQstatus(db->conn) != CONNECTION_OK && ts == PQTRANS_IDLE &&
	    al_db_ensure(db, NULL) == 0)
		return exec_once(db, sql, nparams, params, err);
	if (err != NULL)
		*err = tmp;
	return NULL;
}

static int exec_cmd(al_db *db, const char *sql, al_err *err)
{
	PGresult *res = al_db_exec(db, sql, 0, NULL, err);
	if (res == NULL)
		return -1;
	PQclear(res);
	return 0;
}

long long al_db_exec_rows(al_db *db, const char *sql, int nparams,
			  const char *const *params, al_err *err)
{
	PGresult *res = al_db_exec(db, sql, nparams, params, err);
	if (res == NULL)
		return -1;
	long long n = atoll(PQcmdTuples(res));
	PQclear(res);
	return n;
}

json_object *al_db_row_json(const PGresult *res, int i, const al_db_col *cols,
			    int ncols)
{
	json_object *o = json_object_new_object();
	for (int c = 0; o != NULL && c < ncols; c++) {
		const char *v = PQgetvalue(res, i, c);
		json_object *j = NULL;
		if (PQgetisnull(res, i, c))
			j = NULL;
		else if (cols[c].kind == AL_DB_INT)
			j = json_object_new_int64(strtoll(v, NULL, 10));
		else if (cols[c].kind == AL_DB_BOOL)
			j = json_object_new_boolean(strcmp(v, "t") == 0);
		else
			j = json_object_new_string(v);
		json_object_object_add(o, cols[c].name, j);
	}
	return o;
}

json_object *al_db_rows_json(const PGresult *res, const al_db_col *cols,
			     int ncols)
{
	json_object *arr = json_object_new_array();
	for (int i = 0; arr != NULL && i < PQntuples(res); i++)
		json_object_array_add(arr, al_db_row_json(res, i, cols, ncols));
	return arr;
}

int al_db_begin(al_db *db, al_err *err)
{
	return exec_cmd(db, "BEGIN", err);
}

int al_db_commit(al_db *db, al_err *err)
{
	return exec_cmd(db, "COMMIT", err);
}

void al_db_rollback(al_db *db)
{
	exec_cmd(db, "ROLLBACK", NULL);
}

/* Read a migration file fully; NUL-terminated. */
static char *read_sql(const char *path, al_err *err)
{
	al_autofd int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		al_err_sys(err, AL_ESYS, errno, "open %s", path);
		return NULL;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		al_err_sys(err, AL_ESYS, errno, "stat %s", path);
		return NULL;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > SQL_FILE_MAX) {
		al_err_set(err, AL_EINVAL, 0,
			   "%s: not a regular file under 1 MiB", path);
		return NULL;
	}
	char *buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL) {
		al_err_set(err, AL_ENOMEM, 0, "out of memory");
		return NULL;
	}
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			al_err_sys(err, AL_ESYS, n < 0 ? errno : EIO, "read %s",
				   path);
			free(buf);
			return NULL;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	if (strlen(buf) != got) {
		al_err_set(err, AL_EINVAL, 0, "%s contains a NUL byte", path);
		free(buf);
		return NULL;
	}
	return buf;
}

/* "NNN_name.sql" -> NNN, or -1 when the name does not match. */
static int migration_version(const char *name)
{
	size_t n = strlen(name);
	if (n < 9 || strcmp(name + n - 4, ".sql") != 0)
		return -1;
	for (int i = 0; i < 3; i++)
		if (name[i] < '0' || name[i] > '9')
			return -1;
	if (name[3] != '_')
		return -1;
	for (size_t i = 4; i < n - 4; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return -1;
	}
	return (name[0] - '0') * 100 + (name[1] - '0') * 10 + (name[2] - '0');
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int apply_one(al_db *db, const char *sql_dir, const char *name,
		     int version, al_err *err)
{
	char path[1024];
	char vbuf[16];
	const char *params[1] = {vbuf};

	snprintf(vbuf, sizeof vbuf, "%d", version);
	PGresult *res = al_db_exec(
		db, "SELECT 1 FROM schema_migrations WHERE version = $1", 1,
		params, err);
	if (res == NULL)
		return -1;
	int done = PQntuples(res) > 0;
	PQclear(res);
	if (done)
		return 0;

	if (snprintf(path, sizeof path, "%s/%s", sql_dir, name) >=
	    (int)sizeof path)
		return al_err_set(err, AL_EINVAL, 0, "migration path too long");
	al_autofree char *sql = read_sql(path, err);
	if (sql == NULL)
		return -1;

	if (exec_cmd(db, "BEGIN", err) < 0)
		return -1;
	res = PQexec(db->conn, sql);
	if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK) {
		char line[256];
		const char *m = res != NULL
					? PQresultErrorField(
						  res, PG_DIAG_MESSAGE_PRIMARY)
					: NULL;
		first_line(line, sizeof line,
			   m != NULL ? m : PQerrorMessage(db->conn));
		PQclear(res);
		exec_cmd(db, "ROLLBACK", NULL);
		return al_err_set(err, AL_EDB, 0, "migration %s: %s", name,
				  line);
	}
	PQclear(res);
	res = al_db_exec(db,
			 "INSERT INTO schema_migrations (version) "
			 "VALUES ($1)",
			 1, params, err);
	if (res == NULL) {
		exec_cmd(db, "ROLLBACK", NULL);
		return -1;
	}
	PQclear(res);
	if (exec_cmd(db, "COMMIT", err) < 0)
		return -1;
	al_info("applied migration %s", name);
	return 0;
}

int al_db_migrate(al_db *db, const char *sql_dir, al_err *err)
{
	DIR *d = opendir(sql_dir);
	if (d == NULL)
		return al_err_sys(err, AL_ESYS, errno, "opendir %s", sql_dir);
	char *names[1000];
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (migration_version(de->d_name) < 0)
			continue;
		if (n == sizeof names / sizeof names[0])
			break;
		names[n] = strdup(de->d_name);
		if (names[n] == NULL) {
			closedir(d);
			for (size_t i = 0; i < n; i++)
				free(names[i]);
			return al_err_set(err, AL_ENOMEM, 0, "out of memory");
		}
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof names[0], cmp_names);

	int rc = -1;
	if (exec_cmd(db, "SELECT pg_advisory_lock(" MIGRATE_LOCK_KEY ")", err) <
	    0)
		goto out;
	if (exec_cmd(db,
		     "CREATE TABLE IF NOT EXISTS schema_migrations ("
		     "version integer PRIMARY KEY, "
		     "applied_at timestamptz NOT NULL DEFAULT now())",
		     err) < 0)
		goto unlock;
	int prev = -1;
	for (size_t i = 0; i < n; i++) {
		int v = migration_version(names[i]);
		if (v == prev) {
			al_err_set(err, AL_EINVAL, 0,
				   "two migrations numbered %03d", v);
			goto unlock;
		}
		prev = v;
		if (apply_one(db, sql_dir, names[i], v, err) < 0)
			goto unlock;
	}
	rc = 0;
unlock:
	exec_cmd(db, "SELECT pg_advisory_unlock(" MIGRATE_LOCK_KEY ")", NULL);
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	return rc;
}

static int cursor_parse(const char *c, char us[24], char id[24])
{
	const char *dash = strchr(c, '-');
	size_t a = dash != NULL ? (size_t)(dash - c) : 0;
	size_t b = dash != NULL ? strlen(dash + 1) : 0;
	if (a == 0 || a > 19 || b == 0 || b > 19 ||
	    strspn(c, "0123456789") != a || strspn(dash + 1, "0123456789") != b)
		return -1;
	memcpy(us, c, a);
	us[a] = '\0';
	memcpy(id, dash + 1, b + 1);
	return 0;
}

int al_db_page_start(al_db_page *p, const char *before, int limit, int max,
		     al_err *err)
{
	memset(p, 0, sizeof *p);
	if (before != NULL && before[0] != '\0' &&
	    cursor_parse(before, p->us, p->id) < 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "'before' is not a cursor from a previous"
				  " page's 'next'");
	if (limit < 1 || limit > max)
		return al_err_set(err, AL_EINVAL, 0, "'limit' must be 1 to %d",
				  max);
	snprintf(p->lim, sizeof p->lim, "%d", limit + 1);
	return 0;
}

long long al_db_prune_older(al_db *db, const char *table, unsigned days,
			    al_err *err)
{
	char sql[256], d[16];
	snprintf(sql, sizeof sql,
		 "DELETE FROM %s WHERE id IN (SELECT id FROM %s WHERE at <"
		 " now() - make_interval(days => $1::int) LIMIT 10000)",
		 table, table);
	snprintf(d, sizeof d, "%u", days);
	const char *params[] = {d};
	return al_db_exec_rows(db, sql, 1, params, err);
}
