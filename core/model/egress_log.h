/* egress_log: the egress decisions in PostgreSQL (table egress_log,
 * core/model/sql/008_network.sql and 010_egress_once.sql): written in batches
 * by the controller from the gateways' files (core/net/egress.h), exactly
 * once each, listed by the API newest first, pruned by age. */
#ifndef AL_EGRESS_LOG_H
#define AL_EGRESS_LOG_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "base/err.h"
#include "model/db.h"
#include "net/egress.h"

/* n records in one statement (its own transaction). A record whose
 * place (sandbox, seq, idx) is in already is skipped, rows and counts:
 * inserting a batch again changes nothing. */
int al_egress_log_insert(al_db *db, const al_egress_rec *recs, size_t n,
			 al_err *err);

#define AL_EGRESS_LIST_DEFAULT 100
#define AL_EGRESS_LIST_MAX 1000
/* A cursor: "<unix µs>-<row id>" of the last entry of a page. */
#define AL_EGRESS_CURSOR_MAX 48

/* Up to limit entries of sandbox, newest first (by the decision's time,
 * then row), older than cursor before (NULL or "": from the newest):
 * *out an array of {"at","allow","reason","protocol","name","port"
 * [,"method","path"][,"dropped"]}; next gets the cursor of the page's
 * last entry when there may be more ("" otherwise). AL_EINVAL for a
 * malformed cursor. */
int al_egress_log_list(al_db *db, const char *sandbox, int limit,
		       const char *before, json_object **out,
		       char next[AL_EGRESS_CURSOR_MAX], al_err *err);

/* Decisions of sandbox counted since it was created (retention does
 * not lower them): allowed, denied, and dropped by its gateway unlogged. */
typedef struct al_egress_counts {
	uint64_t allowed, denied, dropped;
} al_egress_counts;
int al_egress_log_counts(al_db *db, const char *sandbox, al_egress_counts *out,
			 al_err *err);

/* Delete rows older than days, at most 10,000 a call; how many went (or
 * -1). */
long long al_egress_log_prune(al_db *db, unsigned days, al_err *err);

#endif
