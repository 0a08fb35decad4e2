/* gw/credmask: credential values masked out of response bytes.
 *
 * A response that echoes a value (a reflecting server, an error page
 * quoting the request, a stored gist fetched back) must not show it to
 * the guest. The masker replaces every occurrence of each value, in the
 * forms of the gw/credcodec views (plain; percent-encoded in any mix,
 * JSON-escaped; base64 and base64url at any alignment), by as many '*'
 * as the raw bytes it spans: the length never changes, so a Content-
 * Length stays true and chunked bodies are re-framed as before.
 *
 * Streaming at constant memory: bytes are held back only while they may
 * be the start of an occurrence (a partial match in some view, an escape
 * or base64 quantum being read) and released as soon as they cannot be;
 * the hold is bounded by a ring sized from the longest value (6 raw
 * bytes per value byte, a \uXXXX escape each, plus slack). Should a
 * hostile stream keep a partial match open longer than that (base64
 * broken by line breaks), the oldest held byte leaves as '*': masking
 * over-covers, never under-covers. So a body of any size is masked whole
 * (no size limit after which it would pass unmasked), at a CPU cost per
 * byte that grows with the number of values.
 * Feed the bytes of one stream (a body) in pieces of any size and end
 * it: the output is the same whatever the pieces. */
#ifndef AL_GW_CREDMASK_H
#define AL_GW_CREDMASK_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* The longest value masked (gw/http sets headers of at most 8192). */
#define AL_CREDMASK_VALUE_MAX 8192
#define AL_CREDMASK_VALUES_MAX 128 /* AL_CRED_SET_MAX */

typedef struct al_credmask al_credmask;

typedef struct al_credmask_value {
	const char *p;
	size_t len; /* 1..AL_CREDMASK_VALUE_MAX */
} al_credmask_value;

/* Released bytes, in order. */
typedef void (*al_credmask_out)(void *arg, const char *p, size_t len);

/* A masker for n values (copied; wiped when freed). NULL + err on a
 * value that is empty or too long, too many values, or OOM. */
al_credmask *al_credmask_new(const al_credmask_value *values, size_t n,
			     al_err *err);
void al_credmask_free(al_credmask *m);
/* Start a new stream (what is held is dropped: end the last one first). */
void al_credmask_reset(al_credmask *m);
void al_credmask_feed(al_credmask *m, const char *buf, size_t len,
		      al_credmask_out out, void *arg);
/* End of the stream: everything held is released (masked as due). */
void al_credmask_end(al_credmask *m, al_credmask_out out, void *arg);
/* The stream's last piece, then its end: the same output as feed and
 * end, at less cost (a base64 run that reaches the end is known whole,
 * so one that cannot hold a value is passed over). */
void al_credmask_feed_end(al_credmask *m, const char *buf, size_t len,
			  al_credmask_out out, void *arg);
/* A whole string masked in place (a head's field value). Call it
 * between streams: a string that needs the full feed is a stream of its
 * own, and the shortcuts leave the matchers as they were. */
void al_credmask_string(al_credmask *m, char *s, size_t len);
/* Bytes fed and not yet released. */
size_t al_credmask_held(const al_credmask *m);
/* Occurrences masked since created. */
unsigned long al_credmask_count(const al_credmask *m);

#endif
