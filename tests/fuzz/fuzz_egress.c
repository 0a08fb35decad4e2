/* Fuzz the egress record's unpacker (core/net/egress.h): the controller reads
 * files a gateway (which parses hostile bytes, and may be compromised)
 * wrote. Whatever the bytes: 0 with a record within bounds, which packs
 * and unpacks to itself, or -1 with an error. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/egress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	al_egress_rec r, again;
	al_err err = {0};
	if (al_egress_unpack(data, size, &r, &err) < 0) {
		if (err.code == AL_OK)
			abort();
		return 0;
	}
	if (strlen(r.path) > AL_EGRESS_PATH_MAX || r.port > 65535 ||
	    r.protocol < 0 || r.protocol > AL_EGRESS_PROTO_NONE)
		abort();
	char line[AL_EGRESS_LINE_MAX];
	int n = al_egress_pack(&r, line, sizeof line, &err);
	if (n <= 0 || al_egress_unpack(line, (size_t)n, &again, &err) < 0 ||
	    memcmp(&r, &again, sizeof r) != 0)
		abort();
	return 0;
}
