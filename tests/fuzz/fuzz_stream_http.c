/* Fuzz the shim's stream socket request parser: whatever the bytes, the
 * head is accepted with a token of 64 lowercase hex digits, refused, or
 * waits for more, and a prefix of an accepted head only ever waits. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../shim/stream_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char token[AL_STREAM_TOKEN_LEN + 1];
	enum shim_http_result r = shim_http_parse((const char *)data, size,
						  token);
	if (r < SHIM_HTTP_NOT_FOUND || r > SHIM_HTTP_OK)
		abort();
	if (r == SHIM_HTTP_OK) {
		if (!al_hex_id_valid(token, AL_STREAM_TOKEN_LEN) ||
		    size > SHIM_HTTP_HEAD_MAX)
			abort();
		char again[AL_STREAM_TOKEN_LEN + 1];
		for (size_t n = 0; n < size; n += 1 + n / 8)
			if (shim_http_parse((const char *)data, n, again) !=
			    SHIM_HTTP_INCOMPLETE)
				abort();
	}
	return 0;
}
