/* project: projects, their API keys and their quotas (tables projects
 * and api_keys: core/model/sql/004_tenancy.sql). A project name is an
 * al_id_valid id. A project's quota column is NULL until an admin sets
 * it; NULL means the operator's default (al_config.quota).
 *
 * Quotas are checked inside a transaction that holds the project's row
 * lock (al_project_begin_sandbox / _build): creates of one project
 * serialize there, so concurrent ones cannot overshoot. Open event
 * streams hold a lease each (table stream_leases). nginx carries a stream
 * and its sandbox's shim sees it end, so no program here releases a
 * lease at the end: a start that finds the leases at the limit asks the
 * shims which are still open and drops the rest. Stream starts of a
 * project serialize on its row lock until their stream exists in its
 * shim (al_project_begin_stream), so the leases such a check sees all
 * belong to streams the shims know. */
#ifndef AL_PROJECT_H
#define AL_PROJECT_H

#include <stddef.h>

#include <json-c/json.h>

#include "base/config.h"
#include "base/err.h"
#include "model/auth.h"
#include "model/db.h"

/* The quotas by API name, in al_quota's order; column: the projects
 * table's; what: the words of a quota_exceeded message. */
#define AL_QUOTA_NFIELDS 7
typedef struct al_quota_field {
	const char *name;
	const char *column;
	const char *what;
	int mib;   /* counted in MiB */
	int milli; /* CPUs, counted in thousandths (a number in the API) */
	size_t offset;
} al_quota_field;
extern const al_quota_field al_quota_fields[AL_QUOTA_NFIELDS];

uint64_t al_quota_value(const al_quota *q, size_t field);

/* The first quota that one more of `asked` would pass (used + asked >
 * limit, for each field asked for): -1 with AL_EQUOTA, the message the
 * API returns ("running sandboxes: 50 of 50") and *field (if not NULL)
 * its index in al_quota_fields; 0 if all fit. */
int al_quota_check(const al_quota *limit, const al_quota *used,
		   const al_quota *asked, size_t *field, al_err *err);

/* A PUT /v1/projects/{name}/quota body: an object of quota fields, each
 * an integer >= 0 (cpus: a number, at most 3 decimals) or null (back to
 * the operator's default). */
typedef struct al_quota_update {
	int set[AL_QUOTA_NFIELDS];     /* field present */
	int is_null[AL_QUOTA_NFIELDS]; /* present and null */
	al_quota value;
} al_quota_update;
int al_quota_update_parse(const char *buf, size_t len, al_quota_update *out,
			  al_err *err);

/* AL_EEXIST if it exists, AL_EINVAL for a bad name. */
int al_project_create(al_db *db, const char *name, al_err *err);
/* 1 if it exists, 0 if not. */
int al_project_exists(al_db *db, const char *name, al_err *err);
/* {"name","created_at","quota":{effective},"quota_defaults":[fields
 * that follow the operator's default],"pool_group":n}; all of them as an
 * array, or the one of name (AL_ENOENT). */
json_object *al_project_list(al_db *db, const al_config *cfg, al_err *err);
json_object *al_project_get(al_db *db, const al_config *cfg, const char *name,
			    al_err *err);
int al_project_set_quota(al_db *db, const char *name, const al_quota_update *u,
			 al_err *err);

/* Seconds a client over a quota that a sandbox's end frees (running
 * sandboxes, memory, disk) is asked to wait before trying again. */
#define AL_QUOTA_RETRY_S 5

/* Where a project's sandboxes write on the pool (core/pool/poolcap.h): its
 * qgroup's number and its disk quota in MiB. */
typedef struct al_project_pool {
	int64_t group;
	uint64_t disk_quota_mb;
} al_project_pool;

/* Begin a transaction holding name's row lock in which one more sandbox
 * with memory_mb, disk_mb and cpu_millis fits the project's quotas. On failure no
 * transaction is left open: AL_ENOENT for an unknown project; AL_EQUOTA
 * with *retry_after_s: until the create rate allows one more, else
 * AL_QUOTA_RETRY_S. The caller inserts its row and ends with
 * al_db_commit or al_db_rollback. Its commit does not wait for the
 * disk: a synchronous commit after it (the running mark) must make the
 * row durable before the create is answered. *pool: the project's
 * pool group and disk quota, for the caller's checks in that
 * transaction. */
int al_project_begin_sandbox(al_db *db, const al_config *cfg, const char *name,
			     uint64_t memory_mb, uint64_t disk_mb,
			     al_project_pool *pool, uint64_t cpu_millis,
			     int *retry_after_s, al_err *err);
/* Call fn for every project with its pool group and effective disk quota
 * (MiB); stops at fn's first -1. */
int al_project_each_pool(al_db *db, const al_config *cfg,
			 int (*fn)(const char *name, const al_project_pool *p,
				   void *arg),
			 void *arg, al_err *err);
/* The same for one more build. */
int al_project_begin_build(al_db *db, const al_config *cfg, const char *name,
			   al_err *err);

/* BEGIN and lock project's row for a stream start; the caller commits
 * once the stream exists in its shim, or rolls back. */
int al_project_begin_stream(al_db *db, const al_config *cfg,
			    const char *project, al_err *err);
/* In that transaction: record lease (AL_STREAM_LEASE_LEN hex, the
 * caller's random name) for a stream of key key_id on sandbox, one of
 * project's stream slots; AL_EQUOTA when all are taken. */
int al_project_stream_add(al_db *db, const al_config *cfg, const char *project,
			  const char *sandbox, long long key_id,
			  const char *lease, al_err *err);
/* Drop a lease: its stream never started, or its shim says it ended. */
void al_project_stream_release(al_db *db, const char *lease);
/* The leases of project (NULL: any) and of key_id (0: any), as an array
 * of {"lease","sandbox_id"} ordered by sandbox; NULL on error. */
json_object *al_project_stream_leases(al_db *db, const char *project,
				      long long key_id, al_err *err);

/* ---- keys ---- */

#define AL_KEY_NAME_MAX 128

/* A new key of project: its id and the key itself (shown once; only its
 * hash is stored). AL_ENOENT for an unknown project, AL_EINVAL for a bad
 * name. */
int al_project_key_create(al_db *db, const char *project, al_role role,
			  const char *name, long long *id,
			  char key[AL_AUTH_KEY_LEN + 1], al_err *err);
/* Active keys, oldest first: [{"id","name","project","role",
 * "created_at"}] (never the key nor its hash); project NULL = all. */
json_object *al_project_key_list(al_db *db, const char *project, al_err *err);
/* Revoke: the key is refused from the next request on. AL_ENOENT if no
 * active key has that id. */
int al_project_key_revoke(al_db *db, long long id, al_err *err);

#endif
