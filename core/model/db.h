/* db: PostgreSQL access (libpq). One al_db per thread; never shared.
 * Migrations are core/model/sql/NNN_name.sql, applied in order, each once, in a
 * transaction, recorded in schema_migrations. */
#ifndef AL_DB_H
#define AL_DB_H

#include <json-c/json.h>
#include <libpq-fe.h>

#include "base/err.h"

/* Statements al_db_exec prepared on this connection, by their text: a
 * create runs a dozen, and parsing and planning each anew was half of
 * PostgreSQL's time in a burst. Bounded (a statement past the bound
 * runs unprepared); forgotten when the connection is made again. */
#define AL_DB_PREPARED_MAX 128
typedef struct al_db_stmt {
	unsigned long hash;
	char *sql;
} al_db_stmt;

typedef struct al_db {
	PGconn *conn;
	char conninfo[512];
	al_db_stmt prepared[AL_DB_PREPARED_MAX];
	int nprepared;
} al_db;

/* Connect; AL_EUNAVAIL when the server cannot be reached. */
al_db *al_db_open(const char *conninfo, al_err *err);
void al_db_close(al_db *db);
/* Reconnect if the connection broke (after a server restart). */
int al_db_ensure(al_db *db, al_err *err);
/* Apply pending migrations from sql_dir; serialized across processes
 * with an advisory lock. */
int al_db_migrate(al_db *db, const char *sql_dir, al_err *err);
/* Run a parameterized statement (text params, NULL = SQL NULL),
 * prepared on the connection at its first use (one statement per
 * call, as PQexecParams takes). Returns the result for PGRES_TUPLES_OK / PGRES_COMMAND_OK, else NULL
 * with AL_EDB (or AL_EEXIST on unique violation). Caller PQclear()s. */
PGresult *al_db_exec(al_db *db, const char *sql, int nparams,
		     const char *const *params, al_err *err);
/* A statement that returns no rows (UPDATE, DELETE): the number of rows
 * it changed, or -1. */
long long al_db_exec_rows(al_db *db, const char *sql, int nparams,
			  const char *const *params, al_err *err);
/* Row i of res as a JSON object: column c under cols[c].name, rendered
 * as its kind; SQL NULL becomes JSON null. */
typedef enum al_db_kind { AL_DB_STR, AL_DB_INT, AL_DB_BOOL } al_db_kind;
typedef struct al_db_col {
	const char *name;
	al_db_kind kind;
} al_db_col;
json_object *al_db_row_json(const PGresult *res, int i, const al_db_col *cols,
			    int ncols);
/* Every row of res so, as an array. */
json_object *al_db_rows_json(const PGresult *res, const al_db_col *cols,
			     int ncols);
/* Delete the rows of table (a constant of the caller's: it is pasted
 * into the statement) whose column "at" is older than days, at most
 * 10,000 a call so one call never holds the table long; how many went,
 * or -1. */
long long al_db_prune_older(al_db *db, const char *table, unsigned days,
			    al_err *err);
/* The arguments of one page of a newest-first listing: before is the
 * previous page's cursor "<unix µs>-<row id>" (its last row), or NULL
 * or "" for the first page; limit is 1..max. us and id are "" on the
 * first page (pass NULL then); lim is limit + 1, so that a row past the
 * page says there is a next one. -1 (AL_EINVAL) on a bad cursor or
 * limit. */
typedef struct al_db_page {
	char us[24], id[24], lim[16];
} al_db_page;
int al_db_page_start(al_db_page *p, const char *before, int limit, int max,
		     al_err *err);
/* Transactions. Rollback has nothing to report: a connection that broke
 * has no transaction left. */
int al_db_begin(al_db *db, al_err *err);
int al_db_commit(al_db *db, al_err *err);
void al_db_rollback(al_db *db);

#endif
