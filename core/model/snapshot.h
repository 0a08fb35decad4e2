/* snapshot: the rows of sandbox snapshots (snapshots table). The files
 * are the shim's (pool/snapshots/<id>, al_config_snapshot_dir); a row is
 * written pending before the shim takes one and turns ready once the
 * shim committed it, so a sweep can tell an unfinished directory from a
 * committed one. A project sees only its own: another project's
 * snapshot is the same AL_ENOENT as an unknown id. */
#ifndef AL_SNAPSHOT_H
#define AL_SNAPSHOT_H

#include <json-c/json.h>

#include "base/err.h"
#include "model/db.h"
#include "model/sandbox.h"

typedef struct al_snapshot {
	char id[64];
	char sandbox_id[64];
	char project[64];
	char kind[16];	 /* suspend, rolling, named, fork */
	char name[64];	 /* "" for none */
	char status[16]; /* pending, ready, broken */
	int memory;	 /* the machine's memory is in it (vm) */
	char driver[16];
	char template_name[64];
	int template_version;
	long long bytes;
	char created_at[40];
} al_snapshot;

/* Named snapshots one sandbox may keep at once; the others are bounded
 * by what takes them: rolling ones by the policy's retention, a fork's
 * goes once its children run, a suspend's once a newer one superseded
 * it. */
#define AL_SNAPSHOTS_PER_SANDBOX 16
#define AL_SNAPSHOTS_PER_SANDBOX_STR "16"

/* A new pending row id of sandbox sb (its project, driver, template);
 * AL_EQUOTA for a named one when sb keeps AL_SNAPSHOTS_PER_SANDBOX
 * named ones already. */
int al_snapshot_insert_pending(al_db *db, const char *id, const al_sandbox *sb,
			       const char *kind, const char *name, al_err *err);

/* A suspend of sandbox sb_id committed snapshot id (bytes, memory; -1:
 * as recorded): in
 * one transaction the row turns ready, the sandbox records it as the one
 * to resume from, and its suspending operation ends in suspended. */
int al_snapshot_commit_suspend(al_db *db, const char *sb_id, const char *id,
			       long long bytes, int memory, al_err *err);

/* The newest ready snapshot of sandbox sb_id into id (64 bytes); ""
 * when it has none. */
int al_snapshot_latest_of(al_db *db, const char *sb_id, char *id, al_err *err);

/* Sandbox sb_id lost its machine (its shim is gone: a crash, a host
 * restart) and is brought back suspended to its snapshot id, which it
 * resumes from; recorded as recovered_from. AL_ESTATE when its state
 * does not allow it (it was not running or paused any more). */
int al_snapshot_recover(al_db *db, const char *sb_id, const char *id,
			al_err *err);

/* Snapshot id was committed (bytes, memory): ready. */
int al_snapshot_mark_ready(al_db *db, const char *id, long long bytes,
			   int memory, al_err *err);

/* Snapshots of sandbox sb_id (of project; NULL: any), oldest first: a
 * JSON array of al_snapshot_to_json objects. AL_ENOENT when the
 * sandbox is not the project's (or not there). */
int al_snapshot_list_of(al_db *db, const char *sb_id, const char *project,
			json_object **out, al_err *err);

/* Snapshots no sandbox needs any more, not named: of deleted sandboxes,
 * and suspend snapshots older than the one their sandbox resumes from;
 * at most max ids into ids, *n of them. */
int al_snapshot_list_unneeded(al_db *db, char (*ids)[64], int max, int *n,
			      al_err *err);
/* Rolling and fork snapshots past their retention: of the n sandboxes
 * sb_ids, those older than keep_s[i] seconds (0: kept), ready, that no
 * suspended or creating sandbox resumes from, and whose sandbox has no
 * operation under way; oldest first, at most max ids into ids, *got of
 * them. Never a named, suspend or pending one. */
int al_snapshot_list_expired(al_db *db, char (*sb_ids)[64], const long *keep_s,
			     int n, char (*ids)[64], int max, int *got,
			     al_err *err);
/* The pending snapshot of sandbox sb_id (its suspend or snapshot under
 * way, of any kind: one operation runs at a time), into id (64 bytes);
 * 0 with id "" when there is none. */
int al_snapshot_pending_of(al_db *db, const char *sb_id, char *id, al_err *err);
/* Remove id's row (and the reference of a sandbox that would resume
 * from it); its directory must be gone already. */
int al_snapshot_delete_row(al_db *db, const char *id, al_err *err);
/* 1 if a row names id, 0 if none. */
int al_snapshot_known(al_db *db, const char *id, al_err *err);

/* Load id (of project; NULL: any). */
int al_snapshot_get_in(al_db *db, const char *id, const char *project,
		       al_snapshot *out, al_err *err);

/* API view: id, sandbox_id, kind, name, status, memory, driver,
 * template, bytes, created_at. */
json_object *al_snapshot_to_json(const al_snapshot *s);

#endif
