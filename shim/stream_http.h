/* stream_http: the one request the shim's stream socket accepts, the one
 * nginx's internal stream location sends (nginx/airlock.conf):
 *
 *   GET /stream/<64 lowercase hex> HTTP/1.1\r\n
 *   Name: value\r\n ...
 *   \r\n
 *
 * and no body. The bytes come from outside the shim (anyone in nginx's
 * group can connect), so the head is parsed strictly and bounded. */
#ifndef SHIM_STREAM_HTTP_H
#define SHIM_STREAM_HTTP_H

#include <stddef.h>

#include "agentproto.h"

#define SHIM_HTTP_HEAD_MAX 4096
#define SHIM_HTTP_HEADERS_MAX 64

enum shim_http_result {
	SHIM_HTTP_NOT_FOUND = -2, /* well-formed, but not a stream path: 404 */
	SHIM_HTTP_BAD = -1,	  /* malformed, too long, or a body: 400 */
	SHIM_HTTP_INCOMPLETE = 0, /* the head has not ended yet */
	SHIM_HTTP_OK = 1,	  /* token filled */
};

/* The first n bytes received on a connection (all of them: bytes past
 * the head are a body, which is refused). */
enum shim_http_result shim_http_parse(const char *p, size_t n,
				      char token[AL_STREAM_TOKEN_LEN + 1]);

#endif
