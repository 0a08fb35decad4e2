/* Fuzz the multipart/form-data parser: the input's first line is the
 * Content-Type header value, the rest the body, fed in pieces whose sizes
 * come from the input too; the raw callbacks check that parts nest, and
 * the form helper runs with small limits. */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct track {
	int open;
	int parts;
} track;

static int on_begin(void *ctx, const char *name, const char *filename,
		    const char *ctype, al_err *err)
{
	track *t = ctx;
	(void)err;
	if (t->open || name == NULL || name[0] == '\0' ||
	    strlen(name) > AL_MP_NAME_MAX ||
	    (filename != NULL && strlen(filename) > AL_MP_NAME_MAX) ||
	    (ctype != NULL && strlen(ctype) > AL_MP_NAME_MAX))
		abort();
	t->open = 1;
	if (++t->parts > AL_MP_PARTS_MAX)
		abort();
	return 0;
}

static int on_data(void *ctx, const char *d, size_t n, al_err *err)
{
	track *t = ctx;
	(void)err;
	if (!t->open || n == 0)
		abort();
	volatile char c = d[0];
	c = d[n - 1];
	(void)c;
	return 0;
}

static int on_end(void *ctx, al_err *err)
{
	track *t = ctx;
	(void)err;
	if (!t->open)
		abort();
	t->open = 0;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int devnull = -1;
	if (devnull < 0)
		devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (size < 2)
		return 0;
	uint8_t mode = data[0];
	data++;
	size--;
	const uint8_t *nl = memchr(data, '\n', size < 256 ? size : 256);
	if (nl == NULL)
		return 0;
	char ct[257];
	memcpy(ct, data, (size_t)(nl - data));
	ct[nl - data] = '\0';
	const char *body = (const char *)nl + 1;
	size_t len = size - (size_t)(nl - data) - 1;

	al_err err = {0};
	track t = {0};
	al_mp_field f[3] = {
		{.name = "name", .max = 16, .fd = -1, .required = 1},
		{.name = "airlockfile", .max = 1024, .fd = -1, .required = 1},
		{.name = "context", .max = 1 << 20, .fd = devnull},
	};
	static const al_multipart_cbs cbs = {on_begin, on_data, on_end};
	al_multipart *mp = (mode & 1) ? al_multipart_new_form(ct, f, 3, &err)
				      : al_multipart_new(ct, &cbs, &t, &err);
	if (mp == NULL)
		return 0;
	size_t step = (size_t)(mode >> 1) + 1;
	int rc = 0;
	for (size_t i = 0; i < len && rc == 0; i += step) {
		size_t n = len - i < step ? len - i : step;
		rc = al_multipart_feed(mp, body + i, n, &err);
	}
	if (rc == 0)
		rc = al_multipart_finish(mp, &err);
	if (rc == 0) {
		if (mode & 1) {
			if (f[0].value == NULL || f[0].len > 16 ||
			    f[1].value == NULL || f[1].len > 1024)
				abort();
		} else if (t.open) {
			abort();
		}
	} else if (err.code == AL_OK) {
		abort();
	}
	al_mp_fields_free(f, 3);
	al_multipart_free(mp);
	return 0;
}
