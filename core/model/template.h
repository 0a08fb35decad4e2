/* template: templates and their versions, in PostgreSQL (tables
 * templates and template_versions: core/model/sql/003) and in the pool
 * (a build's row is core/model/build.h's):
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

/* Publishing a version and deleting a template change the pool and
 * these rows together (core/template/versions.h does both); they
 * serialize on a transaction-scoped advisory lock of the name, so two
 * builds of one template get versions n and n+1 and the
 * pool/templates/<name> link always ends at the version the database
 * calls current, whatever order the builders finish in.
 *
 * Begin a transaction holding name's lock; the caller ends it with
 * al_db_commit or al_db_rollback. */
int al_template_lock(al_db *db, const char *name, al_err *err);
/* Under the lock: the version the next publish of name gets (1 for a
 * new name), or -1. */
int al_template_next_version(al_db *db, const char *name, al_err *err);
/* Under the lock: the rows of version `version` of tv->name, built by
 * build_id from airlockfile; the template's row is created on its first
 * version (with the default limits of cfg, driver "ns", and the build's
 * project and visibility) and made to point at it. AL_EEXIST when the
 * name belongs to another project or is public and the build is not an
 * admin's. */
int al_template_insert_version(al_db *db, const al_config *cfg,
			       const al_template_version *tv, int version,
			       const char *build_id, const char *airlockfile,
			       al_err *err);
/* The version the database calls current: 0 when name has none, or
 * -1. */
int al_template_current_version(al_db *db, const char *name, al_err *err);
/* name's oldest version, 1 when it has none yet, or -1. */
int al_template_first_version(al_db *db, const char *name, al_err *err);
/* Under the lock: delete name's row and with it every version's;
 * AL_ESTATE (409) while a sandbox uses it, AL_ENOENT if unknown. Builds
 * stay. */
int al_template_delete_rows(al_db *db, const char *name, al_err *err);

/* A template's own warm pool bounds (columns pool_ns_min .. pool_vm_max:
 * core/model/sql/006_warm_pool.sql), in this order; -1 where it follows
 * the operator's default. What they mean, how a request names them and
 * what they may be: core/sandbox/poolbounds.h. */
enum {
	AL_POOL_NS_MIN,
	AL_POOL_NS_MAX,
	AL_POOL_VM_MIN,
	AL_POOL_VM_MAX,
	AL_POOL_NBOUNDS
};
/* Store the bounds u marks set (al_poolbounds_parse's), NULL ones back
 * to the default; AL_ENOENT for an unknown template. */
int al_template_pool_set(al_db *db, const char *name,
			 const al_json_setting u[AL_POOL_NBOUNDS], al_err *err);

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

#endif
