/* audit: the credential audit log in PostgreSQL (table audit_log,
 * core/model/sql/009_credentials.sql). Uses (written in batches by the
 * controller from what gateways report) and management (create, rotate,
 * delete, failed access, written by the API). Rows name a credential,
 * never its value. Listed newest first, paged; pruned by age
 * (AIRLOCK_AUDIT_RETENTION_DAYS). */
#ifndef AL_AUDIT_H
#define AL_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "base/err.h"
#include "model/db.h"

/* One row. NULL strings, key_id 0 and status -1 are SQL NULL; at_us 0
 * is the insert's now(). */
typedef struct al_audit_rec {
	int64_t at_us; /* unix µs */
	const char *project;
	const char *sandbox;
	long long key_id; /* the API key behind the action or the sandbox */
	const char *credential; /* name */
	const char *action;	/* use|create|rotate|delete|denied_placeholder|
				 * rate_limited|failed_access|dropped */
	const char *host, *method, *path;
	int status;	      /* upstream status */
	const char *decision; /* allow|deny */
	const char *reason;
} al_audit_rec;

/* n records in one statement. */
int al_audit_insert(al_db *db, const al_audit_rec *recs, size_t n, al_err *err);

#define AL_AUDIT_LIST_DEFAULT 100
#define AL_AUDIT_LIST_MAX 1000
#define AL_AUDIT_CURSOR_MAX 48 /* "<unix µs>-<row id>" */

/* NULL / 0 members do not filter. */
typedef struct al_audit_filter {
	const char *project; /* rows of this project only (NULL: all) */
	const char *credential;
	const char *sandbox;
	int64_t since_us; /* at >= since */
} al_audit_filter;

/* Up to limit rows matching f, newest first, older than cursor before
 * (NULL or "": from the newest): *out an array of {"id","at","project",
 * "sandbox","key_id","credential","action","host","method","path",
 * "status","decision","reason"}; next the cursor of the page's last row
 * when there may be more, "" otherwise. AL_EINVAL for a bad cursor. */
int al_audit_list(al_db *db, const al_audit_filter *f, int limit,
		  const char *before, json_object **out,
		  char next[AL_AUDIT_CURSOR_MAX], al_err *err);

/* Delete rows older than days, at most 10,000 a call; how many went (or
 * -1). */
long long al_audit_prune(al_db *db, unsigned days, al_err *err);

#endif
