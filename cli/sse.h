/* sse: incremental parser for a text/event-stream body (the exec stream
 * of the API). Bytes come from the network: every line is bounded. */
#ifndef AL_CLI_SSE_H
#define AL_CLI_SSE_H

#include <stddef.h>

#define SSE_LINE_MAX (4u << 20)

typedef void (*sse_event_fn)(const char *event, const char *data, void *ctx);

typedef struct sse_parser {
	char *line;
	size_t len, cap;
	char event[64];
	char *data;
	size_t data_len, data_cap;
	int overflow; /* a line or event exceeded SSE_LINE_MAX */
	sse_event_fn fn;
	void *ctx;
} sse_parser;

void cli_sse_init(sse_parser *p, sse_event_fn fn, void *ctx);
/* Feed bytes; -1 once the stream is unusable (overflow, OOM). */
int cli_sse_feed(sse_parser *p, const char *buf, size_t n);
void cli_sse_free(sse_parser *p);

#endif
