/* Fuzz the frame decoder: arbitrary bytes, fed in arbitrary pieces, must
 * decode to well-formed frames or a clean protocol violation; an EXEC
 * frame's payload then goes through al_exec_unpack as the shim and the
 * agent take it (fuzz_file_req checks the payload unpackers in depth). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agentproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_frame(const al_frame *f)
{
	/* Everything handed out must be a legal frame: the caller relies on
	 * these without checking again. */
	if (f->len > AL_FRAME_MAX_PAYLOAD || f->flags != 0 ||
	    strcmp(al_frame_type_name(f->type), "UNKNOWN") == 0 ||
	    f->payload == NULL || f->payload[f->len] != '\0')
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	al_frame_reader r;
	al_frame f;
	al_err err;
	al_buf out;

	if (size == 0)
		return 0;
	/* The first byte picks the feed size, so frames straddle feeds. */
	size_t step = (size_t)data[0] % 32 + 1;
	data++;
	size--;
	al_frame_reader_init(&r);
	al_buf_init(&out, 0);
	for (size_t pos = 0; pos < size; pos += step) {
		size_t n = size - pos < step ? size - pos : step;
		if (al_frame_reader_feed(&r, data + pos, n, &err) < 0)
			abort();
		int rc;
		while ((rc = al_frame_next(&r, &f, &err)) == 1) {
			check_frame(&f);
			if (f.type == AL_F_EXEC) {
				al_exec_msg m;
				if (al_exec_unpack(f.payload, f.len, &m,
						   &err) == 0 &&
				    (m.root == NULL || m.cmd == NULL))
					abort();
				al_exec_msg_free(&m);
			}
			/* Re-encoding a decoded frame must succeed. */
			if (al_frame_encode(&out, f.type, f.id, f.payload,
					    f.len, &err) < 0)
				abort();
			out.len = out.off = 0;
			al_frame_free(&f);
		}
		if (rc < 0)
			break;
	}
	al_buf_free(&out);
	al_frame_reader_free(&r);
	return 0;
}
