/* sandbox: the al_sandbox type and its rows in PostgreSQL (sandboxes,
 * sandbox_events; sandbox.c). Every transition is checked against the
 * state table (model/sandbox_state.h) and written with an event row in
 * one transaction. Freeing a row's fields, its API JSON and a new id need
 * no database (sandbox_row.c). */
#ifndef AL_SANDBOX_H
#define AL_SANDBOX_H

#include <stdint.h>

#include <json-c/json.h>

#include "base/err.h"
#include "driver.h"
#include "model/db.h"
#include "model/sandbox_state.h"

typedef struct al_sandbox {
	char id[64];
	char project[64]; /* owner (core/model/project.h) */
	char template_name[64];
	char driver[16];
	char accel[8];	      /* vm: "kvm" or "tcg"; "" for other drivers */
	int template_version; /* the version it was created from; 0 unknown */
	al_state state;
	char created_at[40]; /* RFC 3339, UTC */
	char expires_at[40];
	char error[256]; /* reason when state is error */
	al_limits limits;
	int shim_pid;
	json_object *metadata; /* object; owned */
	json_object *env;      /* object of strings; owned */
	/* The network object, canonical (core/net/netspec.h); owned. NULL is
	 * the default (allowlist, empty lists). */
	json_object *network;
	long long created_by_key; /* the API key that created it; 0 unknown */
	char op[16]; /* the operation under way (model/sandbox_op.h), or "" */
	/* The snapshot it resumes from (model/snapshot.h) while suspended,
	 * the last it was suspended to after; "" for none. */
	char resume_snapshot[64];
	/* The snapshot it was brought back to after it lost its machine
	 * (al_snapshot_recover); "" for none. */
	char recovered_from[64];
	char last_activity_at[40];
	int on_timeout_suspend; /* its timeout suspends it (else deletes) */
	int auto_resume;	/* a call to it suspended resumes it first */
} al_sandbox;

void al_sandbox_free_fields(al_sandbox *sb);

/* Insert a new sandbox in state creating (id chosen by the caller). */
int al_sandbox_insert(al_db *db, const al_sandbox *sb, int timeout_s,
		      al_err *err);
/* Load by id; AL_ENOENT if absent or deleted. */
int al_sandbox_get(al_db *db, const char *id, al_sandbox *out, al_err *err);
/* The same, of project only (NULL: any): another project's sandbox is
 * the same AL_ENOENT as an unknown id. */
int al_sandbox_get_in(al_db *db, const char *id, const char *project,
		      al_sandbox *out, al_err *err);
/* Apply event: check the table against the current row (FOR UPDATE), set
 * the new state (and error reason for FAIL), append an event row. */
int al_sandbox_transition(al_db *db, const char *id, al_event ev,
			  const char *detail, al_err *err);
/* The shim of sandbox id (row in state creating) reported it ready:
 * shim_pid, the accelerator it runs under ("kvm", "tcg", "" for none)
 * and creating -> running with its event row, in one statement (one
 * round trip, one commit); out gets the row as it is now. AL_ESTATE
 * when the row is no longer creating (its shim ended meanwhile, or it
 * was deleted). */
int al_sandbox_mark_running(al_db *db, const char *id, int shim_pid,
			    const char *accel, al_sandbox *out, al_err *err);

/* A transition a shim made on its own (it ended: fail, delete), as the
 * controller applies it from the spool (core/sandbox/spool.h). */
typedef struct al_sandbox_event {
	char id[64];
	al_event ev;
	char detail[256];
	int64_t at_ms; /* unix ms, when the shim made it */
} al_sandbox_event;
/* Apply n events in one transaction, in order. An event the state table
 * rejects (the row got there another way: fcgi recorded the delete
 * first, or the row is gone) is moot, not an error: *applied counts the
 * ones that changed a row. -1 (nothing applied) when the transaction
 * failed. */
int al_sandbox_record_events(al_db *db, const al_sandbox_event *evs, int n,
			     int *applied, al_err *err);
/* API listing: an array of al_sandbox_to_json() objects, oldest first,
 * at most AL_SANDBOX_LIST_MAX. state -1 = every state but deleted;
 * metadata_filter (object or NULL) must be contained in the metadata;
 * project NULL = every project's. */
#define AL_SANDBOX_LIST_MAX 1000
int al_sandbox_list(al_db *db, const char *project, int state,
		    json_object *metadata_filter, json_object **out,
		    al_err *err);
/* Replace the network object of sandbox id (of project only; NULL: any),
 * canonical already (al_netspec_to_json); AL_ENOENT as al_sandbox_get_in. */
int al_sandbox_set_network(al_db *db, const char *id, const char *project,
			   json_object *network, al_err *err);
/* Replace the deadline of sandbox id (of project; NULL: any): now +
 * timeout_s. AL_ENOENT as al_sandbox_get_in. */
int al_sandbox_set_timeout(al_db *db, const char *id, const char *project,
			   uint32_t timeout_s, al_err *err);

/* Sandboxes whose expires_at has passed and that are not deleted. */
int al_sandbox_list_expired(al_db *db, char (**ids)[64], int *n, al_err *err);
/* Sandboxes in any of the live states (creating, running, paused). */
int al_sandbox_list_live(al_db *db, char (**ids)[64], int *n, al_err *err);

/* Creates of one (template, driver) in a recent window. */
typedef struct al_sandbox_creates {
	char template_name[64];
	char driver[16];
	uint32_t creates;
} al_sandbox_creates;
/* Sandboxes created in the last window_s seconds (whatever became of
 * them), per template and driver: up to max pairs into out, *n of them.
 * What the warm pool is sized from (core/sandbox/warmpool.h). */
int al_sandbox_recent_creates(al_db *db, uint32_t window_s,
			      al_sandbox_creates *out, int max, int *n,
			      al_err *err);

/* JSON view for the API: id, project, state, operation (null when none),
 * template, driver, accel (vm only), created_at, expires_at,
 * last_activity_at, metadata, limits, network (never env). */
json_object *al_sandbox_to_json(const al_sandbox *sb);
/* Its network object (a new reference; the default's when NULL). */
json_object *al_sandbox_network_json(const al_sandbox *sb);

/* Generate a fresh id: 20 chars [a-z0-9] from getrandom(). */
int al_sandbox_new_id(char out[21], al_err *err);

/* A start of sandbox id failed with *e: a capacity refusal marks its row
 * deleted (it never existed for the client: no error row stays) and
 * becomes unavailable with *retry_after_s; any other failure marks the
 * row error and stays a server failure (5xx). Either way *e is what the
 * client is answered. */
void al_sandbox_start_failed(al_db *db, const char *id, al_err *e,
			     int *retry_after_s);

#endif
