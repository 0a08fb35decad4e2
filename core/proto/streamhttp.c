/* The stream sockets' request parser and answers (see streamhttp.h). */
#include "proto/streamhttp.h"

#include <errno.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A header line [p, p + n) without its CRLF: name ":" OWS value OWS,
 * visible characters, spaces and tabs only. */
static enum al_streamhttp_result header(const char *p, size_t n)
{
	size_t i = 0;
	while (i < n && tchar((unsigned char)p[i]))
		i++;
	if (i == 0 || i >= n || p[i] != ':')
		return AL_STREAMHTTP_BAD;
	size_t name_len = i++;
	while (i < n && (p[i] == ' ' || p[i] == '\t'))
		i++;
	const char *v = p + i;
	size_t vlen = n - i;
	for (; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c != '\t' && (c < 0x20 || c == 0x7f))
			return AL_STREAMHTTP_BAD;
	}
	while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
		vlen--;
	/* No body: nginx is told to send none (proxy_pass_request_body). */
	if (name_len == 17 && strncasecmp(p, "Transfer-Encoding", 17) == 0)
		return AL_STREAMHTTP_BAD;
	if (name_len == 14 && strncasecmp(p, "Content-Length", 14) == 0 &&
	    !(vlen == 1 && v[0] == '0'))
		return AL_STREAMHTTP_BAD;
	return AL_STREAMHTTP_OK;
}

static enum al_streamhttp_result request_line(const char *p, size_t n,
					      char *token)
{
	static const char path[] = "/stream/";
	const size_t plen = sizeof path - 1;
	const char *sp1 = memchr(p, ' ', n);
	if (sp1 == NULL || sp1 == p)
		return AL_STREAMHTTP_BAD;
	size_t mlen = (size_t)(sp1 - p);
	for (size_t i = 0; i < mlen; i++)
		if (!tchar((unsigned char)p[i]))
			return AL_STREAMHTTP_BAD;
	const char *t = sp1 + 1;
	const char *sp2 = memchr(t, ' ', n - (size_t)(t - p));
	if (sp2 == NULL || sp2 == t)
		return AL_STREAMHTTP_BAD;
	size_t tlen = (size_t)(sp2 - t);
	for (size_t i = 0; i < tlen; i++)
		if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
			return AL_STREAMHTTP_BAD;
	const char *ver = sp2 + 1;
	size_t vlen = n - (size_t)(ver - p);
	if (vlen != 8 || (memcmp(ver, "HTTP/1.1", 8) != 0 &&
			  memcmp(ver, "HTTP/1.0", 8) != 0))
		return AL_STREAMHTTP_BAD;
	if (mlen != 3 || memcmp(p, "GET", 3) != 0 ||
	    tlen != plen + AL_STREAM_TOKEN_LEN || memcmp(t, path, plen) != 0)
		return AL_STREAMHTTP_NOT_FOUND;
	for (size_t i = 0; i < AL_STREAM_TOKEN_LEN; i++) {
		char c = t[plen + i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return AL_STREAMHTTP_NOT_FOUND;
		token[i] = c;
	}
	token[AL_STREAM_TOKEN_LEN] = '\0';
	return AL_STREAMHTTP_OK;
}

enum al_streamhttp_result
al_streamhttp_parse(const char *p, size_t n,
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
			return AL_STREAMHTTP_BAD;
		if (p[i] != '\n')
			continue;
		size_t len = i - 1 - start; /* without the CRLF */
		enum al_streamhttp_result r;
		if (lines == 0)
			r = len == 0 ? AL_STREAMHTTP_BAD
				     : request_line(p + start, len, token);
		else if (len == 0) {
			end = i + 1;
			break;
		} else if (lines > AL_STREAMHTTP_HEADERS_MAX)
			r = AL_STREAMHTTP_BAD;
		else
			r = header(p + start, len);
		/* A 404 path still has to be a well-formed request. */
		if (r == AL_STREAMHTTP_BAD)
			return r;
		if (r == AL_STREAMHTTP_NOT_FOUND)
			token[0] = '\0';
		lines++;
		start = i + 1;
	}
	if (end == 0)
		return n >= AL_STREAMHTTP_HEAD_MAX ? AL_STREAMHTTP_BAD
						   : AL_STREAMHTTP_INCOMPLETE;
	if (end != n || end > AL_STREAMHTTP_HEAD_MAX)
		return AL_STREAMHTTP_BAD;
	return token[0] == '\0' ? AL_STREAMHTTP_NOT_FOUND : AL_STREAMHTTP_OK;
}

const char al_streamhttp_sse_head[] = "HTTP/1.1 200 OK\r\n"
				      "Content-Type: text/event-stream\r\n"
				      "Cache-Control: no-cache\r\n"
				      "X-Accel-Buffering: no\r\n"
				      "Connection: close\r\n"
				      "\r\n";
const size_t al_streamhttp_sse_head_len = sizeof al_streamhttp_sse_head - 1;

void al_streamhttp_refuse(int fd, int status)
{
	static const char bad[] =
		"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json"
		"\r\nConnection: close\r\n\r\n"
		"{\"error\":{\"code\":\"invalid_request\",\"message\":"
		"\"malformed stream request\"}}\n";
	static const char missing[] =
		"HTTP/1.1 404 Not Found\r\nContent-Type: application/json"
		"\r\nConnection: close\r\n\r\n"
		"{\"error\":{\"code\":\"not_found\",\"message\":"
		"\"no such stream (its token is used or expired)\"}}\n";
	const char *p = status == 400 ? bad : missing;
	size_t n = status == 400 ? sizeof bad - 1 : sizeof missing - 1;
	/* A fresh socket's buffer takes this much; if not, nginx sees the
	 * connection close, which is an answer too. */
	ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)w;
	/* Unread bytes at close would reset the connection before the
	 * peer reads the answer: take what is there (bounded). */
	char junk[4096];
	for (int i = 0; i < 16 && recv(fd, junk, sizeof junk, MSG_DONTWAIT) > 0;
	     i++)
		;
	close(fd);
}

int al_streamhttp_listen(const char *path, al_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof sa.sun_path)
		return al_err_set(err, AL_EINVAL, 0, "socket path %s too long",
				  path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "socket");
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    chmod(path, 0666) < 0 || listen(fd, 128) < 0) {
		int e = errno;
		close(fd);
		unlink(path);
		return al_err_sys(err, AL_ESYS, e, "stream socket %s", path);
	}
	return fd;
}

int al_streamhttp_client_gone(int fd)
{
	char b[256];
	ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
	return !(n < 0 && (errno == EAGAIN || errno == EINTR));
}

int al_streamhttp_accept(int listen_fd, al_streamhttp_conn *c, int n,
			 int64_t deadline_ms)
{
	int refused = 0;
	for (;;) {
		int fd = accept4(listen_fd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return refused;
		int k = 0;
		while (k < n && c[k].fd >= 0)
			k++;
		if (k == n) {
			close(fd);
			refused++;
			continue;
		}
		c[k].fd = fd;
		c[k].len = 0;
		c[k].deadline_ms = deadline_ms;
	}
}

enum al_streamhttp_result
al_streamhttp_read(al_streamhttp_conn *c, char token[AL_STREAM_TOKEN_LEN + 1])
{
	ssize_t n = recv(c->fd, c->head + c->len, sizeof c->head - c->len,
			 MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return AL_STREAMHTTP_INCOMPLETE;
	if (n <= 0) {
		close(c->fd);
		c->fd = -1;
		c->len = 0;
		return AL_STREAMHTTP_CLOSED;
	}
	c->len += (size_t)n;
	return al_streamhttp_parse(c->head, c->len, token);
}
