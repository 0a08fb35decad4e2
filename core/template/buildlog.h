/* buildlog: a build's log as the SSE stream of
 * GET /v1/templates/builds/{id}/logs, which nginx carries from the
 * builder (like exec streams from the shim, core/proto/streamhttp.h):
 *  - each log.jsonl line (core/template/builddir.h) becomes one event;
 *  - the stream is named "build-<id>": the builder's log streamer
 *    listens on run/stream/build-<id>.sock and nginx reaches it as
 *    /_airlock/stream/build-<id>/<token>;
 *  - fcgi issues one-time tokens as files in <build dir>/stream-tokens,
 *    each named after the sha256 of its token (the token itself is
 *    never stored) holding the id of the key it was issued to; the
 *    streamer takes one by unlinking it;
 *  - a revoked key is marked by fcgi as run/revoked-keys/<key id>: a
 *    streamer ends (with an "unauthorized" error event) every stream of
 *    a marked key within a tick, as shims end exec streams;
 *  - each stream holds one of its project's stream leases
 *    (core/model/project.h; its sandbox_id is the stream's name), as exec
 *    streams do: fcgi records the lease and marks it
 *    <build dir>/stream-leases/<lease>.issued beside the token that
 *    names it; the streamer renames the mark <lease>.open when nginx
 *    takes the token and removes it when the stream ends. A start that
 *    finds the project's leases at the limit drops those
 *    al_buildlog_lease_live says are over (a streamer that died, with
 *    its builder or killed, holds none). */
#ifndef AL_BUILDLOG_H
#define AL_BUILDLOG_H

#include <stdint.h>

#include "base/config.h"
#include "base/err.h"
#include "proto/agentproto.h"

/* How long an issued token may wait for nginx. */
#define AL_BUILDLOG_TOKEN_MS 5000
#define AL_BUILDLOG_NAME_MAX 72

/* One line of log.jsonl (NUL-terminated, without its newline) appended
 * to out as its event: 1 when it was a finished build's status line,
 * 0 otherwise (a line that is not what the builder writes is skipped),
 * -1 (err) when out is full. */
int al_buildlog_event(al_buf *out, const char *line, al_err *err);

/* "build-<id>" into out (AL_BUILDLOG_NAME_MAX). */
int al_buildlog_stream_name(const char *id, char *out, al_err *err);
/* run/stream/build-<id>.sock */
int al_buildlog_socket(const al_config *cfg, const char *id, char *out,
		       size_t outlen, al_err *err);

/* A fresh token for the log stream of the build in dir, issued to
 * key_id (>= 0) for the stream of lease (marked issued), recorded. */
int al_buildlog_token_issue(const char *dir, long long key_id,
			    const char *lease,
			    char token[AL_STREAM_TOKEN_LEN + 1], al_err *err);
/* 1 when token was issued for dir less than AL_BUILDLOG_TOKEN_MS ago
 * and not taken yet (it is taken now; *key_id is whose it was, lease
 * its lease, now marked open), else 0. */
int al_buildlog_token_take(const char *dir, const char *token,
			   long long *key_id,
			   char lease[AL_STREAM_LEASE_LEN + 1]);
/* The stream of lease ended (the streamer), or was never handed over
 * (fcgi): its mark goes. */
void al_buildlog_lease_end(const char *dir, const char *lease);
/* 1 while the stream of lease on build id may be open: the build's
 * streamer accepts connections and the lease is marked open, or issued
 * less than AL_BUILDLOG_TOKEN_MS ago. */
int al_buildlog_lease_live(const al_config *cfg, const char *id,
			   const char *lease);
/* 1 when the build's streamer accepts connections. */
int al_buildlog_streamer_up(const al_config *cfg, const char *id);
/* Mark key_id revoked for the streamers (idempotent). */
int al_buildlog_key_revoke(const al_config *cfg, long long key_id, al_err *err);
/* 1 once key_id is marked revoked. */
int al_buildlog_key_revoked(const al_config *cfg, long long key_id);
/* Forget every token and lease mark of dir (the streamer ends). */
void al_buildlog_tokens_clear(const char *dir);

#endif
