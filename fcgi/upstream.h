/* upstream: fcgi's side of a request relayed to a sandbox's shim over its
 * control socket (core/agentproto frames): connect and send the request,
 * read the replies while watching the HTTP client, and turn what the
 * sandbox says went wrong into what the API client may see.
 *
 * Every function that can fail leaves err ready for fcgi_http_error. */
#ifndef AL_FCGI_UPSTREAM_H
#define AL_FCGI_UPSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "base/err.h"
#include "http.h"
#include "proto/agentproto.h"

/* A new connection to r's sandbox with the request frame of type sent
 * as AL_REQ_ID_CLIENT (the peer taking bytes until deadline_ms): the fd,
 * or -1 (nothing left open). */
int fcgi_upstream_open(al_req *r, uint16_t type, const char *payload,
		       int64_t deadline_ms, al_err *err);
/* fcgi_upstream_next: besides -1 (err ready for fcgi_http_error: the
 * connection failed or broke the protocol, or the sandbox answered with
 * an ERROR, or for another request). */
enum al_upstream_next_result {
	AL_UPSTREAM_IDLE = 0,  /* until_ms passed, nothing came */
	AL_UPSTREAM_FRAME = 1, /* *f filled (caller frees): a frame of
				* the request, never an ERROR */
	AL_UPSTREAM_GONE = 2,  /* the HTTP client went away meanwhile */
};
/* Next frame from the shim connection fd, waiting until until_ms
 * (monotonic; 0 = forever). */
int fcgi_upstream_next(al_req *r, int fd, al_frame_reader *rd, al_frame *f,
		       int64_t until_ms, al_err *err);
/* Parse a JSON object frame payload; NULL with AL_EPROTO otherwise. */
json_object *fcgi_upstream_json(const al_frame *f, al_err *err);

#endif
