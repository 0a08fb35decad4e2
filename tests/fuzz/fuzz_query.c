/* Fuzz the API's query string parser with arbitrary client bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *qs = malloc(size + 1);
	if (qs == NULL)
		return 0;
	memcpy(qs, data, size);
	qs[size] = '\0';
	al_query q;
	if (al_query_parse(qs, &q, NULL) == 0) {
		for (int i = 0; i < q.n; i++) {
			/* Decoded strings are NUL-free and no longer than
			 * the input. */
			if (strlen(q.q[i].key) > size ||
			    strlen(q.q[i].val) > size)
				abort();
			/* Each key once: the parameter its get finds. */
			if (al_query_get(&q, q.q[i].key) != q.q[i].val)
				abort();
		}
		al_query_free(&q);
	}
	free(qs);
	return 0;
}
