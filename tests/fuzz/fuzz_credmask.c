/* Fuzz gw/credmask on response bytes: the output has the input's length,
 * is the same whatever the pieces (the last one fed with the end or
 * not) and masked in place as a string (its
 * shortcuts for a head's fields) alike, never holds a plain, base64 (at
 * any alignment) or percent-encoded occurrence of a value, and leaves bytes alone or makes
 * them '*'. The first input byte picks a value length, its bytes
 * follow. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "gw/credmask.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct sink {
	char *p;
	size_t len, cap;
} sink;

static void to_sink(void *arg, const char *p, size_t n)
{
	sink *s = arg;
	if (s->len + n > s->cap)
		abort();
	memcpy(s->p + s->len, p, n);
	s->len += n;
}

/* buf in pieces of step bytes (0: one piece), then the end; last: the
 * last piece and the end in one (al_credmask_feed_end). */
static sink run(al_credmask *m, const char *buf, size_t len, size_t step,
		bool last)
{
	sink s = {.p = malloc(len + 1), .cap = len};
	if (s.p == NULL)
		abort();
	if (step == 0)
		step = len > 0 ? len : 1;
	size_t i = 0;
	for (; i + step < len || (!last && i < len); i += step)
		al_credmask_feed(m, buf + i, len - i < step ? len - i : step,
				 to_sink, &s);
	if (last)
		al_credmask_feed_end(m, buf + i, len - i, to_sink, &s);
	else
		al_credmask_end(m, to_sink, &s);
	if (s.len != len)
		abort();
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t vl = 1 + data[0] % 24;
	if (size < 1 + vl)
		return 0;
	al_credmask_value v = {(const char *)data + 1, vl};
	al_err err;
	al_credmask *m = al_credmask_new(&v, 1, &err);
	if (m == NULL)
		abort();
	const char *buf = (const char *)data + 1 + vl;
	size_t len = size - 1 - vl;
	sink one = run(m, buf, len, 0, false);
	for (size_t i = 0; i < len; i++)
		if (one.p[i] != buf[i] && one.p[i] != '*')
			abort();
	/* A value with a '*' can be formed by a mask and its neighbour. */
	bool star = memchr(v.p, '*', vl) != NULL;
	if (!star && memmem(one.p, len, v.p, vl) != NULL)
		abort();
	for (size_t step = 0; step <= 11; step += step == 0 ? 1 : 5)
		for (int last = 0; last < 2; last++) {
			if (step == 0 && !last)
				continue; /* that is one */
			sink k = run(m, buf, len, step, last);
			if (memcmp(k.p, one.p, len) != 0)
				abort();
			free(k.p);
		}
	/* The value's base64, embedded in the output, is masked too, at
	 * each byte alignment (after 0, 1 or 2 bytes of the input). */
	for (size_t a = 0; a < 3 && a <= len; a++) {
		unsigned char raw[2 + 24], enc[4 * 9 + 1];
		memcpy(raw, buf, a);
		memcpy(raw + a, v.p, vl);
		int el = EVP_EncodeBlock(enc, raw, (int)(a + vl));
		if (!star && vl >= 6 &&
		    memmem(one.p, len, enc, (size_t)el) != NULL)
			abort();
	}
	/* Every byte percent-encoded is masked too. */
	char pct[3 * 24 + 1];
	for (size_t i = 0; i < vl; i++)
		snprintf(pct + 3 * i, 4, "%%%02X", (unsigned char)v.p[i]);
	if (!star && memmem(one.p, len, pct, 3 * vl) != NULL)
		abort();
	char *s = malloc(len + 1);
	if (s == NULL)
		abort();
	memcpy(s, buf, len);
	al_credmask_string(m, s, len);
	if (memcmp(s, one.p, len) != 0)
		abort();
	free(s);
	free(one.p);
	al_credmask_free(m);
	return 0;
}
