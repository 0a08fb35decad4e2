/* Fuzz gw/credscan on request bytes: whatever they are, feeding them in
 * pieces finds the same placeholders as one feed and as one last piece
 * (al_credscan_last), names stay within their bound, and a plain
 * placeholder appended is always found. Pieces of one byte never let
 * the scanner skip a short base64 run (its end is never in the piece):
 * they are the reference the skipping runs are held to. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gw/credscan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct tally {
	unsigned long n;
	unsigned long sum; /* of the names' bytes, to compare runs */
} tally;

static void on_hit(void *arg, const al_credscan_hit *h)
{
	tally *t = arg;
	size_t nl = strnlen(h->name, sizeof h->name);
	if (nl > AL_CREDSCAN_NAME_MAX)
		abort();
	t->n++;
	for (size_t i = 0; i < nl; i++)
		t->sum = t->sum * 31 + (unsigned char)h->name[i];
}

static tally scan(const char *buf, size_t len, size_t step)
{
	tally t = {0};
	al_credscan s;
	al_credscan_init(&s, on_hit, &t);
	if (step == SIZE_MAX) {
		al_credscan_last(&s, buf, len);
		if (al_credscan_hits(&s) != t.n)
			abort();
		return t;
	}
	if (step == 0)
		step = len > 0 ? len : 1;
	for (size_t i = 0; i < len; i += step)
		al_credscan_feed(&s, buf + i, len - i < step ? len - i : step);
	al_credscan_end(&s);
	if (al_credscan_hits(&s) != t.n)
		abort();
	return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	tally one = scan(buf, size, 0);
	for (size_t step = 1; step <= 13; step += 6) {
		tally k = scan(buf, size, step);
		if (k.n != one.n || k.sum != one.sum)
			abort();
	}
	tally last = scan(buf, size, SIZE_MAX);
	if (last.n != one.n || last.sum != one.sum)
		abort();
	char *with = malloc(size + 32);
	if (with == NULL)
		abort();
	memcpy(with, data, size);
	memcpy(with + size, " airlock-cred:x ", 16);
	tally w = scan(with, size + 16, 0);
	if (w.n == 0)
		abort();
	free(with);
	return 0;
}
