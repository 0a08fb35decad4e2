/* Fuzz the gateway's chunked body decoder (gw/httpbody). Whatever the
 * bytes: every call makes progress and reports data inside what it
 * consumed; feeding in pieces gives the same data and end; a body that
 * ends re-encodes (one chunk per piece, as the gateway forwards it) into
 * a body that decodes to the same data. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gw/httpbody.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct run {
	int rc;
	size_t used;
	char *data; /* decoded bytes, at most the input's size */
	size_t data_len;
	char *reenc; /* the data re-encoded as chunks */
	size_t reenc_len;
} run;

static void add(char **p, size_t *len, const char *s, size_t n)
{
	memcpy(*p + *len, s, n);
	*len += n;
}

static run decode(const char *buf, size_t len, size_t step)
{
	run r = {.rc = AL_AGAIN,
		 .data = malloc(len + 1),
		 /* Each piece: at most 16 + 2 of head and 2 of CRLF. */
		 .reenc = malloc(len * 21 + 8)};
	if (r.data == NULL || r.reenc == NULL)
		abort();
	al_httpbody b;
	al_httpbody_init(&b, AL_HTTP_BODY_CHUNKED, 0);
	size_t off = 0, avail = step ? 0 : len;
	al_err err;
	for (;;) {
		if (off == avail) {
			if (avail == len)
				break;
			avail = avail + step > len ? len : avail + step;
		}
		size_t used = 0, dl = 0;
		const char *d = NULL;
		r.rc = al_httpbody_feed(&b, buf + off, avail - off, &used, &d,
					&dl, &err);
		if (r.rc == -1)
			break;
		if ((used == 0 && r.rc != 0) || dl > used ||
		    off + used > avail ||
		    (dl > 0 && d + dl != buf + off + used))
			abort();
		if (dl > 0) {
			add(&r.data, &r.data_len, d, dl);
			char h[AL_HTTPBODY_CHUNK_HEAD_MAX];
			size_t hl = al_httpbody_chunk_head(dl, h);
			add(&r.reenc, &r.reenc_len, h, hl);
			add(&r.reenc, &r.reenc_len, d, dl);
			add(&r.reenc, &r.reenc_len, "\r\n", 2);
		}
		off += used;
		if (r.rc == 0)
			break;
	}
	if ((r.rc == 0) != al_httpbody_done(&b))
		abort();
	r.used = off;
	return r;
}

static void run_free(run *r)
{
	free(r->data);
	free(r->reenc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	run one = decode(buf, size, 0);
	for (size_t step = 1; step <= 5; step += 4) {
		run s = decode(buf, size, step);
		if (s.rc != one.rc)
			abort();
		if (s.rc != -1 &&
		    (s.used != one.used || s.data_len != one.data_len ||
		     memcmp(s.data, one.data, s.data_len) != 0))
			abort();
		run_free(&s);
	}
	if (one.rc == 0) {
		add(&one.reenc, &one.reenc_len, AL_HTTPBODY_LAST_CHUNK,
		    strlen(AL_HTTPBODY_LAST_CHUNK));
		run again = decode(one.reenc, one.reenc_len, 0);
		if (again.rc != 0 || again.used != one.reenc_len ||
		    again.data_len != one.data_len ||
		    memcmp(again.data, one.data, one.data_len) != 0)
			abort();
		run_free(&again);
	}
	run_free(&one);
	return 0;
}
