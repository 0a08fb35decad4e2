/* multipart: a streaming parser of multipart/form-data request bodies
 * (RFC 7578 over RFC 2046), for POST /v1/templates. The body comes from
 * an API client: hostile.
 *
 * The parser holds a bounded amount of state (one header line, the
 * boundary) whatever the body's size: part data goes to a callback in
 * chunks as it is fed, so a large `context` tar can go straight to a
 * file. Feed it the body in pieces of any size (split anywhere), then
 * call al_multipart_finish().
 *
 *   al_multipart *mp = al_multipart_new(content_type_header, &cbs, ctx,
 *                                       &err);
 *   while ((n = read body)) if (al_multipart_feed(mp, buf, n, &err) < 0) ..
 *   al_multipart_finish(mp, &err);  // -1 when the close delimiter is missing
 *   al_multipart_free(mp);
 *
 * or, for a fixed set of fields, the form helper below, which bounds
 * each field, keeps small ones in memory and writes big ones to an fd.
 *
 * Accepted: CRLF line ends only (as curl, browsers and SDKs send); a
 * preamble and epilogue of up to AL_MP_PADDING_MAX bytes (ignored);
 * part headers Content-Disposition (required: `form-data; name="..."`
 * with an optional `filename="..."`, nothing else), Content-Type and
 * other headers (ignored) except a Content-Transfer-Encoding other than
 * 7bit/8bit/binary. Refused (AL_EINVAL): a malformed or missing
 * boundary, bare LF, folded headers, another Content-Disposition shape,
 * a missing or empty name, a delimiter not followed by CRLF or "--", a
 * body that ends before the close delimiter. Refused with AL_ETOOBIG:
 * a header line over AL_MP_HEADER_MAX, more than AL_MP_HEADERS_MAX headers
 * in a part, more than AL_MP_PARTS_MAX parts, a form field over its max.
 * After an error the parser stays failed. Messages never quote field
 * contents. */
#ifndef AL_MULTIPART_H
#define AL_MULTIPART_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define AL_MP_BOUNDARY_MAX 70	      /* RFC 2046 */
#define AL_MP_HEADER_MAX 8192	      /* one header line, CRLF excluded */
#define AL_MP_HEADERS_MAX 16	      /* header lines per part */
#define AL_MP_PARTS_MAX 16	      /* parts per body */
#define AL_MP_NAME_MAX 256	      /* field name, filename */
#define AL_MP_PADDING_MAX (64 * 1024) /* preamble, epilogue */

/* Extract the boundary from a Content-Type header value such as
 * `multipart/form-data; boundary=----x` or `...; boundary="a b"` into out
 * (NUL-terminated). -1 with AL_EINVAL unless the type is
 * multipart/form-data and the boundary is 1..70 characters of RFC 2046's
 * bchars, not ending in a space, given once. */
int al_multipart_boundary(const char *content_type,
			  char out[AL_MP_BOUNDARY_MAX + 1], al_err *err);

/* Callbacks; each returns 0, or -1 with err filled to stop the parse
 * (al_multipart_feed() then returns -1 with that err). */
typedef struct al_multipart_cbs {
	/* A part starts. name is non-empty; filename and content_type are
	 * NULL when absent. The strings live until on_part_end. */
	int (*on_part_begin)(void *ctx, const char *name, const char *filename,
			     const char *content_type, al_err *err);
	/* Some bytes of the part's body (len > 0). */
	int (*on_part_data)(void *ctx, const char *data, size_t len,
			    al_err *err);
	/* The part ended (its closing delimiter was seen). */
	int (*on_part_end)(void *ctx, al_err *err);
} al_multipart_cbs;

typedef struct al_multipart al_multipart;

/* New parser for a body sent with this Content-Type header value. Any
 * callback may be NULL. */
al_multipart *al_multipart_new(const char *content_type,
			       const al_multipart_cbs *cbs, void *ctx,
			       al_err *err);
/* Parse the next len bytes of the body. */
int al_multipart_feed(al_multipart *mp, const char *data, size_t len,
		      al_err *err);
/* The body ended: -1 with AL_EINVAL unless the close delimiter was seen. */
int al_multipart_finish(al_multipart *mp, al_err *err);
void al_multipart_free(al_multipart *mp);

/* --- Form helper: a fixed set of named fields. --- */

typedef struct al_mp_field {
	/* Set by the caller. */
	const char *name; /* field name */
	uint64_t max;	  /* bytes; more is AL_ETOOBIG */
	int fd;		  /* >= 0: write the data to it; -1: keep in value */
	int required;	  /* al_multipart_finish() fails when absent */
	/* Filled by the parser. */
	int present;
	uint64_t len;	/* bytes received */
	char *value;	/* fd == -1: the data, NUL-terminated (may hold
			 * NUL bytes before len); free with
			 * al_mp_fields_free() */
	char *filename; /* filename="" parameter, or NULL */
} al_mp_field;

/* A parser that fills fields[0..n): an unknown field name or a field sent
 * twice is AL_EINVAL; a missing required field makes al_multipart_finish()
 * fail with AL_EINVAL naming it. fields must outlive the parser. */
al_multipart *al_multipart_new_form(const char *content_type,
				    al_mp_field *fields, size_t n, al_err *err);
/* Free the values and filenames kept in fields[0..n). */
void al_mp_fields_free(al_mp_field *fields, size_t n);

#endif
