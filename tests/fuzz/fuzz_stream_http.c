/* Fuzz the stream sockets' request parser (core/streamhttp): whatever the bytes, the
 * head is accepted with a token of 64 lowercase hex digits, refused, or
 * waits for more, and a prefix of an accepted head only ever waits. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/streamhttp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char token[AL_STREAM_TOKEN_LEN + 1];
	enum al_streamhttp_result r = al_streamhttp_parse((const char *)data,
							  size, token);
	if (r < AL_STREAMHTTP_NOT_FOUND || r > AL_STREAMHTTP_OK)
		abort();
	if (r == AL_STREAMHTTP_OK) {
		if (!al_hex_id_valid(token, AL_STREAM_TOKEN_LEN) ||
		    size > AL_STREAMHTTP_HEAD_MAX)
			abort();
		char again[AL_STREAM_TOKEN_LEN + 1];
		for (size_t n = 0; n < size; n += 1 + n / 8)
			if (al_streamhttp_parse((const char *)data, n, again) !=
			    AL_STREAMHTTP_INCOMPLETE)
				abort();
	}
	return 0;
}
