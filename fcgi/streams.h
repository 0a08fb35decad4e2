/* streams: the project's stream slots for the exec streams nginx
 * carries (core/project.h has the lease table). fcgi never sees a
 * stream end, so a start that finds every slot taken asks the shims
 * holding the project's leases which streams are still open and drops
 * the leases of the others before it gives up. */
#ifndef AL_FCGI_STREAMS_H
#define AL_FCGI_STREAMS_H

#include "agentproto.h"
#include "http.h"

/* A slot of r's key's project for a stream on sandbox r->id: lease
 * filled (recorded), or -1 (err; AL_EQUOTA when they are all taken). */
int al_streams_acquire(al_req *r, char lease[AL_STREAM_LEASE_LEN + 1],
		       al_err *err);
/* The stream of lease did not start after all. */
void al_streams_release(al_req *r, const char *lease);
/* Key key_id was revoked: its open streams end with an "unauthorized"
 * error event, in every shim that holds one. */
void al_streams_end_key(al_req *r, long long key_id);

#endif
