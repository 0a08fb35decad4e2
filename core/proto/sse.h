/* sse: the text/event-stream events of the native API, written into an
 * al_buf (the shim's exec streams, fcgi's build logs). One event is
 * "event: <name>\ndata: <compact JSON>\n\n"; see docs/api.md. */
#ifndef AL_SSE_H
#define AL_SSE_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "base/err.h"
#include "proto/agentproto.h"

/* One event; -1 (err) when out is full. */
int al_sse_event(al_buf *out, const char *event, json_object *data,
		 al_err *err);
/* ": keepalive": bytes that keep proxies from timing an idle stream out. */
int al_sse_keepalive(al_buf *out, al_err *err);

/* A process's output as stdout / stderr events: text as "data", bytes
 * that are not UTF-8 as "data_b64". A character split across chunks is
 * held back until its end arrives, so text stays text. */
typedef struct al_sse_output {
	uint8_t carry[2][4];
	size_t carry_len[2];
} al_sse_text;
/* which: 0 stdout, 1 stderr. */
int al_sse_output(al_sse_text *st, al_buf *out, int which, const uint8_t *p,
		  size_t n, al_err *err);
/* What is still held back (a truncated character), as data_b64. */
int al_sse_output_flush(al_sse_text *st, al_buf *out, al_err *err);

/* start {"pid":N}, exit {"exit_code"|"signal","timed_out","duration_ms"}
 * and error {"code","message"}. */
int al_sse_start(al_buf *out, int64_t pid, al_err *err);
int al_sse_exit(al_buf *out, const al_exit_msg *m, int64_t duration_ms,
		al_err *err);
int al_sse_error(al_buf *out, al_code code, const char *message, al_err *err);

#endif
