/* Fuzz the two parsers of vm/capture.h: a QEMU's /proc/<pid>/maps text
 * (QEMU decides its mappings and their names) and a capture's meta. The
 * first byte picks which. Either answers cleanly: found exactly the
 * RAM or refused with AL_EPROTO; parsed or refused with AL_ESTATE, and a
 * parsed meta formats back to text that parses to the same. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "vm/capture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *text = (const char *)data + 1;
	size_t len = size - 1;
	al_err err = {0};
	if (data[0] & 1) {
		uint64_t start = 7;
		int rc = al_vmcap_find_ram(text, len, makedev(0, 1), 1234,
					   1u << 20, &start, &err);
		if (rc == 0 && memmem(text, len, " rw-p ", 6) == NULL)
			abort();
		if (rc < 0 && (err.code != AL_EPROTO || err.msg[0] == '\0'))
			abort();
		return 0;
	}
	al_vmcap_meta m, again;
	if (al_vmcap_meta_parse(text, len, &m, &err) < 0) {
		if (err.code != AL_ESTATE || err.msg[0] == '\0')
			abort();
		return 0;
	}
	char out[AL_VMCAP_META_MAX + 1], out2[AL_VMCAP_META_MAX + 1];
	int n = al_vmcap_meta_format(&m, out, sizeof out);
	if (n < 0 || al_vmcap_meta_parse(out, (size_t)n, &again, &err) < 0 ||
	    al_vmcap_meta_format(&again, out2, sizeof out2) != n ||
	    memcmp(out, out2, (size_t)n) != 0)
		abort();
	return 0;
}
