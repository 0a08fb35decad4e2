/* gw/http: what requests and responses share: the head scanner, field
 * line syntax, the end-to-end field list and the serialisers' buffer. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw/http.h"
#include "gw/http_internal.h"

/* The longest value al_http_fields_set takes (a credential). */
#define SET_VALUE_MAX 8192

void al_http_req_parser_init(al_http_parser *p, bool tls)
{
	*p = (al_http_parser){.max = AL_HTTP_REQ_HEAD_MAX, .tls = tls};
}

void al_http_resp_parser_init(al_http_parser *p)
{
	*p = (al_http_parser){.max = AL_HTTP_RESP_HEAD_MAX, .response = true};
}

int al_http_reject(al_http_parser *p, int status, al_err *err, const char *fmt,
		   ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (p->response)
		status = 502;
	p->status = status;
	al_code code = AL_EINVAL;
	if (p->response)
		code = AL_EPROTO;
	else if (status == 413 || status == 414 || status == 431)
		code = AL_ETOOBIG;
	else if (status == 405)
		code = AL_EPERM;
	return al_err_set(err, code, 0, "http %s: %s",
			  p->response ? "response" : "request", msg);
}

int al_http_scan(al_http_parser *p, const char *buf, size_t len,
		 size_t *head_len, al_err *err)
{
	size_t max_lines = 1 + (p->response ? AL_HTTP_RESP_FIELDS_MAX
					    : AL_HTTP_REQ_FIELDS_MAX);
	/* A CR is checked when the byte after it arrives: resuming at i
	 * looks back at buf[i - 1], already scanned. */
	for (size_t i = p->scanned; i < len; i++) {
		if (i >= p->max)
			return al_http_reject(p, 431, err,
					      "head longer than %zu bytes",
					      p->max);
		unsigned char c = (unsigned char)buf[i];
		if (i > 0 && buf[i - 1] == '\r' && c != '\n')
			return al_http_reject(p, 400, err,
					      "CR not followed by LF");
		if (c == '\0')
			return al_http_reject(p, 400, err, "NUL byte in head");
		if (c != '\n')
			continue;
		if (i == 0 || buf[i - 1] != '\r')
			return al_http_reject(p, 400, err,
					      "line ends in a bare LF");
		size_t line_len = i - 1 - p->line_start;
		p->line_start = i + 1;
		if (line_len == 0) {
			if (p->lines == 0)
				return al_http_reject(p, 400, err,
						      "empty line before the"
						      " first line");
			p->scanned = i + 1;
			*head_len = i + 1;
			return 0;
		}
		if (++p->lines > max_lines)
			return al_http_reject(p, 431, err,
					      "more than %zu fields",
					      max_lines - 1);
	}
	p->scanned = len;
	return AL_AGAIN;
}

/* RFC 9110 5.6.2 tchar (GNU range designators: gnu17). */
static const bool tchars[256] = {
	['0' ... '9'] = true, ['A' ... 'Z'] = true, ['a' ... 'z'] = true,
	['!'] = true,	      ['#'] = true,	    ['$'] = true,
	['%'] = true,	      ['&'] = true,	    ['\''] = true,
	['*'] = true,	      ['+'] = true,	    ['-'] = true,
	['.'] = true,	      ['^'] = true,	    ['_'] = true,
	['`'] = true,	      ['|'] = true,	    ['~'] = true,
};

bool al_http_tchar(unsigned char c)
{
	return tchars[c];
}

static bool ows(unsigned char c)
{
	return c == ' ' || c == '\t';
}

/* field-vchar, SP or HTAB: no control byte but HTAB, no DEL. */
static bool value_byte(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static int field_line(al_http_parser *p, char *line, size_t len,
		      al_http_raw *out, al_err *err)
{
	if (ows((unsigned char)line[0]))
		return al_http_reject(p, 400, err,
				      "obs-fold (a line starting with"
				      " whitespace)");
	size_t i = 0;
	while (i < len && al_http_tchar((unsigned char)line[i]))
		i++;
	if (i == len)
		return al_http_reject(p, 400, err, "field line without colon");
	if (line[i] != ':') {
		if (ows((unsigned char)line[i]))
			return al_http_reject(p, 400, err,
					      "whitespace before a colon");
		return al_http_reject(p, 400, err,
				      "invalid byte 0x%02x in a field name",
				      (unsigned char)line[i]);
	}
	if (i == 0)
		return al_http_reject(p, 400, err, "empty field name");
	size_t vs = i + 1, ve = len;
	while (vs < ve && ows((unsigned char)line[vs]))
		vs++;
	while (ve > vs && ows((unsigned char)line[ve - 1]))
		ve--;
	for (size_t k = vs; k < ve; k++)
		if (!value_byte((unsigned char)line[k]))
			return al_http_reject(p, 400, err,
					      "control byte 0x%02x in the value"
					      " of %.*s",
					      (unsigned char)line[k], (int)i,
					      line);
	line[i] = '\0';
	line[ve] = '\0';
	*out = (al_http_raw){.name = line,
			     .name_len = i,
			     .value = line + vs,
			     .value_len = ve - vs};
	return 0;
}

int al_http_lines_parse(al_http_parser *p, const char *buf, size_t head_len,
			size_t tail_room, size_t max_fields, al_http_lines *l,
			al_err *err)
{
	*l = (al_http_lines){0};
	char *h = malloc(head_len + tail_room + 1);
	if (h == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "http: head copy");
	memcpy(h, buf, head_len);
	h[head_len] = '\0';
	/* The scanner checked that every line ends in CRLF and that the
	 * head ends in an empty line. */
	char *s = h, *end = h + head_len;
	bool first = true;
	while (s < end) {
		char *cr = memchr(s, '\r', (size_t)(end - s));
		size_t len = (size_t)(cr - s);
		if (len == 0)
			break;
		*cr = '\0';
		if (first) {
			l->first = s;
			l->first_len = len;
			first = false;
		} else if (l->n >= max_fields ||
			   l->n >= AL_HTTP_RESP_FIELDS_MAX) {
			free(h);
			return al_http_reject(p, 431, err,
					      "more than %zu fields",
					      max_fields);
		} else if (field_line(p, s, len, &l->raw[l->n], err) < 0) {
			free(h);
			return -1;
		} else {
			l->n++;
		}
		s = cr + 2;
	}
	l->head = h;
	return 0;
}

static bool name_eq(const char *a, size_t a_len, const char *b, bool loose)
{
	size_t i = 0;
	for (; i < a_len; i++) {
		unsigned char x = (unsigned char)a[i];
		if (x >= 'A' && x <= 'Z')
			x = (unsigned char)(x + 32);
		if (loose && x == '_')
			x = '-';
		unsigned char y = (unsigned char)b[i];
		if (y >= 'A' && y <= 'Z')
			y = (unsigned char)(y + 32);
		if (loose && y == '_')
			y = '-';
		if (y == '\0' || x != y)
			return false;
	}
	return b[i] == '\0';
}

bool al_http_name_is(const char *a, size_t a_len, const char *b)
{
	return name_eq(a, a_len, b, false);
}

bool al_http_name_like(const char *a, size_t a_len, const char *b)
{
	return name_eq(a, a_len, b, true);
}

static const struct {
	const char *name;
	size_t len;
	enum al_http_kind kind;
} kinds[] = {
	{"host", 4, AL_HTTP_K_HOST},
	{"content-length", 14, AL_HTTP_K_CONTENT_LENGTH},
	{"transfer-encoding", 17, AL_HTTP_K_TRANSFER_ENCODING},
	{"connection", 10, AL_HTTP_K_CONNECTION},
	{"expect", 6, AL_HTTP_K_EXPECT},
	{"upgrade", 7, AL_HTTP_K_UPGRADE},
	{"http2-settings", 14, AL_HTTP_K_UPGRADE},
	{"keep-alive", 10, AL_HTTP_K_HOP},
	{"proxy-connection", 16, AL_HTTP_K_HOP},
	{"proxy-authorization", 19, AL_HTTP_K_HOP},
	{"te", 2, AL_HTTP_K_HOP},
	{"trailer", 7, AL_HTTP_K_HOP},
	{"alt-svc", 7, AL_HTTP_K_ALT_SVC},
};

enum al_http_kind al_http_name_kind(const char *name, size_t len)
{
	bool underscore = memchr(name, '_', len) != NULL;
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
		if (kinds[i].len != len)
			continue;
		if (name_eq(name, len, kinds[i].name, false))
			return kinds[i].kind;
		if (underscore && kinds[i].kind != AL_HTTP_K_ALT_SVC &&
		    name_eq(name, len, kinds[i].name, true))
			return AL_HTTP_K_IMITATION;
	}
	return AL_HTTP_K_OTHER;
}

bool al_http_name_reserved(enum al_http_kind k)
{
	return k != AL_HTTP_K_OTHER && k != AL_HTTP_K_ALT_SVC;
}

int al_http_length_parse(const char *v, size_t len, uint64_t *out,
			 bool *too_big)
{
	*too_big = false;
	if (len == 0)
		return -1;
	for (size_t i = 0; i < len; i++)
		if (v[i] < '0' || v[i] > '9')
			return -1;
	/* 15 digits cannot overflow; AL_HTTP_LENGTH_MAX has 13. */
	if (len > 15) {
		*too_big = true;
		return -1;
	}
	uint64_t n = 0;
	for (size_t i = 0; i < len; i++)
		n = n * 10 + (uint64_t)(v[i] - '0');
	if (n > AL_HTTP_LENGTH_MAX) {
		*too_big = true;
		return -1;
	}
	*out = n;
	return 0;
}

int al_http_conn_parse(char *v, al_http_conn *c)
{
	char *s = v;
	for (;;) {
		while (ows((unsigned char)*s))
			s++;
		char *t = s;
		while (al_http_tchar((unsigned char)*s))
			s++;
		size_t tl = (size_t)(s - t);
		while (ows((unsigned char)*s))
			s++;
		if (*s != ',' && *s != '\0')
			return -1;
		if (tl > 0) {
			if (c->n >= AL_HTTP_CONN_NAMES_MAX)
				return -1;
			c->name[c->n] = t;
			c->len[c->n] = tl;
			c->n++;
			if (al_http_name_is(t, tl, "close"))
				c->close = true;
		}
		if (*s == '\0')
			return 0;
		s++;
	}
}

void al_http_fields_keep(al_http_fields *fs, const al_http_lines *l,
			 const bool *keep, const al_http_conn *c)
{
	for (size_t i = 0; i < l->n; i++) {
		const al_http_raw *f = &l->raw[i];
		bool drop = !keep[i];
		for (size_t k = 0; k < c->n && !drop; k++)
			drop = c->len[k] == f->name_len &&
			       strncasecmp(c->name[k], f->name, c->len[k]) == 0;
		if (!drop)
			al_http_fields_add(fs, f->name, f->name_len, f->value,
					   f->value_len);
	}
}

void al_http_fields_add(al_http_fields *fs, const char *name, size_t nl,
			const char *value, size_t vl)
{
	if (fs->n >= sizeof fs->f / sizeof fs->f[0])
		return; /* cannot happen: raw fields are bounded below */
	fs->f[fs->n++] = (al_http_field){.name = name,
					 .name_len = nl,
					 .value = value,
					 .value_len = vl};
}

void al_http_fields_free(al_http_fields *fs)
{
	for (size_t i = 0; i < fs->n_extra; i++)
		free(fs->extra[i]);
	fs->n_extra = 0;
	fs->n = 0;
}

const char *al_http_fields_get(const al_http_fields *fs, const char *name)
{
	for (size_t i = 0; i < fs->n; i++)
		if (strcasecmp(fs->f[i].name, name) == 0)
			return fs->f[i].value;
	return NULL;
}

size_t al_http_fields_remove(al_http_fields *fs, const char *name)
{
	size_t w = 0, removed = 0;
	for (size_t i = 0; i < fs->n; i++) {
		if (al_http_name_like(fs->f[i].name, fs->f[i].name_len, name))
			removed++;
		else
			fs->f[w++] = fs->f[i];
	}
	fs->n = w;
	return removed;
}

/* A value the serialisers may write: field bytes, no edge whitespace. */
static int value_check(const char *name, const char *value, size_t vl,
		       al_err *err)
{
	if (vl > SET_VALUE_MAX)
		return al_err_set(err, AL_EINVAL, 0,
				  "http: value of %s longer than %d bytes",
				  name, SET_VALUE_MAX);
	for (size_t i = 0; i < vl; i++)
		if (!value_byte((unsigned char)value[i]))
			return al_err_set(err, AL_EINVAL, 0,
					  "http: control byte in the value of"
					  " %s",
					  name);
	if (vl > 0 &&
	    (ows((unsigned char)value[0]) || ows((unsigned char)value[vl - 1])))
		return al_err_set(err, AL_EINVAL, 0,
				  "http: value of %s starts or ends with"
				  " whitespace",
				  name);
	if (memchr(value, '\0', vl) != NULL)
		return al_err_set(err, AL_EINVAL, 0,
				  "http: NUL in the value of %s", name);
	return 0;
}

int al_http_fields_replace_value(al_http_fields *fs, size_t i,
				 const char *value, size_t len, al_err *err)
{
	if (i >= fs->n)
		return al_err_set(err, AL_EINVAL, 0, "http: no field %zu", i);
	if (value_check(fs->f[i].name, value, len, err) < 0)
		return -1;
	if (fs->n_extra >= AL_HTTP_EXTRA_FIELDS_MAX)
		return al_err_set(err, AL_ETOOBIG, 0,
				  "http: more than %d fields set",
				  AL_HTTP_EXTRA_FIELDS_MAX);
	char *v = malloc(len + 1);
	if (v == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "http: replace %s",
				  fs->f[i].name);
	memcpy(v, value, len);
	v[len] = '\0';
	fs->extra[fs->n_extra++] = v;
	fs->f[i].value = v;
	fs->f[i].value_len = len;
	return 0;
}

int al_http_fields_set(al_http_fields *fs, const char *name, const char *value,
		       al_err *err)
{
	size_t nl = strlen(name), vl = strnlen(value, SET_VALUE_MAX + 1);
	if (nl == 0 || nl > 256)
		return al_err_set(err, AL_EINVAL, 0,
				  "http: field name of %zu bytes", nl);
	for (size_t i = 0; i < nl; i++)
		if (!al_http_tchar((unsigned char)name[i]))
			return al_err_set(err, AL_EINVAL, 0,
					  "http: field name is not a token");
	if (al_http_name_reserved(al_http_name_kind(name, nl)))
		return al_err_set(err, AL_EINVAL, 0,
				  "http: %s is written by the gateway", name);
	if (value_check(name, value, vl, err) < 0)
		return -1;
	if (fs->n_extra >= AL_HTTP_EXTRA_FIELDS_MAX)
		return al_err_set(err, AL_ETOOBIG, 0,
				  "http: more than %d fields set",
				  AL_HTTP_EXTRA_FIELDS_MAX);
	char *e = malloc(nl + vl + 2);
	if (e == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "http: set %s", name);
	memcpy(e, name, nl + 1);
	memcpy(e + nl + 1, value, vl);
	e[nl + 1 + vl] = '\0';
	al_http_fields_remove(fs, name);
	fs->extra[fs->n_extra++] = e;
	/* Room: the parsers keep at most AL_HTTP_RESP_FIELDS_MAX. */
	fs->f[fs->n++] = (al_http_field){.name = e,
					 .name_len = nl,
					 .value = e + nl + 1,
					 .value_len = vl};
	return 0;
}

void al_http_out_add(al_http_out *o, const char *s, size_t n)
{
	if (o->failed)
		return;
	if (o->len + n + 1 > o->cap) {
		size_t cap = o->cap ? o->cap : 512;
		while (cap < o->len + n + 1)
			cap *= 2;
		char *p = realloc(o->p, cap);
		if (p == NULL) {
			o->failed = true;
			return;
		}
		o->p = p;
		o->cap = cap;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

void al_http_out_str(al_http_out *o, const char *s)
{
	al_http_out_add(o, s, strlen(s));
}

void al_http_out_fields(al_http_out *o, const al_http_fields *fs)
{
	for (size_t i = 0; i < fs->n; i++) {
		al_http_out_add(o, fs->f[i].name, fs->f[i].name_len);
		al_http_out_add(o, ": ", 2);
		al_http_out_add(o, fs->f[i].value, fs->f[i].value_len);
		al_http_out_add(o, "\r\n", 2);
	}
}

char *al_http_out_finish(al_http_out *o, size_t *len, al_err *err)
{
	al_http_out_add(o, "", 0);
	if (o->failed || o->p == NULL) {
		free(o->p);
		*o = (al_http_out){0};
		al_err_set(err, AL_ENOMEM, ENOMEM, "http: serialising a head");
		return NULL;
	}
	o->p[o->len] = '\0';
	*len = o->len;
	char *p = o->p;
	*o = (al_http_out){0};
	return p;
}

/* (fcgi/http.c has the API's own al_http_reason: this one is the
 * gateway's, with the statuses it answers.) */
static const char *own_reason(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 413:
		return "Content Too Large";
	case 414:
		return "URI Too Long";
	case 417:
		return "Expectation Failed";
	case 421:
		return "Misdirected Request";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	case 505:
		return "HTTP Version Not Supported";
	default:
		return "";
	}
}

char *al_http_own_response(int status, const char *text, bool close,
			   size_t *len, al_err *err)
{
	if (status < 100 || status > 599) {
		al_err_set(err, AL_EINVAL, 0, "http: status %d", status);
		return NULL;
	}
	size_t tl = text != NULL ? strlen(text) : 0;
	for (size_t i = 0; i < tl; i++) {
		unsigned char c = (unsigned char)text[i];
		if (c < 0x20 || c >= 0x7f) {
			al_err_set(err, AL_EINVAL, 0,
				   "http: response text with byte 0x%02x", c);
			return NULL;
		}
	}
	al_http_out o = {0};
	char line[96];
	snprintf(line, sizeof line, "HTTP/1.1 %03d %s\r\n", status,
		 own_reason(status));
	al_http_out_str(&o, line);
	if (status >= 200) {
		size_t bl = text != NULL ? tl + 1 : 0;
		if (text != NULL)
			al_http_out_str(&o, "Content-Type: text/plain\r\n");
		snprintf(line, sizeof line, "Content-Length: %zu\r\n", bl);
		al_http_out_str(&o, line);
		if (close)
			al_http_out_str(&o, "Connection: close\r\n");
		al_http_out_add(&o, "\r\n", 2);
		if (text != NULL) {
			al_http_out_add(&o, text, tl);
			al_http_out_add(&o, "\n", 1);
		}
	} else {
		al_http_out_add(&o, "\r\n", 2);
	}
	return al_http_out_finish(&o, len, err);
}
