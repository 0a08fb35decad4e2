/* Fuzz gateway/gw/fakeip's loader: arbitrary bytes as a saved map. Whatever
 * they are: no crash; a map it accepts packs back to exactly the same
 * bytes (the format has one spelling), maps every address back to its
 * name and every name to its address, and keeps handing out new
 * addresses after its last one.
 *
 * Input: one byte of cap (1..256, 0 = AL_FAKEIP_CAP_DEFAULT), then the
 * file. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gw/fakeip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint32_t cap = data[0] ? data[0] : AL_FAKEIP_CAP_DEFAULT;
	const char *buf = (const char *)data + 1;
	size_t len = size - 1;
	al_err err;
	al_fakeip *m = al_fakeip_unpack(buf, len, cap, &err);
	if (m == NULL) {
		if (err.code != AL_EINVAL && err.code != AL_ENOMEM)
			abort();
		return 0;
	}
	size_t n = al_fakeip_count(m);
	if (n > cap)
		abort();
	char *out;
	size_t olen;
	if (al_fakeip_pack(m, &out, &olen, NULL) != 0)
		abort();
	if (olen != len || memcmp(out, buf, len) != 0)
		abort();
	free(out);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t addr = 0xc6120001u + i, again;
		const char *name = al_fakeip_name(m, addr);
		if (name == NULL || al_fakeip_get(m, name, &again, NULL) != 0 ||
		    again != addr)
			abort();
	}
	uint32_t next;
	int rc = al_fakeip_get(m, "fuzz-new-name.test", &next, &err);
	if (n < cap && (rc != 0 || next != 0xc6120001u + (uint32_t)n)) {
		/* unless the name was in the map already */
		if (rc != 0 || next >= 0xc6120001u + (uint32_t)n)
			abort();
	}
	al_fakeip_free(m);
	return 0;
}
