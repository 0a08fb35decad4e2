#include "base/query.h"

#include <stdlib.h>
#include <string.h>

#include "base/hex.h"
#include "base/jsonkey.h"

/* Percent-decode s[0..n) (and '+' as space) into a new string; NULL when
 * malformed or when it would hold a NUL byte. */
static char *pct_decode(const char *s, size_t n)
{
	char *out = malloc(n + 1);
	if (out == NULL)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '%') {
			int a = i + 2 < n
					? al_hex_digit((unsigned char)s[i + 1])
					: -1;
			int b = i + 2 < n
					? al_hex_digit((unsigned char)s[i + 2])
					: -1;
			if (a < 0 || b < 0 || (a == 0 && b == 0)) {
				free(out);
				return NULL;
			}
			out[o++] = (char)(a * 16 + b);
			i += 2;
		} else if (c == '+') {
			out[o++] = ' ';
		} else {
			out[o++] = c;
		}
	}
	out[o] = '\0';
	return out;
}

void al_query_free(al_query *q)
{
	for (int i = 0; i < q->n; i++) {
		free(q->q[i].key);
		free(q->q[i].val);
	}
	q->n = 0;
}

int al_query_parse(const char *qs, al_query *out, al_err *err)
{
	out->n = 0;
	if (qs == NULL || qs[0] == '\0')
		return 0;
	if (strnlen(qs, AL_QUERY_MAX + 1) > AL_QUERY_MAX)
		return al_err_set(err, AL_EINVAL, 0, "query string too long");
	const char *p = qs;
	while (*p != '\0') {
		size_t n = strcspn(p, "&");
		if (n > 0) {
			if (out->n == AL_QPARAMS_MAX) {
				al_query_free(out);
				return al_err_set(err, AL_EINVAL, 0,
						  "too many query parameters");
			}
			const char *eq = memchr(p, '=', n);
			size_t kn = eq != NULL ? (size_t)(eq - p) : n;
			char *k = pct_decode(p, kn);
			char *v = eq != NULL ? pct_decode(eq + 1, n - kn - 1)
					     : strdup("");
			if (k == NULL || v == NULL) {
				free(k);
				free(v);
				al_query_free(out);
				return al_err_set(err, AL_EINVAL, 0,
						  "malformed query string");
			}
			/* One reading only: a layer in front may keep the
			 * first of two, or the last. */
			if (al_query_get(out, k) != NULL) {
				if (al_json_key_tame(k))
					al_err_set(err, AL_EINVAL, 0,
						   "query parameter '%s' is"
						   " repeated (name each"
						   " parameter once)",
						   k);
				else
					al_err_set(err, AL_EINVAL, 0,
						   "a query parameter is"
						   " repeated (name each"
						   " parameter once)");
				free(k);
				free(v);
				al_query_free(out);
				return -1;
			}
			out->q[out->n].key = k;
			out->q[out->n].val = v;
			out->n++;
		}
		p += n;
		if (*p == '&')
			p++;
	}
	return 0;
}

const char *al_query_get(const al_query *q, const char *key)
{
	for (int i = 0; i < q->n; i++)
		if (strcmp(q->q[i].key, key) == 0)
			return q->q[i].val;
	return NULL;
}
