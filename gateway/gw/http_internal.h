/* gw/http internals shared by http.c (scanner, fields, output buffer),
 * http_req.c and http_resp.c. */
#ifndef AL_GW_HTTP_INTERNAL_H
#define AL_GW_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/hex.h"
#include "gw/http.h"

/* A field line of a head, before the message's own rules apply. */
typedef struct al_http_raw {
	char *name, *value;
	size_t name_len, value_len;
} al_http_raw;

/* A parsed head: its copy (lines NUL-split in place) and field lines. */
typedef struct al_http_lines {
	char *head;	  /* owned until handed to the message struct */
	char *first;	  /* the request or status line */
	size_t first_len; /* without CRLF */
	al_http_raw raw[AL_HTTP_RESP_FIELDS_MAX];
	size_t n;
} al_http_lines;

/* Refuse: fill err, set p->status (502 for responses) and return -1. */
int al_http_reject(al_http_parser *p, int status, al_err *err, const char *fmt,
		   ...) __attribute__((format(printf, 4, 5)));

/* Scan buf for the end of the head. 0: the head is *head_len bytes;
 * AL_AGAIN; -1 (bare CR or LF, NUL, leading empty line, too long). */
int al_http_scan(al_http_parser *p, const char *buf, size_t len,
		 size_t *head_len, al_err *err);

/* Copy the head (plus tail_room spare bytes after it) and split it into
 * its first line and field lines, checked for syntax (token names, no
 * space before the colon, no obs-fold, value bytes), at most max_fields.
 * On -1 nothing is left to free. */
int al_http_lines_parse(al_http_parser *p, const char *buf, size_t head_len,
			size_t tail_room, size_t max_fields, al_http_lines *l,
			al_err *err);

bool al_http_tchar(unsigned char c);
/* Equal without ASCII case (b NUL-terminated). */
bool al_http_name_is(const char *a, size_t a_len, const char *b);
/* Equal without case and with '_' read as '-': CGI-style upstreams map
 * X_Api_Key and X-Api-Key to one variable. */
bool al_http_name_like(const char *a, size_t a_len, const char *b);
/* What a field name means to the gateway. Everything but OTHER and
 * ALT_SVC is consumed or written by the gateway itself (hop-by-hop,
 * framing, Host, Expect): never forwarded as received nor settable. */
enum al_http_kind {
	AL_HTTP_K_OTHER,
	AL_HTTP_K_HOST,
	AL_HTTP_K_CONTENT_LENGTH,
	AL_HTTP_K_TRANSFER_ENCODING,
	AL_HTTP_K_CONNECTION,
	AL_HTTP_K_EXPECT,
	AL_HTTP_K_UPGRADE, /* Upgrade, HTTP2-Settings */
	AL_HTTP_K_HOP,	   /* Keep-Alive, Proxy-*, TE, Trailer */
	AL_HTTP_K_ALT_SVC,
	AL_HTTP_K_IMITATION, /* a reserved name spelt with '_' for '-' */
};
enum al_http_kind al_http_name_kind(const char *name, size_t len);
bool al_http_name_reserved(enum al_http_kind k);

/* Content-Length value: digits only, at most AL_HTTP_LENGTH_MAX.
 * 0, or -1 for syntax (*too_big tells a valid but oversized number). */
int al_http_length_parse(const char *v, size_t len, uint64_t *out,
			 bool *too_big);

/* The tokens of a message's Connection fields. */
#define AL_HTTP_CONN_NAMES_MAX 32
typedef struct al_http_conn {
	const char *name[AL_HTTP_CONN_NAMES_MAX];
	size_t len[AL_HTTP_CONN_NAMES_MAX];
	size_t n;
	bool close; /* one is "close" */
} al_http_conn;

/* Add a Connection value (a comma list of tokens) to c. -1 on bad syntax
 * or more than AL_HTTP_CONN_NAMES_MAX tokens. */
int al_http_conn_parse(char *v, al_http_conn *c);
/* Add to fs the field lines of l marked in keep and not named by c. */
void al_http_fields_keep(al_http_fields *fs, const al_http_lines *l,
			 const bool *keep, const al_http_conn *c);

/* Adds a field line to fs (pointers stay in the message's head). */
void al_http_fields_add(al_http_fields *fs, const char *name, size_t nl,
			const char *value, size_t vl);
void al_http_fields_free(al_http_fields *fs);

/* Output buffer of the serialisers. */
typedef struct al_http_out {
	char *p;
	size_t len, cap;
	bool failed;
} al_http_out;

void al_http_out_add(al_http_out *o, const char *s, size_t n);
void al_http_out_str(al_http_out *o, const char *s);
void al_http_out_fields(al_http_out *o, const al_http_fields *fs);
/* Finish: NUL-terminate and hand the buffer out (NULL + err on OOM). */
char *al_http_out_finish(al_http_out *o, size_t *len, al_err *err);

#endif
