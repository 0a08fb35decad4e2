/* gw/httpbody: incremental body decoder; chunked framing is a byte state
 * machine, so nothing but the current chunk's remaining size is kept. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "gw/http_internal.h"
#include "gw/httpbody.h"

enum {
	CH_SIZE,    /* hex digits of a chunk size */
	CH_EXT,	    /* ";..." after the size */
	CH_SIZE_LF, /* the LF of the size line */
	CH_DATA,    /* left bytes of data */
	CH_DATA_CR, /* CRLF after the data */
	CH_DATA_LF,
	CH_TRAILER,	 /* start of a trailer line (or the final CRLF) */
	CH_TRAILER_NAME, /* a trailer field's name */
	CH_TRAILER_VAL,	 /* its value, up to CR */
	CH_TRAILER_LF,
	CH_END_LF, /* the LF of the final empty line */
};

void al_httpbody_init(al_httpbody *b, enum al_http_body framing,
		      uint64_t length)
{
	*b = (al_httpbody){.framing = framing, .state = CH_SIZE};
	if (framing == AL_HTTP_BODY_LENGTH)
		b->left = length;
	b->done = framing == AL_HTTP_BODY_NONE ||
		  (framing == AL_HTTP_BODY_LENGTH && length == 0);
}

bool al_httpbody_done(const al_httpbody *b)
{
	return b->done;
}

static int bad(al_err *err, const char *what, unsigned char c)
{
	return al_err_set(err, AL_EPROTO, 0,
			  "http chunked body: byte 0x%02x %s", c, what);
}

/* One framing byte of a chunked body. 0, or -1 (err). */
static int chunked_byte(al_httpbody *b, unsigned char c, al_err *err)
{
	switch (b->state) {
	case CH_SIZE: {
		int h = al_hex_digit(c);
		if (h >= 0) {
			if (++b->digits > 15)
				return al_err_set(err, AL_ETOOBIG, 0,
						  "http chunked body: chunk"
						  " size of more than 15"
						  " digits");
			b->left = b->left * 16 + (uint64_t)h;
			return 0;
		}
		if (b->digits == 0)
			return bad(err, "where a chunk size starts", c);
		if (c == ';') {
			b->state = CH_EXT;
			b->ext_len = 0;
			return 0;
		}
		if (c == '\r') {
			b->state = CH_SIZE_LF;
			return 0;
		}
		return bad(err, "after a chunk size", c);
	}
	case CH_EXT:
		if (c == '\r') {
			b->state = CH_SIZE_LF;
			return 0;
		}
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return bad(err, "in a chunk extension", c);
		if (++b->ext_len > AL_HTTPBODY_EXT_MAX)
			return al_err_set(err, AL_ETOOBIG, 0,
					  "http chunked body: chunk extension"
					  " longer than %d bytes",
					  AL_HTTPBODY_EXT_MAX);
		return 0;
	case CH_SIZE_LF:
		if (c != '\n')
			return bad(err, "after CR in a chunk size line", c);
		if (b->left > AL_HTTP_LENGTH_MAX)
			return al_err_set(err, AL_ETOOBIG, 0,
					  "http chunked body: chunk of %" PRIu64
					  " bytes",
					  b->left);
		b->state = b->left == 0 ? CH_TRAILER : CH_DATA;
		return 0;
	case CH_DATA_CR:
		if (c != '\r')
			return bad(err, "instead of CR after chunk data", c);
		b->state = CH_DATA_LF;
		return 0;
	case CH_DATA_LF:
		if (c != '\n')
			return bad(err, "instead of LF after chunk data", c);
		b->state = CH_SIZE;
		b->digits = 0;
		b->left = 0;
		return 0;
	case CH_TRAILER:
		if (c == '\r') {
			b->state = CH_END_LF;
			return 0;
		}
		if (!al_http_tchar(c))
			return bad(err, "starting a trailer field (obs-fold?)",
				   c);
		if (++b->trailers > AL_HTTPBODY_TRAILERS_MAX)
			return al_err_set(err, AL_ETOOBIG, 0,
					  "http chunked body: more than %d"
					  " trailer fields",
					  AL_HTTPBODY_TRAILERS_MAX);
		b->state = CH_TRAILER_NAME;
		return 0;
	case CH_TRAILER_NAME:
		if (c == ':')
			b->state = CH_TRAILER_VAL;
		else if (!al_http_tchar(c))
			return bad(err, "in a trailer field name", c);
		return 0;
	case CH_TRAILER_VAL:
		if (c == '\r')
			b->state = CH_TRAILER_LF;
		else if ((c < 0x20 && c != '\t') || c == 0x7f)
			return bad(err, "in a trailer field value", c);
		return 0;
	case CH_TRAILER_LF:
		if (c != '\n')
			return bad(err, "after CR in a trailer field", c);
		b->state = CH_TRAILER;
		return 0;
	case CH_END_LF:
		if (c != '\n')
			return bad(err, "after CR of the last line", c);
		b->done = true;
		return 0;
	default:
		return al_err_set(err, AL_EINTERNAL, 0,
				  "http chunked body: state %d", b->state);
	}
}

static int chunked_feed(al_httpbody *b, const char *buf, size_t len,
			size_t *used, const char **data, size_t *data_len,
			al_err *err)
{
	size_t i = 0;
	while (i < len) {
		if (b->state == CH_DATA) {
			size_t n = len - i;
			if ((uint64_t)n > b->left)
				n = (size_t)b->left;
			*data = buf + i;
			*data_len = n;
			b->left -= n;
			b->total += n;
			if (b->left == 0)
				b->state = CH_DATA_CR;
			*used = i + n;
			return AL_AGAIN;
		}
		if (b->state >= CH_TRAILER &&
		    ++b->trailer_bytes > AL_HTTPBODY_TRAILER_BYTES)
			return al_err_set(err, AL_ETOOBIG, 0,
					  "http chunked body: trailers longer"
					  " than %d bytes",
					  AL_HTTPBODY_TRAILER_BYTES);
		if (chunked_byte(b, (unsigned char)buf[i], err) < 0)
			return -1;
		i++;
		if (b->done) {
			*used = i;
			return 0;
		}
	}
	*used = i;
	return AL_AGAIN;
}

int al_httpbody_feed(al_httpbody *b, const char *buf, size_t len, size_t *used,
		     const char **data, size_t *data_len, al_err *err)
{
	*used = 0;
	*data = NULL;
	*data_len = 0;
	if (b->done)
		return 0;
	switch (b->framing) {
	case AL_HTTP_BODY_LENGTH: {
		size_t n = len;
		if ((uint64_t)n > b->left)
			n = (size_t)b->left;
		*data = buf;
		*data_len = n;
		*used = n;
		b->left -= n;
		b->total += n;
		if (b->left == 0) {
			b->done = true;
			return 0;
		}
		return AL_AGAIN;
	}
	case AL_HTTP_BODY_CLOSE:
		*data = buf;
		*data_len = len;
		*used = len;
		b->total += len;
		return AL_AGAIN;
	case AL_HTTP_BODY_CHUNKED:
		return chunked_feed(b, buf, len, used, data, data_len, err);
	case AL_HTTP_BODY_NONE:
	default:
		b->done = true;
		return 0;
	}
}

int al_httpbody_eof(al_httpbody *b, al_err *err)
{
	if (b->done)
		return 0;
	if (b->framing == AL_HTTP_BODY_CLOSE) {
		b->done = true;
		return 0;
	}
	return al_err_set(err, AL_EPROTO, 0,
			  "http body: the peer closed after %" PRIu64
			  " bytes, before the body's end",
			  b->total);
}

size_t al_httpbody_chunk_head(uint64_t n, char out[AL_HTTPBODY_CHUNK_HEAD_MAX])
{
	int w = snprintf(out, AL_HTTPBODY_CHUNK_HEAD_MAX, "%" PRIx64 "\r\n", n);
	return w > 0 ? (size_t)w : 0;
}
