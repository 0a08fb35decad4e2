/* query: the query string of a request URI (bytes from the client),
 * split on '&' and '=', percent-decoded ('+' is a space). Keys and values
 * never hold a NUL byte: "%00" and malformed escapes are refused. */
#ifndef AL_QUERY_H
#define AL_QUERY_H

#include "base/err.h"

#define AL_QUERY_MAX 8192 /* raw query string bytes */
#define AL_QPARAMS_MAX 64 /* parameters kept from the query string */

typedef struct al_qparam {
	char *key; /* percent-decoded, NUL-free */
	char *val;
} al_qparam;

typedef struct al_query {
	al_qparam q[AL_QPARAMS_MAX];
	int n;
} al_query;

/* Parse qs (may be NULL or empty) into out, which must be empty. On
 * failure (AL_EINVAL: too long, too many parameters, malformed escape, a
 * key given twice, compared decoded: "pa%74h" repeats "path") out holds
 * nothing. */
int al_query_parse(const char *qs, al_query *out, al_err *err);
/* Value of the parameter named key, or NULL. */
const char *al_query_get(const al_query *q, const char *key);
void al_query_free(al_query *q);

#endif
