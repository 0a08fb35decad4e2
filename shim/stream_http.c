/* The stream socket's request parser (see stream_http.h). */
#include "stream_http.h"

#include <string.h>
#include <strings.h>

static int tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A header line [p, p + n) without its CRLF: name ":" OWS value OWS,
 * visible characters, spaces and tabs only. */
static enum shim_http_result header(const char *p, size_t n)
{
	size_t i = 0;
	while (i < n && tchar((unsigned char)p[i]))
		i++;
	if (i == 0 || i >= n || p[i] != ':')
		return SHIM_HTTP_BAD;
	size_t name_len = i++;
	while (i < n && (p[i] == ' ' || p[i] == '\t'))
		i++;
	const char *v = p + i;
	size_t vlen = n - i;
	for (; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c != '\t' && (c < 0x20 || c == 0x7f))
			return SHIM_HTTP_BAD;
	}
	while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
		vlen--;
	/* No body: nginx is told to send none (proxy_pass_request_body). */
	if (name_len == 17 && strncasecmp(p, "Transfer-Encoding", 17) == 0)
		return SHIM_HTTP_BAD;
	if (name_len == 14 && strncasecmp(p, "Content-Length", 14) == 0 &&
	    !(vlen == 1 && v[0] == '0'))
		return SHIM_HTTP_BAD;
	return SHIM_HTTP_OK;
}

static enum shim_http_result request_line(const char *p, size_t n, char *token)
{
	static const char path[] = "/stream/";
	const size_t plen = sizeof path - 1;
	const char *sp1 = memchr(p, ' ', n);
	if (sp1 == NULL || sp1 == p)
		return SHIM_HTTP_BAD;
	size_t mlen = (size_t)(sp1 - p);
	for (size_t i = 0; i < mlen; i++)
		if (!tchar((unsigned char)p[i]))
			return SHIM_HTTP_BAD;
	const char *t = sp1 + 1;
	const char *sp2 = memchr(t, ' ', n - (size_t)(t - p));
	if (sp2 == NULL || sp2 == t)
		return SHIM_HTTP_BAD;
	size_t tlen = (size_t)(sp2 - t);
	for (size_t i = 0; i < tlen; i++)
		if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
			return SHIM_HTTP_BAD;
	const char *ver = sp2 + 1;
	size_t vlen = n - (size_t)(ver - p);
	if (vlen != 8 || (memcmp(ver, "HTTP/1.1", 8) != 0 &&
			  memcmp(ver, "HTTP/1.0", 8) != 0))
		return SHIM_HTTP_BAD;
	if (mlen != 3 || memcmp(p, "GET", 3) != 0 ||
	    tlen != plen + AL_STREAM_TOKEN_LEN || memcmp(t, path, plen) != 0)
		return SHIM_HTTP_NOT_FOUND;
	for (size_t i = 0; i < AL_STREAM_TOKEN_LEN; i++) {
		char c = t[plen + i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return SHIM_HTTP_NOT_FOUND;
		token[i] = c;
	}
	token[AL_STREAM_TOKEN_LEN] = '\0';
	return SHIM_HTTP_OK;
}

enum shim_http_result shim_http_parse(const char *p, size_t n,
				      char token[AL_STREAM_TOKEN_LEN + 1])
{
	/* Every line ends in CRLF; a NUL or a bare CR or LF anywhere is
	 * malformed, whether or not the head is complete. */
	size_t lines = 0, start = 0, end = 0;
	token[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\0' ||
		    (p[i] == '\n' && (i == 0 || p[i - 1] != '\r')) ||
		    (p[i] == '\r' && i + 1 < n && p[i + 1] != '\n'))
			return SHIM_HTTP_BAD;
		if (p[i] != '\n')
			continue;
		size_t len = i - 1 - start; /* without the CRLF */
		enum shim_http_result r;
		if (lines == 0)
			r = len == 0 ? SHIM_HTTP_BAD
				     : request_line(p + start, len, token);
		else if (len == 0) {
			end = i + 1;
			break;
		} else if (lines > SHIM_HTTP_HEADERS_MAX)
			r = SHIM_HTTP_BAD;
		else
			r = header(p + start, len);
		/* A 404 path still has to be a well-formed request. */
		if (r == SHIM_HTTP_BAD)
			return r;
		if (r == SHIM_HTTP_NOT_FOUND)
			token[0] = '\0';
		lines++;
		start = i + 1;
	}
	if (end == 0)
		return n >= SHIM_HTTP_HEAD_MAX ? SHIM_HTTP_BAD
					       : SHIM_HTTP_INCOMPLETE;
	if (end != n || end > SHIM_HTTP_HEAD_MAX)
		return SHIM_HTTP_BAD;
	return token[0] == '\0' ? SHIM_HTTP_NOT_FOUND : SHIM_HTTP_OK;
}
