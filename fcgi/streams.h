/* streams: the project's stream slots for the streams nginx carries,
 * exec streams and build-log streams (core/model/project.h has the lease
 * table). fcgi never sees a stream end, so a start that finds every
 * slot taken asks the shims holding the project's leases which streams
 * are still open (for a build's, its streamer's marks: core/template/buildlog.h)
 * and drops the leases of the others before it gives up. */
#ifndef AL_FCGI_STREAMS_H
#define AL_FCGI_STREAMS_H

#include "http.h"
#include "proto/agentproto.h"

/* A slot of r's key's project for a stream of holder (a sandbox id, or
 * a build's stream name "build-<id>"): lease filled and recorded in a
 * transaction left open on r's connection (holding the project's row
 * lock), or -1 (err; AL_EQUOTA when they are all taken; nothing open).
 * End it with fcgi_streams_done once the stream exists in its shim (or
 * its token is issued) (ok) or failed to start. */
int fcgi_streams_acquire(al_req *r, const char *holder,
			 char lease[AL_STREAM_LEASE_LEN + 1], al_err *err);
int fcgi_streams_done(al_req *r, int ok, al_err *err);
/* Key key_id was revoked: its open streams end with an "unauthorized"
 * error event, in every shim that holds one. */
void fcgi_streams_end_key(al_req *r, long long key_id);

#endif
