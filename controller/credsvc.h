/* credsvc: the controller's credential service on <state>/run/cred.sock
 * (one thread, one poll loop), the host end of the credential channel
 * (messages in core/cred/credproto.h).
 *
 * - A shim (root peers only) connects before it starts a sandbox's
 *   gateway and says CRED_HELLO {"sandbox":id}: the connection is that
 *   sandbox's channel for good (a later HELLO for the same sandbox
 *   replaces it). The service answers with the sandbox's set (CRED_SET)
 *   or ERROR, and the shim hands the connection to the gateway.
 * - CRED_REFRESH (root or the controller's own uid: fcgi) after a
 *   credential changed: every affected channel (the project's; all for a
 *   global credential) gets its set again; the answer CRED_REFRESH_DONE
 *   comes when all acknowledged, or after AL_CREDSVC_REFRESH_WAIT_MS.
 * - CRED_TAKE: one token from the bucket of that credential, shared by
 *   every sandbox using it (burst = requests, refilled at
 *   requests/per_seconds), answered with CRED_GRANT.
 * - CRED_USE: an audit record, stamped with time, sandbox, project and
 *   key, queued (at most AL_CREDSVC_AUDIT_MAX; past it the drops are
 *   counted and written as one row) and written in batches.
 *
 * Bounds: AL_CREDSVC_CONNS connections, AL_CREDSVC_NEW_MAX of them not
 * yet bound (each given AL_CREDSVC_HELLO_MS for its first frame),
 * AL_CREDSVC_REFRESH_MAX refreshes at once, per connection a frame rate
 * (AL_CREDSVC_FRAME_BURST, AL_CREDSVC_FRAME_RATE/s: past it a TAKE is
 * denied, a USE dropped), AL_CREDSVC_IN_MAX bytes of input and
 * AL_CREDSVC_OUT_MAX queued output (a peer that reads nothing is closed).
 *
 * The store (credentials and audit rows) is behind al_credsvc_store so
 * this module holds no SQL; its calls run on the service's thread. */
#ifndef AL_CONTROLLER_CREDSVC_H
#define AL_CONTROLLER_CREDSVC_H

#include <stdint.h>

#include "base/err.h"
#include "cred/credproto.h"

#define AL_CREDSVC_SOCK "run/cred.sock" /* under the state dir */
#define AL_CREDSVC_CONNS 4096
#define AL_CREDSVC_NEW_MAX 64
#define AL_CREDSVC_HELLO_MS 2000
#define AL_CREDSVC_REFRESH_MAX 16
#define AL_CREDSVC_REFRESH_WAIT_MS 2000
#define AL_CREDSVC_FRAME_BURST 2000
#define AL_CREDSVC_FRAME_RATE 1000
#define AL_CREDSVC_IN_MAX (64u << 10)
#define AL_CREDSVC_OUT_MAX (4u << 20)
#define AL_CREDSVC_BUCKETS 4096
#define AL_CREDSVC_AUDIT_MAX 8192
#define AL_CREDSVC_AUDIT_BATCH 256
#define AL_CREDSVC_AUDIT_EVERY_MS 500

/* What a sandbox's rows carry besides the record. */
typedef struct al_credsvc_sandbox {
	char project[64];
	char key_id[64]; /* the API key that created it; "" unknown */
} al_credsvc_sandbox;

/* One audit_log row. A row of drops has use.name "" and action
 * "dropped", its reason says how many. */
typedef struct al_credsvc_row {
	int64_t at_ms; /* unix ms */
	char sandbox[64];
	al_credsvc_sandbox sb;
	al_cred_use use;
} al_credsvc_row;

typedef struct al_credsvc_store {
	/* The sandbox's applicable set (values decrypted) and its project
	 * and key; AL_ENOENT when it does not exist (any more). */
	int (*effective)(void *arg, const char *sandbox, al_credsvc_sandbox *sb,
			 al_cred_set *out, al_err *err);
	/* Write n rows in one transaction. */
	int (*audit)(void *arg, const al_credsvc_row *rows, size_t n,
		     al_err *err);
	void *arg;
} al_credsvc_store;

typedef struct al_credsvc al_credsvc;

/* Bind <state_dir>/run/cred.sock (replacing a stale one) and start the
 * thread. store is copied; its arg must outlive the service. */
al_credsvc *ctl_credsvc_start(const char *state_dir,
			      const al_credsvc_store *store, al_err *err);
/* Stop the thread (queued rows are written first), close and unlink. */
void ctl_credsvc_stop(al_credsvc *s);

#endif
