/* template: template versions and builds, in PostgreSQL (tables
 * templates, template_versions, template_builds: core/model/sql/003) and in the
 * pool:
 *
 *   pool/template-versions/<name>/<version>/rootfs   btrfs subvolume:
 *         the filesystem every sandbox of that version snapshots, with
 *         /sbin/airlock-agent (and the host CA certificate) installed
 *   pool/template-versions/<name>/<version>/vm/      VM artefacts
 *         (disk.ext4, mem, state: core/vm/snapshot.h), when built
 *   pool/templates/<name>   symlink to the current version's rootfs, so
 *         al_config_template_root() keeps naming "the template"
 *   pool/layers/<key>       build cache: one subvolume per filesystem
 *         step, keyed by al_airlockfile_step_key()
 *
 * A version is immutable once published; a sandbox keeps the version it
 * was created from (sandboxes.template_version). */
#ifndef AL_TEMPLATE_H
#define AL_TEMPLATE_H

#include <json-c/json.h>

#include "base/config.h"
#include "base/err.h"
#include "base/json.h"
#include "model/auth.h"
#include "model/db.h"

typedef struct al_template_version {
	char name[64];
	int version;
	json_object *env; /* object of strings; owned */
	char workdir[4096];
	char user[64];
	json_object *start; /* argv array or NULL; owned */
	json_object *ready; /* argv array or NULL; owned */
} al_template_version;

void al_template_version_free(al_template_version *tv);

/* pool/template-versions/<name>/<version>[/rootfs|/vm] */
int al_template_version_dir(const al_config *cfg, const char *name, int version,
			    char *out, size_t outlen, al_err *err);
int al_template_version_rootfs(const al_config *cfg, const char *name,
			       int version, char *out, size_t outlen,
			       al_err *err);

/* Version `version` of name (0 = the current one); AL_ENOENT if absent. */
int al_template_get_version(al_db *db, const char *name, int version,
			    al_template_version *out, al_err *err);

/* Publish a built rootfs as the next version of name: rootfs_tmp (a
 * subvolume in the pool) is moved to the version's place, the rows are
 * written in one transaction (template created on its first version,
 * with the default limits of cfg and driver "ns"), and the
 * pool/templates/<name> link is switched atomically. *version_out gets
 * the new version number. */
int al_template_publish(al_db *db, const al_config *cfg,
			const al_template_version *tv, const char *build_id,
			const char *airlockfile, const char *rootfs_tmp,
			int *version_out, al_err *err);

/* A template's own warm pool bounds, in this order; -1 where it follows
 * the operator's default (AIRLOCK_WARM_POOL, _MAX, _VM, _VM_MAX). */
enum {
	AL_POOL_NS_MIN,
	AL_POOL_NS_MAX,
	AL_POOL_VM_MIN,
	AL_POOL_VM_MAX,
	AL_POOL_NBOUNDS
};
#define AL_POOL_BOUND_MAX 64
extern const char *const al_pool_bound_names[AL_POOL_NBOUNDS];
/* A PUT /v1/templates/{name}/warm_pool body: {"ns_min":N,"ns_max":N,
 * "vm_min":N,"vm_max":N}, each optional, 0..AL_POOL_BOUND_MAX or null
 * (back to the default), at least one. */
int al_template_pool_parse(const char *buf, size_t len,
			   al_json_setting out[AL_POOL_NBOUNDS], al_err *err);
/* Store the named bounds; AL_ENOENT for an unknown template. */
int al_template_pool_set(al_db *db, const char *name,
			 const al_json_setting u[AL_POOL_NBOUNDS], al_err *err);
/* The bounds the warm pool of a template with own bounds `own` follows
 * for driver ("ns" or "vm"): the template's where set, else cfg's. */
void al_template_pool_bounds(const al_config *cfg, const int *own,
			     const char *driver, uint32_t *min, uint32_t *max);
/* {"ns_min":..,"ns_max":..,"vm_min":..,"vm_max":..} in effect, and
 * "defaults": the bounds that follow the operator's. */
json_object *al_template_pool_json(const al_config *cfg, const int *own);

/* The project a template belongs to and whether it is public (every
 * project may create from it; only admin keys change it). AL_ENOENT if
 * unknown. Names are unique across projects. */
typedef struct al_template_owner {
	char project[64];
	int public;
} al_template_owner;
int al_template_owner_get(al_db *db, const char *name, al_template_owner *out,
			  al_err *err);
/* A template's row: its owner, driver, current version and default
 * limits. AL_ENOENT if unknown. */
typedef struct al_template_row {
	al_template_owner owner;
	char driver[16];
	int version;
	long long memory_mb, pids, cpu_shares, disk_mb;
	int pool[AL_POOL_NBOUNDS];
} al_template_row;
int al_template_row_get(al_db *db, const char *name, al_template_row *out,
			al_err *err);
/* 1 if who may see (change 0: get, create from) or change (rebuild,
 * delete) a template owned as o, else 0. */
int al_template_may(const al_template_owner *o, const al_identity *who,
		    int change);
/* The same by name, as the API answers it: AL_ENOENT for a template who
 * may not see (like an unknown one), AL_EPERM for a public one who may
 * only see. */
int al_template_access(al_db *db, const char *name, const al_identity *who,
		       int change, al_err *err);
/* [{"name","version","driver","memory_mb","pids","cpu_shares",
 *   "created_at","project","public"}] by name: the templates a key of
 * project visible_to sees (NULL: all), of project only (NULL: any). */
json_object *al_template_list(al_db *db, const char *visible_to,
			      const char *project, al_err *err);

/* [{"version","build_id","created_at"}] of name, by version. */
json_object *al_template_versions(al_db *db, const char *name, al_err *err);
/* Name and current version of up to max templates, by name: how many
 * were filled, or -1. */
typedef struct al_template_ref {
	char name[64];
	int version;
	int pool[AL_POOL_NBOUNDS];
} al_template_ref;
int al_template_refs(al_db *db, al_template_ref *out, int max, al_err *err);

/* 1 if a sandbox that is not deleted uses any version of name. */
int al_template_in_use(al_db *db, const char *name, al_err *err);

/* Delete every version of name (rows and pool), AL_ESTATE (409) while a
 * sandbox uses it, AL_ENOENT if unknown. */
int al_template_delete(al_db *db, const al_config *cfg, const char *name,
		       al_err *err);

/* ---- builds ---- */

typedef enum al_build_status {
	AL_BUILD_QUEUED,
	AL_BUILD_RUNNING,
	AL_BUILD_SUCCEEDED,
	AL_BUILD_FAILED,
} al_build_status;

const char *al_build_status_name(al_build_status s);

/* state/builds/<id> and its files: Airlockfile, context.tar, log.jsonl.
 *
 * log.jsonl is append-only, one JSON object per line, written by the
 * builder and streamed by the API as server-sent events (the "event"
 * member is the SSE event name, the line is its data):
 *   {"event":"step","step":2,"steps":5,"line":3,"text":"RUN make",
 *    "cached":false}
 *   {"event":"output","step":2,"stream":"stdout","data":"..."}
 *        (or "data_b64" when the bytes are not UTF-8; a build's output
 *        events stop after 4 MiB with one {"event":"output",...,
 *        "stream":"stderr","truncated":true,"data":"..."} saying so)
 *   {"event":"status","status":"succeeded","version":3}
 *   {"event":"status","status":"failed","step":2,"line":3,
 *    "error":"RUN exited with 2"}
 * The last line of a finished build is its status line. */
int al_build_dir(const al_config *cfg, const char *id, char *out, size_t outlen,
		 al_err *err);

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
