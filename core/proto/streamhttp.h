/* streamhttp: the one request a stream socket accepts (a shim's exec
 * streams, a builder's log stream), the one nginx's internal stream
 * location sends (nginx/airlock.conf):
 *
 *   GET /stream/<64 lowercase hex> HTTP/1.1\r\n
 *   Name: value\r\n ...
 *   \r\n
 *
 * and no body. The bytes come from outside the shim (anyone in nginx's
 * group can connect), so the head is parsed strictly and bounded. */
#ifndef AL_STREAMHTTP_H
#define AL_STREAMHTTP_H

#include <stddef.h>
#include <stdint.h>

#include "proto/agentproto.h"

#define AL_STREAMHTTP_HEAD_MAX 4096
#define AL_STREAMHTTP_HEADERS_MAX 64

enum al_streamhttp_result {
	AL_STREAMHTTP_CLOSED = -3, /* al_streamhttp_read: the peer left */
	AL_STREAMHTTP_NOT_FOUND =
		-2,		/* well-formed, but not a stream path: 404 */
	AL_STREAMHTTP_BAD = -1, /* malformed, too long, or a body: 400 */
	AL_STREAMHTTP_INCOMPLETE = 0, /* the head has not ended yet */
	AL_STREAMHTTP_OK = 1,	      /* token filled */
};

/* The first n bytes received on a connection (all of them: bytes past
 * the head are a body, which is refused). */
enum al_streamhttp_result
al_streamhttp_parse(const char *p, size_t n,
		    char token[AL_STREAM_TOKEN_LEN + 1]);

/* A connection nginx has not sent its whole request on yet. */
typedef struct al_streamhttp_conn {
	int fd; /* -1 = free */
	size_t len;
	int64_t deadline_ms; /* when it is dropped with a 400 */
	char head[AL_STREAMHTTP_HEAD_MAX];
} al_streamhttp_conn;

/* Accept what waits on listen_fd into the free slots of c[0..n) (each
 * given deadline_ms); the number turned away for lack of a slot. */
int al_streamhttp_accept(int listen_fd, al_streamhttp_conn *c, int n,
			 int64_t deadline_ms);
/* Read on c and parse: INCOMPLETE (wait), CLOSED (c freed), else the
 * parse's answer, c->fd still open for the caller to answer or take. */
enum al_streamhttp_result
al_streamhttp_read(al_streamhttp_conn *c, char token[AL_STREAM_TOKEN_LEN + 1]);

/* The head a stream's answer starts with (an SSE stream nginx passes on
 * unbuffered, ended by closing the connection). */
extern const char al_streamhttp_sse_head[];
extern const size_t al_streamhttp_sse_head_len;

/* The stream socket at path (non-blocking, close-on-exec, mode 0666: who
 * may reach it is its directory's business, run/stream is 0710 with
 * nginx's group), replacing a stale one; -1 (err). */
int al_streamhttp_listen(const char *path, al_err *err);

/* nginx sends nothing after its request: 1 when bytes or EOF (or an
 * error) on a stream's connection say its client went away, 0 when
 * there is nothing to read. */
int al_streamhttp_client_gone(int fd);

/* Answer a refused request (400 malformed, else 404 no such stream) with
 * the API's JSON error, and close fd. */
void al_streamhttp_refuse(int fd, int status);

#endif
