/* gw/credscan: placeholders (`airlock-cred:<name>`) in request bytes.
 *
 * A guest names a credential by a placeholder the gateway swaps for the
 * value only in the head of a request to that credential's hosts
 * (gateway/cred.c). Anywhere else a placeholder denies the request, so
 * it is looked for behind every encoding that a client, or an upstream
 * that the placeholder is meant to reach, could undo: plain, percent-
 * encoded (any mix of encoded characters, hex either case), JSON-escaped
 * (\uXXXX, and the prefix's letters may be mixed with those), base64 and
 * base64url at any alignment (Basic auth's user:pass among them): the
 * gw/credcodec views. The prefix is matched without case (a server may
 * compare case-insensitively); the name is reported as decoded, for an
 * exact lookup.
 *
 * Streaming: feed the bytes of one stream (a header value, a body) in
 * pieces of any size, then end it: the result is the same as one feed,
 * so a placeholder split across reads or chunks is found. State is
 * constant (a name buffer per view), nothing is carried but that. A
 * base64 run too short to decode the prefix (gw/credcodec's
 * AL_CREDCODEC_B64_RUN_MIN) is not decoded when the piece holds its
 * end, and a whole stream in one last piece without ':', '%' or '\\'
 * is not unescaped: the result is the same.
 * A hit is reported when its name ends (a byte that cannot be in a name,
 * the end of a base64 run, or the end of the stream). */
#ifndef AL_GW_CREDSCAN_H
#define AL_GW_CREDSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw/credcodec.h"

#define AL_CREDSCAN_PREFIX "airlock-cred:"
#define AL_CREDSCAN_PREFIX_LEN 13
/* The longest credential name; a longer one is reported truncated. */
#define AL_CREDSCAN_NAME_MAX 64

/* How a found placeholder was written (bits; 0: plain). */
#define AL_CREDSCAN_PERCENT AL_CREDCODEC_PERCENT
#define AL_CREDSCAN_JSON AL_CREDCODEC_JSON
#define AL_CREDSCAN_BASE64 AL_CREDCODEC_BASE64
/* The prefix was not all lower case. */
#define AL_CREDSCAN_CASE 8u

typedef struct al_credscan_hit {
	char name[AL_CREDSCAN_NAME_MAX + 1]; /* may be "" */
	bool truncated;			     /* the name was longer */
	unsigned how;			     /* AL_CREDSCAN_* bits */
} al_credscan_hit;

typedef void (*al_credscan_cb)(void *arg, const al_credscan_hit *hit);

/* A matcher over one view. */
typedef struct al_credscan_match {
	unsigned pos; /* prefix bytes matched; PREFIX_LEN: in the name */
	unsigned how;
	al_credscan_hit hit;
	size_t nlen;
} al_credscan_match;

typedef struct al_credscan {
	al_credcodec_unescape un;
	al_credcodec_b64 b64[AL_CREDCODEC_B64_PHASES];
	al_credscan_match m[1 + AL_CREDCODEC_B64_PHASES];
	uint64_t off; /* raw bytes fed */
	al_credcodec_b64_gate gate;
	unsigned long hits;
	al_credscan_cb cb;
	void *arg;
} al_credscan;

/* Ready s for a stream; cb gets every hit (NULL: only counted). */
void al_credscan_init(al_credscan *s, al_credscan_cb cb, void *arg);
void al_credscan_feed(al_credscan *s, const char *buf, size_t len);
/* The stream ends: a name running to here is reported. */
void al_credscan_end(al_credscan *s);
/* The last piece, then the end: as feed and end, and a base64 run that
 * reaches the piece's end is known whole (too short a run is skipped
 * whether or not it is, see below). */
void al_credscan_last(al_credscan *s, const char *buf, size_t len);
/* Hits so far. */
unsigned long al_credscan_hits(const al_credscan *s);

/* A byte that can be in a credential name: A-Z a-z 0-9 _ . - */
bool al_credscan_name_char(unsigned char c);

#endif
