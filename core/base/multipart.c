#include "base/multipart.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum mp_state {
	S_PREAMBLE,
	S_AFTER_DELIM,
	S_HEADERS,
	S_DATA,
	S_EPILOGUE,
	S_FAILED,
};

/* After a delimiter: "--" closes, else optional blanks then CRLF. */
enum after_state { A_FIRST, A_DASH, A_PAD, A_CR };

#define PAD_MAX 256 /* transport padding after a delimiter */

struct al_multipart {
	/* "\r\n--" + boundary: a delimiter is always preceded by a CRLF,
	 * which belongs to it, not to the part before. */
	char delim[4 + AL_MP_BOUNDARY_MAX + 1];
	size_t dlen;
	size_t match; /* bytes of delim matched so far */
	enum mp_state state;
	enum after_state after;
	size_t pad;
	size_t padding; /* preamble or epilogue bytes */
	int in_part;
	int nparts;

	char hline[AL_MP_HEADER_MAX];
	size_t hlen;
	int hcr;
	int nheaders;
	int have_cd, have_ct;
	char name[AL_MP_NAME_MAX + 1];
	char filename[AL_MP_NAME_MAX + 1];
	int have_filename;
	char ctype[AL_MP_NAME_MAX + 1];

	al_multipart_cbs cbs;
	void *ctx;
	al_err e; /* the error, kept: a failed parser stays failed */

	/* Form helper. */
	al_mp_field *fields;
	size_t nfields;
	al_mp_field *cur;
	size_t cap; /* allocated bytes of cur->value */
};

static int mp_fail(al_multipart *mp, al_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int mp_fail(al_multipart *mp, al_code code, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	mp->state = S_FAILED;
	return al_err_set(&mp->e, code, 0, "multipart body: %s", msg);
}

static int lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

static int ieq(const char *a, size_t n, const char *b)
{
	if (strlen(b) != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (lower((unsigned char)a[i]) != b[i])
			return 0;
	return 1;
}

static int is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') ||
	       (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* RFC 2046 bchars. */
static int is_bchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') ||
	       (c != '\0' && strchr("'()+_,-./:=? ", c) != NULL);
}

/* A parameter value at *p: token or quoted-string, into out (cap bytes
 * with the NUL). Returns its length or -1 when malformed or too long. */
static long param_value(const char **p, char *out, size_t cap)
{
	const char *s = *p;
	size_t n = 0;
	if (*s == '"') {
		s++;
		while (*s != '"') {
			if (*s == '\0')
				return -1;
			if (*s == '\\') {
				s++;
				if (*s == '\0')
					return -1;
			}
			if (n + 1 >= cap)
				return -1;
			out[n++] = *s++;
		}
		s++;
	} else {
		while (is_tchar(*s)) {
			if (n + 1 >= cap)
				return -1;
			out[n++] = *s++;
		}
		if (n == 0)
			return -1;
	}
	out[n] = '\0';
	*p = s;
	return (long)n;
}

int al_multipart_boundary(const char *content_type,
			  char out[AL_MP_BOUNDARY_MAX + 1], al_err *err)
{
	if (content_type == NULL)
		return al_err_set(err, AL_EINVAL, 0,
				  "missing Content-Type (expected "
				  "multipart/form-data)");
	const char *p = content_type;
	while (is_ows(*p))
		p++;
	size_t tl = strcspn(p, "; \t");
	if (!ieq(p, tl, "multipart/form-data"))
		return al_err_set(err, AL_EINVAL, 0,
				  "Content-Type must be multipart/form-data");
	p += tl;
	int found = 0;
	for (;;) {
		while (is_ows(*p))
			p++;
		if (*p == '\0')
			break;
		if (*p != ';')
			return al_err_set(err, AL_EINVAL, 0,
					  "malformed Content-Type parameters");
		p++;
		while (is_ows(*p))
			p++;
		const char *pn = p;
		while (is_tchar(*p))
			p++;
		size_t pl = (size_t)(p - pn);
		if (pl == 0 || *p != '=')
			return al_err_set(err, AL_EINVAL, 0,
					  "malformed Content-Type parameters");
		p++;
		/* Room for one byte too many, so an overlong boundary is
		 * told apart from a malformed one. */
		char val[AL_MP_BOUNDARY_MAX + 2];
		char big[1024];
		int is_b = ieq(pn, pl, "boundary");
		long vl = is_b ? param_value(&p, val, sizeof val)
			       : param_value(&p, big, sizeof big);
		if (vl < 0)
			return al_err_set(err, AL_EINVAL, 0,
					  is_b ? "boundary is malformed or "
						 "longer than 70 characters"
					       : "malformed Content-Type "
						 "parameters");
		if (!is_b)
			continue;
		if (found)
			return al_err_set(err, AL_EINVAL, 0,
					  "boundary given twice");
		if (vl == 0 || vl > AL_MP_BOUNDARY_MAX)
			return al_err_set(err, AL_EINVAL, 0,
					  "boundary must be 1 to 70 "
					  "characters");
		for (long i = 0; i < vl; i++)
			if (!is_bchar(val[i]))
				return al_err_set(err, AL_EINVAL, 0,
						  "boundary holds a character "
						  "RFC 2046 does not allow");
		if (val[vl - 1] == ' ')
			return al_err_set(err, AL_EINVAL, 0,
					  "boundary must not end in a space");
		memcpy(out, val, (size_t)vl + 1);
		found = 1;
	}
	if (!found)
		return al_err_set(err, AL_EINVAL, 0,
				  "Content-Type has no boundary");
	return 0;
}

al_multipart *al_multipart_new(const char *content_type,
			       const al_multipart_cbs *cbs, void *ctx,
			       al_err *err)
{
	char b[AL_MP_BOUNDARY_MAX + 1];
	if (al_multipart_boundary(content_type, b, err) < 0)
		return NULL;
	al_multipart *mp = calloc(1, sizeof *mp);
	if (mp == NULL) {
		al_err_set(err, AL_ENOMEM, 0, "out of memory");
		return NULL;
	}
	mp->dlen = (size_t)snprintf(mp->delim, sizeof mp->delim, "\r\n--%s", b);
	/* The body may open with the first delimiter itself: behave as if
	 * a CRLF had been seen. */
	mp->match = 2;
	mp->state = S_PREAMBLE;
	if (cbs != NULL)
		mp->cbs = *cbs;
	mp->ctx = ctx;
	return mp;
}

void al_multipart_free(al_multipart *mp)
{
	free(mp);
}

static int emit(al_multipart *mp, const char *d, size_t n)
{
	if (n == 0)
		return 0;
	if (mp->state == S_PREAMBLE) {
		mp->padding += n;
		if (mp->padding > AL_MP_PADDING_MAX)
			return mp_fail(mp, AL_EINVAL,
				       "no boundary in the first %d bytes",
				       AL_MP_PADDING_MAX);
		return 0;
	}
	if (mp->cbs.on_part_data != NULL &&
	    mp->cbs.on_part_data(mp->ctx, d, n, &mp->e) < 0) {
		mp->state = S_FAILED;
		return -1;
	}
	return 0;
}

static int part_end(al_multipart *mp)
{
	if (!mp->in_part)
		return 0;
	mp->in_part = 0;
	if (mp->cbs.on_part_end != NULL &&
	    mp->cbs.on_part_end(mp->ctx, &mp->e) < 0) {
		mp->state = S_FAILED;
		return -1;
	}
	return 0;
}

static int parse_disposition(al_multipart *mp, const char *v)
{
	size_t tl = strcspn(v, "; \t");
	if (!ieq(v, tl, "form-data"))
		return mp_fail(mp, AL_EINVAL,
			       "part Content-Disposition must be form-data");
	const char *p = v + tl;
	int have_name = 0;
	for (;;) {
		while (is_ows(*p))
			p++;
		if (*p == '\0')
			break;
		if (*p != ';')
			goto bad;
		p++;
		while (is_ows(*p))
			p++;
		const char *pn = p;
		while (is_tchar(*p))
			p++;
		size_t pl = (size_t)(p - pn);
		while (is_ows(*p))
			p++;
		if (pl == 0 || *p != '=')
			goto bad;
		p++;
		while (is_ows(*p))
			p++;
		if (ieq(pn, pl, "name") && !have_name) {
			if (param_value(&p, mp->name, sizeof mp->name) <= 0)
				return mp_fail(mp, AL_EINVAL,
					       "part name is empty, malformed "
					       "or longer than %d bytes",
					       AL_MP_NAME_MAX);
			have_name = 1;
		} else if (ieq(pn, pl, "filename") && !mp->have_filename) {
			if (param_value(&p, mp->filename, sizeof mp->filename) <
			    0)
				return mp_fail(mp, AL_EINVAL,
					       "part filename is malformed or "
					       "longer than %d bytes",
					       AL_MP_NAME_MAX);
			mp->have_filename = 1;
		} else {
			goto bad;
		}
	}
	if (!have_name)
		return mp_fail(mp, AL_EINVAL, "part has no name");
	return 0;
bad:
	return mp_fail(mp, AL_EINVAL,
		       "unsupported Content-Disposition (expected form-data; "
		       "name=\"...\"[; filename=\"...\"])");
}

/* One complete header line in mp->hline[0..hlen). */
static int header_line(al_multipart *mp)
{
	if (mp->hlen == 0) {
		if (!mp->have_cd)
			return mp_fail(mp, AL_EINVAL,
				       "part has no Content-Disposition");
		mp->state = S_DATA;
		mp->match = 0;
		mp->in_part = 1;
		if (mp->cbs.on_part_begin != NULL &&
		    mp->cbs.on_part_begin(mp->ctx, mp->name,
					  mp->have_filename ? mp->filename
							    : NULL,
					  mp->have_ct ? mp->ctype : NULL,
					  &mp->e) < 0) {
			mp->state = S_FAILED;
			return -1;
		}
		return 0;
	}
	if (++mp->nheaders > AL_MP_HEADERS_MAX)
		return mp_fail(mp, AL_ETOOBIG, "more than %d headers in a part",
			       AL_MP_HEADERS_MAX);
	char *l = mp->hline;
	size_t n = mp->hlen;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)l[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return mp_fail(mp, AL_EINVAL,
				       "control character in a part header");
	}
	if (is_ows(l[0]))
		return mp_fail(mp, AL_EINVAL,
			       "folded part headers are not supported");
	size_t k = 0;
	while (k < n && is_tchar(l[k]))
		k++;
	if (k == 0 || k == n || l[k] != ':')
		return mp_fail(mp, AL_EINVAL, "malformed part header");
	/* hline has no room for a NUL past a full line: work on a copy of
	 * the value. */
	size_t vs = k + 1;
	while (vs < n && is_ows(l[vs]))
		vs++;
	size_t ve = n;
	while (ve > vs && is_ows(l[ve - 1]))
		ve--;
	char *v = malloc(ve - vs + 1);
	if (v == NULL)
		return mp_fail(mp, AL_ENOMEM, "out of memory");
	memcpy(v, l + vs, ve - vs);
	v[ve - vs] = '\0';
	int rc = 0;
	if (ieq(l, k, "content-disposition")) {
		if (mp->have_cd)
			rc = mp_fail(mp, AL_EINVAL,
				     "Content-Disposition given twice");
		else
			rc = parse_disposition(mp, v);
		mp->have_cd = 1;
	} else if (ieq(l, k, "content-type")) {
		if (mp->have_ct)
			rc = mp_fail(mp, AL_EINVAL,
				     "part Content-Type given twice");
		else if (ve - vs > AL_MP_NAME_MAX)
			rc = mp_fail(mp, AL_EINVAL,
				     "part Content-Type too long");
		else
			memcpy(mp->ctype, v, ve - vs + 1);
		mp->have_ct = 1;
	} else if (ieq(l, k, "content-transfer-encoding")) {
		/* Decoding base64 or quoted-printable is not supported:
		 * refuse rather than store encoded bytes. */
		if (!ieq(v, ve - vs, "7bit") && !ieq(v, ve - vs, "8bit") &&
		    !ieq(v, ve - vs, "binary"))
			rc = mp_fail(mp, AL_EINVAL,
				     "unsupported Content-Transfer-Encoding");
	}
	free(v);
	return rc;
}

static void headers_reset(al_multipart *mp)
{
	mp->hlen = 0;
	mp->hcr = 0;
	mp->nheaders = 0;
	mp->have_cd = mp->have_ct = 0;
	mp->have_filename = 0;
	mp->name[0] = mp->filename[0] = mp->ctype[0] = '\0';
}

static int after_delim(al_multipart *mp, char c)
{
	switch (mp->after) {
	case A_FIRST:
		if (c == '-') {
			mp->after = A_DASH;
			return 0;
		}
		/* Not "--": transport padding or CRLF. */
		__attribute__((fallthrough));
	case A_PAD:
		if (c == '\r') {
			mp->after = A_CR;
			return 0;
		}
		if (is_ows(c) && ++mp->pad <= PAD_MAX) {
			mp->after = A_PAD;
			return 0;
		}
		return mp_fail(mp, AL_EINVAL,
			       "boundary delimiter not followed by CRLF");
	case A_DASH:
		if (c != '-')
			return mp_fail(mp, AL_EINVAL,
				       "boundary delimiter not followed by "
				       "CRLF");
		if (part_end(mp) < 0)
			return -1;
		mp->state = S_EPILOGUE;
		mp->padding = 0;
		return 0;
	case A_CR:
		if (c != '\n')
			return mp_fail(mp, AL_EINVAL,
				       "boundary delimiter not followed by "
				       "CRLF");
		if (part_end(mp) < 0)
			return -1;
		if (++mp->nparts > AL_MP_PARTS_MAX)
			return mp_fail(mp, AL_ETOOBIG, "more than %d parts",
				       AL_MP_PARTS_MAX);
		headers_reset(mp);
		mp->state = S_HEADERS;
		return 0;
	}
	return mp_fail(mp, AL_EINTERNAL, "bad parser state");
}

static int header_byte(al_multipart *mp, char c)
{
	if (mp->hcr) {
		if (c != '\n')
			return mp_fail(mp, AL_EINVAL,
				       "bare CR in a part header");
		mp->hcr = 0;
		int rc = header_line(mp);
		mp->hlen = 0;
		return rc;
	}
	if (c == '\r') {
		mp->hcr = 1;
		return 0;
	}
	if (c == '\n')
		return mp_fail(mp, AL_EINVAL,
			       "part header lines must end in CRLF");
	if (mp->hlen == AL_MP_HEADER_MAX)
		return mp_fail(mp, AL_ETOOBIG,
			       "part header line longer than %d bytes",
			       AL_MP_HEADER_MAX);
	mp->hline[mp->hlen++] = c;
	return 0;
}

static int feed(al_multipart *mp, const char *d, size_t len)
{
	size_t i = 0;
	while (i < len) {
		switch (mp->state) {
		case S_PREAMBLE:
		case S_DATA:
			if (mp->match == 0) {
				/* Fast path: everything before the next CR
				 * is data. */
				const char *cr = memchr(d + i, '\r', len - i);
				size_t n = cr != NULL ? (size_t)(cr - (d + i))
						      : len - i;
				if (emit(mp, d + i, n) < 0)
					return -1;
				i += n;
				if (cr != NULL) {
					mp->match = 1;
					i++;
				}
			} else if (d[i] == mp->delim[mp->match]) {
				i++;
				if (++mp->match == mp->dlen) {
					mp->match = 0;
					mp->state = S_AFTER_DELIM;
					mp->after = A_FIRST;
					mp->pad = 0;
				}
			} else {
				/* '\r' occurs only first in the delimiter
				 * (boundaries hold no CR), so a mismatch
				 * means the matched bytes were data and
				 * d[i] starts afresh. */
				if (emit(mp, mp->delim, mp->match) < 0)
					return -1;
				mp->match = 0;
			}
			break;
		case S_AFTER_DELIM:
			if (after_delim(mp, d[i++]) < 0)
				return -1;
			break;
		case S_HEADERS:
			if (header_byte(mp, d[i++]) < 0)
				return -1;
			break;
		case S_EPILOGUE:
			mp->padding += len - i;
			i = len;
			if (mp->padding > AL_MP_PADDING_MAX)
				return mp_fail(mp, AL_EINVAL,
					       "more than %d bytes after the "
					       "closing boundary",
					       AL_MP_PADDING_MAX);
			break;
		case S_FAILED:
		default:
			return -1;
		}
	}
	return 0;
}

int al_multipart_feed(al_multipart *mp, const char *data, size_t len,
		      al_err *err)
{
	if (mp->state == S_FAILED || feed(mp, data, len) < 0) {
		mp->state = S_FAILED;
		if (mp->e.code == AL_OK)
			al_err_set(&mp->e, AL_EINTERNAL, 0,
				   "multipart body: a callback failed");
		if (err != NULL)
			*err = mp->e;
		return -1;
	}
	return 0;
}

int al_multipart_finish(al_multipart *mp, al_err *err)
{
	if (mp->state != S_FAILED && mp->state != S_EPILOGUE)
		mp_fail(mp, AL_EINVAL, "body ends before the closing boundary");
	for (size_t i = 0; mp->state != S_FAILED && i < mp->nfields; i++)
		if (mp->fields[i].required && !mp->fields[i].present)
			mp_fail(mp, AL_EINVAL, "missing form field '%s'",
				mp->fields[i].name);
	if (mp->state == S_FAILED) {
		if (err != NULL)
			*err = mp->e;
		return -1;
	}
	return 0;
}

/* --- form helper --- */

static int form_begin(void *ctx, const char *name, const char *filename,
		      const char *content_type, al_err *err)
{
	al_multipart *mp = ctx;
	(void)content_type;
	al_mp_field *f = NULL;
	for (size_t i = 0; i < mp->nfields; i++)
		if (strcmp(mp->fields[i].name, name) == 0)
			f = &mp->fields[i];
	if (f == NULL) {
		/* The client's name is not echoed: only ours are. */
		char names[256] = "";
		for (size_t i = 0; i < mp->nfields; i++) {
			size_t l = strlen(names);
			snprintf(names + l, sizeof names - l, "%s%s",
				 i > 0 ? ", " : "", mp->fields[i].name);
		}
		return al_err_set(err, AL_EINVAL, 0,
				  "multipart body: unexpected form field "
				  "(expected %s)",
				  names);
	}
	if (f->present)
		return al_err_set(err, AL_EINVAL, 0,
				  "multipart body: form field '%s' sent twice",
				  f->name);
	f->present = 1;
	f->len = 0;
	if (filename != NULL) {
		f->filename = strdup(filename);
		if (f->filename == NULL)
			return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	}
	mp->cur = f;
	mp->cap = 0;
	return 0;
}

static int form_data(void *ctx, const char *data, size_t len, al_err *err)
{
	al_multipart *mp = ctx;
	al_mp_field *f = mp->cur;
	if (f == NULL)
		return 0;
	if (len > f->max || f->len > f->max - len)
		return al_err_set(err, AL_ETOOBIG, 0,
				  "form field '%s' is larger than %llu bytes",
				  f->name, (unsigned long long)f->max);
	if (f->fd >= 0) {
		size_t off = 0;
		while (off < len) {
			ssize_t w = write(f->fd, data + off, len - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return al_err_sys(err, AL_ESYS, errno,
						  "writing form field '%s'",
						  f->name);
			off += (size_t)w;
		}
	} else {
		size_t need = (size_t)f->len + len + 1;
		if (need > mp->cap) {
			size_t cap = mp->cap != 0 ? mp->cap : 4096;
			while (cap < need)
				cap *= 2;
			if (cap > f->max + 1)
				cap = (size_t)f->max + 1;
			char *v = realloc(f->value, cap);
			if (v == NULL)
				return al_err_set(err, AL_ENOMEM, 0,
						  "out of memory");
			f->value = v;
			mp->cap = cap;
		}
		memcpy(f->value + f->len, data, len);
		f->value[f->len + len] = '\0';
	}
	f->len += len;
	return 0;
}

static int form_end(void *ctx, al_err *err)
{
	al_multipart *mp = ctx;
	al_mp_field *f = mp->cur;
	mp->cur = NULL;
	if (f != NULL && f->fd < 0 && f->value == NULL) {
		f->value = strdup("");
		if (f->value == NULL)
			return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	}
	return 0;
}

al_multipart *al_multipart_new_form(const char *content_type,
				    al_mp_field *fields, size_t n, al_err *err)
{
	static const al_multipart_cbs cbs = {
		.on_part_begin = form_begin,
		.on_part_data = form_data,
		.on_part_end = form_end,
	};
	al_multipart *mp = al_multipart_new(content_type, &cbs, NULL, err);
	if (mp == NULL)
		return NULL;
	mp->ctx = mp;
	mp->fields = fields;
	mp->nfields = n;
	for (size_t i = 0; i < n; i++) {
		fields[i].present = 0;
		fields[i].len = 0;
		fields[i].value = NULL;
		fields[i].filename = NULL;
	}
	return mp;
}

void al_mp_fields_free(al_mp_field *fields, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(fields[i].value);
		free(fields[i].filename);
		fields[i].value = NULL;
		fields[i].filename = NULL;
	}
}
