#include "sse.h"

#include <stdlib.h>
#include <string.h>

void cli_sse_init(sse_parser *p, sse_event_fn fn, void *ctx)
{
	memset(p, 0, sizeof *p);
	p->fn = fn;
	p->ctx = ctx;
}

void cli_sse_free(sse_parser *p)
{
	free(p->line);
	free(p->data);
	memset(p, 0, sizeof *p);
}

static int grow(char **buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	if (need > SSE_LINE_MAX + 1)
		return -1;
	size_t nc = *cap != 0 ? *cap : 256;
	while (nc < need)
		nc *= 2;
	char *nb = realloc(*buf, nc);
	if (nb == NULL)
		return -1;
	*buf = nb;
	*cap = nc;
	return 0;
}

static int dispatch(sse_parser *p)
{
	if (p->data_len > 0 || p->event[0] != '\0') {
		if (grow(&p->data, &p->data_cap, p->data_len + 1) < 0)
			return -1;
		/* The last data line's newline is not part of the data. */
		if (p->data_len > 0 && p->data[p->data_len - 1] == '\n')
			p->data_len--;
		p->data[p->data_len] = '\0';
		p->fn(p->event[0] != '\0' ? p->event : "message", p->data,
		      p->ctx);
	}
	p->event[0] = '\0';
	p->data_len = 0;
	return 0;
}

static int field(sse_parser *p, const char *line, size_t len)
{
	if (len == 0)
		return dispatch(p);
	if (line[0] == ':')
		return 0; /* comment / keepalive */
	const char *colon = memchr(line, ':', len);
	size_t nlen = colon != NULL ? (size_t)(colon - line) : len;
	const char *val = colon != NULL ? colon + 1 : line + len;
	size_t vlen = len - (size_t)(val - line);
	if (vlen > 0 && val[0] == ' ') {
		val++;
		vlen--;
	}
	if (nlen == 5 && memcmp(line, "event", 5) == 0) {
		if (vlen >= sizeof p->event)
			vlen = sizeof p->event - 1;
		memcpy(p->event, val, vlen);
		p->event[vlen] = '\0';
	} else if (nlen == 4 && memcmp(line, "data", 4) == 0) {
		if (grow(&p->data, &p->data_cap, p->data_len + vlen + 2) < 0)
			return -1;
		memcpy(p->data + p->data_len, val, vlen);
		p->data_len += vlen;
		p->data[p->data_len++] = '\n';
	}
	return 0;
}

int cli_sse_feed(sse_parser *p, const char *buf, size_t n)
{
	if (p->overflow)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char c = buf[i];
		if (c == '\n') {
			size_t len = p->len;
			if (len > 0 && p->line[len - 1] == '\r')
				len--;
			if (field(p, p->line, len) < 0) {
				p->overflow = 1;
				return -1;
			}
			p->len = 0;
			continue;
		}
		if (grow(&p->line, &p->cap, p->len + 1) < 0) {
			p->overflow = 1;
			return -1;
		}
		p->line[p->len++] = c;
	}
	return 0;
}
