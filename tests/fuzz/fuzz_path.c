/* Fuzz the API's path validation and normalisation (files API paths and
 * exec cwd come straight from clients). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *p = malloc(size + 1);
	if (p == NULL)
		return 0;
	memcpy(p, data, size);
	p[size] = '\0';
	char out[4200];
	if (al_path_check(p, NULL) == 0 &&
	    al_path_normalize(p, out, sizeof out, NULL) == 0) {
		/* What passes is absolute, and its normal form passes too. */
		if (out[0] != '/' || al_path_check(out, NULL) != 0)
			abort();
		if (strstr(out, "/../") != NULL || strstr(out, "//") != NULL)
			abort();
	}
	free(p);
	return 0;
}
