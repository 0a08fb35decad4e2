/* build: template builds' rows (table template_builds:
 * core/model/sql/003_templates.sql, its project and public columns
 * 004_tenancy.sql). fcgi queues a build, its builder claims it and
 * records progress and outcome, the controller fails one whose builder
 * is gone. A build's files (its directory, log.jsonl) are
 * core/template/builddir.h's. */
#ifndef AL_BUILD_H
#define AL_BUILD_H

#include <json-c/json.h>

#include "base/err.h"
#include "model/db.h"

typedef enum al_build_status {
	AL_BUILD_QUEUED,
	AL_BUILD_RUNNING,
	AL_BUILD_SUCCEEDED,
	AL_BUILD_FAILED,
} al_build_status;

const char *al_build_status_name(al_build_status s);

/* A queued build for project; public: an admin's build, whose template
 * is public (core/model/sql/004_tenancy.sql). */
int al_build_insert(al_db *db, const char *id, const char *name,
		    const char *project, int public, int no_cache, al_err *err);
/* Progress and outcome; error may be NULL, version 0 = unknown. */
int al_build_update(al_db *db, const char *id, al_build_status status, int step,
		    int steps, int version, const char *error, al_err *err);
/* What a builder learns of the build it claims. */
typedef struct al_build_claimed {
	char name[64];	  /* the template's */
	char project[64]; /* the build's */
	int no_cache;
} al_build_claimed;
/* queued -> running for builder pid, once; AL_ESTATE if it is unknown
 * or not queued. */
int al_build_claim(al_db *db, const char *id, int pid, al_build_claimed *out,
		   al_err *err);
/* A build that is queued or running, as reconciliation needs it. */
typedef struct al_build_pending {
	char id[64];
	int builder_pid; /* 0 = none took it yet */
	int age_s;	 /* since it was queued */
	int steps;
} al_build_pending;
/* Every queued or running build; *out is malloc'd (caller frees). */
int al_build_list_pending(al_db *db, al_build_pending **out, int *n,
			  al_err *err);
/* {"id","name","status","step","steps","version","error","created_at",
 *  "finished_at","no_cache","project"}; AL_ENOENT if unknown or not of
 * project (NULL: any). */
json_object *al_build_get(al_db *db, const char *id, const char *project,
			  al_err *err);

#endif
