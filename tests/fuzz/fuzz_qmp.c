/* Fuzz the QMP reply parser: any line QEMU (or whatever holds its
 * socket) sends must classify cleanly, and what it hands out must be
 * what the contract in qmp.h promises. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "vm/qmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_object *out = (json_object *)1;
	int64_t id = 12345;
	al_err err = {0};
	int rc = al_qmp_parse_reply((const char *)data, size, &out, &id, &err);
	switch (rc) {
	case AL_QMP_RETURN:
		/* Callers treat NULL as failure: never NULL on success. */
		if (out == NULL)
			abort();
		json_object_put(out);
		break;
	case AL_QMP_EVENT:
	case AL_QMP_GREETING:
		if (out != NULL)
			abort();
		break;
	case -1:
		if (out != NULL ||
		    (err.code != AL_EPROTO && err.code != AL_EINTERNAL &&
		     err.code != AL_ENOMEM) ||
		    err.msg[0] == '\0')
			abort();
		break;
	default:
		abort();
	}
	return 0;
}
