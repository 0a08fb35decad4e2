/* Fuzz the payload unpackers of agentproto that take bytes from a
 * hostile peer: file and disk grow requests (from the host, in the agent)
 * and ERROR (from the agent, in fcgi). Whatever the bytes, an unpack returns 0 with
 * a well-formed result or -1 with an error. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agentproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	al_file_req q;
	al_err err = {0}, got = {0};

	if (al_file_req_unpack(data, size, &q, &err) == 0) {
		size_t n = strnlen(q.path, sizeof q.path);
		if (n == sizeof q.path || q.path[0] != '/' || q.mode > 07777)
			abort();
		/* What was accepted packs and unpacks to itself. */
		char *s = al_file_req_pack(q.path, (int)q.mode, &err);
		al_file_req again;
		if (s == NULL ||
		    al_file_req_unpack(s, strlen(s), &again, &err) < 0 ||
		    strcmp(again.path, q.path) != 0 || again.mode != q.mode)
			abort();
		free(s);
	} else if (err.code == AL_OK) {
		abort();
	}
	al_disk_grow g;
	err.code = AL_OK;
	if (al_disk_grow_unpack(data, size, &g, &err) == 0) {
		if (strnlen(g.path, sizeof g.path) == sizeof g.path ||
		    g.path[0] != '/' || g.bytes == 0 || g.bytes > INT64_MAX)
			abort();
	} else if (err.code == AL_OK) {
		abort();
	}
	if (al_error_unpack(data, size, &got, &err) == 0 &&
	    strnlen(got.msg, sizeof got.msg) == sizeof got.msg)
		abort();
	return 0;
}
