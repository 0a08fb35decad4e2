/* gw/http: strict HTTP/1.1 message heads for the egress gateway.
 *
 * Everything the guest sends, and everything an upstream answers, is
 * hostile: a head is parsed strictly into a struct and the gateway writes
 * a canonical head of its own from that struct (never the raw bytes). A
 * head that is ambiguous is refused, never repaired (RFC 9112, 9110):
 *
 *  - lines end in CRLF: a bare LF or CR, NUL or another control byte, a
 *    leading empty line, obs-fold (a line starting with SP/HTAB), space
 *    before a colon, a name that is not a token: refused;
 *  - at most AL_HTTP_REQ_FIELDS_MAX fields in AL_HTTP_REQ_HEAD_MAX bytes
 *    (431); responses AL_HTTP_RESP_FIELDS_MAX / AL_HTTP_RESP_HEAD_MAX;
 *  - request line "METHOD SP target SP HTTP/1.x": HTTP/1.1 and HTTP/1.0
 *    (1.0: no Transfer-Encoding, never kept alive); no version (0.9):
 *    400; 2.0 (the h2 preface) and any other HTTP/d.d: 505;
 *  - target in origin-form ("/p?q") or absolute-form ("http://h:p/p?q",
 *    scheme http on a plain connection and https on a TLS one, no
 *    userinfo, no IPv6 literal); '#', space, non-ASCII, a '%' not
 *    followed by two hex digits: 400; longer than AL_HTTP_TARGET_MAX: 414;
 *    asterisk- and authority-form: 400; the path is rewritten into its
 *    normal form (gw/urlpath.h: dot segments, %2e, duplicate slashes),
 *    which is what the policy sees and the serialiser sends; a path
 *    servers read differently (%2F, %5C, %00, encoded bytes that are not
 *    UTF-8, "..;", %252e): 400; a method not of A-Z 0-9 - _
 *    ("head" might be HEAD upstream and not here): 400; CONNECT, and
 *    TRACE/TRACK (they echo the request, injected credentials too): 405;
 *  - Host: exactly one, even in HTTP/1.0, a DNS name or IPv4 address and
 *    an optional port 1..65535; absolute-form's authority must name the
 *    same host and port after canonicalising (al_dnsname_canon: case,
 *    trailing dot; then the scheme's default port);
 *  - framing: one Content-Length (digits only, no list, no duplicate even
 *    if equal, at most AL_HTTP_LENGTH_MAX), or Transfer-Encoding exactly
 *    "chunked" (any other coding or list: 501), never both (400);
 *  - Upgrade (any, h2c included) and HTTP2-Settings: 400, the gateway
 *    offers no upgrade; Expect: "100-continue" sets expect_continue (the
 *    gateway sends its own 100 after the policy check and drops Expect
 *    upstream), any other expectation: 417.
 * Hop-by-hop fields (Connection and the fields it names, Keep-Alive,
 * Proxy-Connection, Proxy-Authorization, TE, Trailer, Upgrade, Expect)
 * and the framing fields and Host are consumed by the parser: `fields`
 * holds only end-to-end fields, which is what the serialiser forwards.
 * Responses also lose Alt-Svc (no QUIC through the gateway). A name that
 * spells one of those with '_' for '-' (Content_Length, Transfer_Encoding:
 * CGI-style upstreams read them as the real thing) is refused.
 *
 * Incremental: the caller keeps the bytes received since the message
 * started and passes all of them on every call (buf, len); the parser
 * scans only what it has not seen and answers AL_AGAIN ("need more"),
 * 0 ("head done, its length is *head_len, the body starts there") or -1
 * (refused: err says why and p->status is the status to answer with).
 * A byte-by-byte feed gives the same result as one feed. After 0 or -1,
 * init the parser again for the next message (a pipelined one starts at
 * head_len plus the body). The parsed struct owns a copy of the head: the
 * caller may drop its bytes; fields point into it, so never copy the
 * struct, and free it only after a 0. */
#ifndef AL_GW_HTTP_H
#define AL_GW_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define AL_HTTP_REQ_HEAD_MAX 16384
#define AL_HTTP_REQ_FIELDS_MAX 100
#define AL_HTTP_RESP_HEAD_MAX 32768
#define AL_HTTP_RESP_FIELDS_MAX 128
#define AL_HTTP_TARGET_MAX 8192
#define AL_HTTP_METHOD_MAX 32
/* Fields added by al_http_fields_set beyond the parsed ones. */
#define AL_HTTP_EXTRA_FIELDS_MAX 16
/* A Content-Length or chunk size above this is refused (1 TiB). */
#define AL_HTTP_LENGTH_MAX (UINT64_C(1) << 40)
/* A canonical host name: 253 bytes and the NUL. */
#define AL_HTTP_HOST_MAX 254

/* How the body after a head is delimited (RFC 9112 6.3). */
enum al_http_body {
	AL_HTTP_BODY_NONE,    /* no body (a request without framing, HEAD
			       * responses, 1xx, 204, 304) */
	AL_HTTP_BODY_LENGTH,  /* content_length bytes (possibly 0) */
	AL_HTTP_BODY_CHUNKED, /* chunked (gw/httpbody.h decodes it) */
	AL_HTTP_BODY_CLOSE,   /* response up to the upstream's close */
};

typedef struct al_http_field {
	const char *name;  /* NUL-terminated, case as received */
	const char *value; /* NUL-terminated, OWS trimmed */
	size_t name_len, value_len;
} al_http_field;

/* The end-to-end fields of a message, in order. */
typedef struct al_http_fields {
	al_http_field f[AL_HTTP_RESP_FIELDS_MAX + AL_HTTP_EXTRA_FIELDS_MAX];
	size_t n;
	char *extra[AL_HTTP_EXTRA_FIELDS_MAX]; /* owned "name\0value\0" */
	size_t n_extra;
} al_http_fields;

typedef struct al_http_req {
	char *head;	    /* owned copy of the head (fields point in) */
	const char *method; /* a token, case as received ("GET") */
	const char *path;   /* origin-form target: "/p?q", never empty, its
			     * path in normal form (gw/urlpath.h) */
	char host[AL_HTTP_HOST_MAX]; /* canonical (al_dnsname_canon) */
	unsigned port;		     /* explicit or the scheme's default */
	bool tls;		     /* the connection (and scheme) is https */
	bool absolute_form;	     /* the target named the authority */
	int version;		     /* 10 or 11 */
	enum al_http_body body;	     /* NONE, LENGTH or CHUNKED */
	uint64_t content_length;     /* LENGTH: the body's size */
	bool expect_continue;	     /* Expect: 100-continue */
	bool keep_alive;	     /* 1.1 without Connection: close */
	al_http_fields fields;
} al_http_req;

typedef struct al_http_resp {
	char *head;
	int version;	    /* 10 or 11 */
	int status;	    /* 100..599 */
	const char *reason; /* may be "" */
	bool interim;	    /* 1xx (never 101): another head follows */
	enum al_http_body body;
	/* LENGTH: the body's size; for HEAD and 304 the Content-Length
	 * received (has_length), forwarded but with no body after it. */
	uint64_t content_length;
	bool has_length;
	bool keep_alive; /* 1.1, no Connection: close, not CLOSE framing */
	al_http_fields fields;
} al_http_resp;

/* Scanner state of one head being received. */
typedef struct al_http_parser {
	size_t scanned;	   /* bytes of buf already checked */
	size_t line_start; /* offset of the current line */
	size_t lines;	   /* complete lines seen */
	size_t max;	   /* head limit */
	int status;	   /* after -1: the HTTP status to answer with */
	bool tls;	   /* requests: the connection is TLS */
	bool response;	   /* a response head (refusals are 502) */
} al_http_parser;

/* Ready p for a request head on a connection (tls: https, else http). */
void al_http_req_parser_init(al_http_parser *p, bool tls);
/* Ready p for a response head. */
void al_http_resp_parser_init(al_http_parser *p);

/* Parse a request head from buf[0..len) (all bytes since the message
 * started). 0: *req filled (free it with al_http_req_free), the head is
 * *head_len bytes; AL_AGAIN: need more bytes; -1: refused, err and
 * p->status say why (400, 405, 413, 414, 417, 431, 501, 505). */
int al_http_req_parse(al_http_parser *p, const char *buf, size_t len,
		      al_http_req *req, size_t *head_len, al_err *err);
void al_http_req_free(al_http_req *req);

/* Parse a response head answering req (HEAD has no body; a 1.0 request
 * gets no chunked response; NULL: a GET in HTTP/1.1). Same results; a
 * refusal has status 502. 101 is refused (no upgrade was forwarded); a
 * 1xx is interim: parse the next head after it (100 included: the
 * gateway has sent its own; never forward a 1xx to an HTTP/1.0 client). */
int al_http_resp_parse(al_http_parser *p, const char *buf, size_t len,
		       const al_http_req *req, al_http_resp *resp,
		       size_t *head_len, al_err *err);
void al_http_resp_free(al_http_resp *resp);

/* First value of the field named name (without case), NULL if none. */
const char *al_http_fields_get(const al_http_fields *fs, const char *name);
/* Remove every field named name, compared without case and with '_' read
 * as '-' (CGI-style upstreams map X_Api_Key and X-Api-Key to one
 * variable: a guest's X_Api_Key must not sit beside an injected
 * X-Api-Key); returns how many. */
size_t al_http_fields_remove(al_http_fields *fs, const char *name);
/* Replace every field named name (as al_http_fields_remove compares) by
 * one "name: value" (added at the end).
 * name must be a token, value visible ASCII/obs-text with inner SP/HTAB
 * only; framing, Host and hop-by-hop names are refused (AL_EINVAL). */
int al_http_fields_set(al_http_fields *fs, const char *name, const char *value,
		       al_err *err);

/* Replace the value of field i by a copy of value[0..len) (the same
 * value rules as al_http_fields_set; the copy counts against
 * AL_HTTP_EXTRA_FIELDS_MAX). */
int al_http_fields_replace_value(al_http_fields *fs, size_t i,
				 const char *value, size_t len, al_err *err);

/* The canonical request head for upstream (malloc'd, *len bytes, NUL
 * after): "METHOD path HTTP/1.x", Host (port only if not the default),
 * the end-to-end fields, the framing field regenerated (Content-Length or
 * Transfer-Encoding: chunked), "Connection: close" when close, CRLF. */
char *al_http_req_serialize(const al_http_req *req, bool close, size_t *len,
			    al_err *err);
/* The canonical response head for the guest: "HTTP/1.1 status reason",
 * the end-to-end fields, framing regenerated (Content-Length for LENGTH
 * and, when received, HEAD/304; Transfer-Encoding: chunked for CHUNKED),
 * "Connection: close" when close (the caller must close after a CLOSE
 * body), CRLF. */
char *al_http_resp_serialize(const al_http_resp *resp, bool close, size_t *len,
			     al_err *err);

/* A whole response the gateway answers itself (a refusal, a 100): the
 * status line; for a final status Content-Type text/plain, the length,
 * "Connection: close" when close, and text plus a newline as the body
 * (text: visible ASCII, no CR/LF; NULL: no body). malloc'd, *len bytes. */
char *al_http_own_response(int status, const char *text, bool close,
			   size_t *len, al_err *err);

#endif
