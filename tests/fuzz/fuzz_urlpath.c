/* Fuzz the gateway's request path normalisation (gw/urlpath): the guest
 * writes the path. Whatever it is, a normal form never grows, starts
 * with '/', has no "//", no dot segment and no encoded '/', '\' or NUL
 * in its path part, and is its own normal form; what is refused says
 * why. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gw/urlpath.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The bytes gw/http lets through to the normaliser: visible ASCII but
 * '#' and '\', each '%' with two hex digits. */
static int target_ok(const char *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)t[i];
		if (c <= 0x20 || c >= 0x7f || c == '#' || c == '\\')
			return 0;
		if (c == '%') {
			if (i + 2 >= n ||
			    !strchr("0123456789abcdefABCDEF", t[i + 1]) ||
			    !strchr("0123456789abcdefABCDEF", t[i + 2]) ||
			    t[i + 1] == '\0' || t[i + 2] == '\0')
				return 0;
		}
	}
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 8192)
		return 0;
	char *t = malloc(size + 1);
	if (t == NULL)
		return 0;
	memcpy(t, data, size);
	t[size] = '\0';
	if (!target_ok(t, size)) {
		free(t);
		return 0;
	}
	size_t n = 0;
	const char *why = NULL;
	if (al_urlpath_normalize(t, size, &n, &why) < 0) {
		if (why == NULL || why[0] == '\0')
			abort();
		free(t);
		return 0;
	}
	if (n > size || t[n] != '\0' || strlen(t) != n || t[0] != '/')
		abort();
	size_t plen = strcspn(t, "?");
	char *path = strndup(t, plen);
	if (path == NULL)
		abort();
	if (strstr(path, "//") != NULL || strstr(path, "/./") != NULL ||
	    strstr(path, "/../") != NULL || strcasestr(path, "%2f") != NULL ||
	    strcasestr(path, "%5c") != NULL || strstr(path, "%00") != NULL)
		abort();
	size_t pl = strlen(path);
	if ((pl >= 2 && strcmp(path + pl - 2, "/.") == 0) ||
	    (pl >= 3 && strcmp(path + pl - 3, "/..") == 0))
		abort();
	free(path);
	char *again = strdup(t);
	size_t n2 = 0;
	if (again == NULL || al_urlpath_normalize(again, n, &n2, &why) < 0 ||
	    n2 != n || strcmp(again, t) != 0)
		abort();
	free(again);
	free(t);
	return 0;
}
