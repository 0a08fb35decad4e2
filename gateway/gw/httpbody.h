/* gw/httpbody: the body after an HTTP head, decoded incrementally so the
 * gateway forwards it piece by piece, re-framed (never the raw framing).
 *
 * One decoder covers the four framings of gw/http.h: NONE (ends at once),
 * LENGTH (exactly n bytes), CLOSE (everything until the peer closes) and
 * CHUNKED, validated strictly: hex sizes of at most 15 digits and at most
 * AL_HTTP_LENGTH_MAX, nothing else before CRLF but a chunk extension
 * (";..." of visible bytes, at most AL_HTTPBODY_EXT_MAX, dropped), CRLF
 * after each chunk's data, trailer fields parsed like head fields (no
 * obs-fold, token names, at most AL_HTTPBODY_TRAILERS_MAX in
 * AL_HTTPBODY_TRAILER_BYTES) and dropped.
 *
 * Feed it what has arrived: each call consumes *used bytes (> 0 whenever
 * len > 0) and may report data: *data (inside buf) of *data_len bytes, the
 * last bytes of those consumed, to forward. AL_AGAIN: not finished, call
 * again with the rest, or when more arrives; 0: the body is complete
 * (bytes after *used belong to the next message); -1: refused (err). */
#ifndef AL_GW_HTTPBODY_H
#define AL_GW_HTTPBODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "gw/http.h"

#define AL_HTTPBODY_EXT_MAX 1024
#define AL_HTTPBODY_TRAILERS_MAX 32
#define AL_HTTPBODY_TRAILER_BYTES 8192
/* The longest chunk head al_httpbody_chunk_head writes, with the NUL. */
#define AL_HTTPBODY_CHUNK_HEAD_MAX 20
/* The last chunk and the empty trailer section. */
#define AL_HTTPBODY_LAST_CHUNK "0\r\n\r\n"

typedef struct al_httpbody {
	enum al_http_body framing;
	int state;
	uint64_t left;	 /* LENGTH and a chunk's data: bytes to come */
	uint64_t total;	 /* data bytes reported so far */
	size_t digits;	 /* of the chunk size being read */
	size_t ext_len;	 /* of the chunk extension being read */
	size_t trailers; /* trailer fields seen */
	size_t trailer_bytes;
	size_t line_len; /* of the trailer line being read */
	bool done;
} al_httpbody;

/* Ready b for a body of that framing (length for LENGTH). */
void al_httpbody_init(al_httpbody *b, enum al_http_body framing,
		      uint64_t length);
int al_httpbody_feed(al_httpbody *b, const char *buf, size_t len, size_t *used,
		     const char **data, size_t *data_len, al_err *err);
/* The peer closed: 0 if that ends the body (CLOSE, or already done),
 * -1 if the body was cut short (err). */
int al_httpbody_eof(al_httpbody *b, al_err *err);
bool al_httpbody_done(const al_httpbody *b);

/* "<hex n>\r\n" into out; returns its length. n > 0 (a 0 chunk ends the
 * body: write AL_HTTPBODY_LAST_CHUNK instead). */
size_t al_httpbody_chunk_head(uint64_t n, char out[AL_HTTPBODY_CHUNK_HEAD_MAX]);

#endif
