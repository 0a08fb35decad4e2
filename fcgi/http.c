#include "http.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/capacity.h"
#include "base/json.h"
#include "base/log.h"
#include "sandbox/sandbox_ops.h"

const char *fcgi_req_param(al_req *r, const char *name)
{
	return FCGX_GetParam(name, r->fcgi->envp);
}

const char *fcgi_req_prefix(al_req *r, size_t *len)
{
	const char *prefix = fcgi_req_param(r, "AIRLOCK_PREFIX");
	if (prefix == NULL)
		prefix = "";
	size_t n = strlen(prefix);
	while (n > 0 && prefix[n - 1] == '/')
		n--;
	*len = n;
	return prefix;
}

const char *fcgi_req_query(al_req *r, const char *key)
{
	return al_query_get(&r->query, key);
}

al_db *fcgi_req_db(al_req *r, al_err *err)
{
	if (*r->dbp == NULL) {
		*r->dbp = al_db_open(r->cfg->db_conninfo, err);
		if (*r->dbp == NULL) {
			if (err != NULL)
				err->code = AL_EUNAVAIL;
			return NULL;
		}
		return *r->dbp;
	}
	if (al_db_ensure(*r->dbp, err) < 0)
		return NULL;
	return *r->dbp;
}

int fcgi_req_body(al_req *r, size_t max, char **buf, size_t *len, al_err *err)
{
	const char *cl = fcgi_req_param(r, "CONTENT_LENGTH");
	if (cl != NULL && cl[0] != '\0') {
		char *end = NULL;
		errno = 0;
		unsigned long long n = strtoull(cl, &end, 10);
		if (errno != 0 || end == NULL || *end != '\0' || cl[0] == '-')
			return al_err_set(err, AL_EINVAL, 0,
					  "invalid Content-Length");
		if (n > max)
			return al_err_set(err, AL_ETOOBIG, 0,
					  "request body is larger than %zu "
					  "bytes",
					  max);
	}
	size_t cap = 4096, n = 0;
	char *b = malloc(cap + 1);
	if (b == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	for (;;) {
		if (n == cap) {
			if (cap > max) {
				free(b);
				return al_err_set(err, AL_ETOOBIG, 0,
						  "request body is larger "
						  "than %zu bytes",
						  max);
			}
			size_t ncap = cap * 2;
			if (ncap > max + 1)
				ncap = max + 1;
			char *nb = realloc(b, ncap + 1);
			if (nb == NULL) {
				free(b);
				return al_err_set(err, AL_ENOMEM, 0,
						  "out of memory");
			}
			b = nb;
			cap = ncap;
		}
		size_t want = cap - n;
		if (want > 65536)
			want = 65536;
		int got = FCGX_GetStr(b + n, (int)want, r->fcgi->in);
		if (got <= 0)
			break;
		n += (size_t)got;
	}
	if (n > max) {
		free(b);
		return al_err_set(err, AL_ETOOBIG, 0,
				  "request body is larger than %zu bytes", max);
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
}

int fcgi_req_wants_sse(al_req *r)
{
	const char *a = fcgi_req_param(r, "HTTP_ACCEPT");
	return a != NULL && strstr(a, "text/event-stream") != NULL;
}

int fcgi_req_sees(const al_req *r, const char *project)
{
	return r->who.role == AL_ROLE_ADMIN ||
	       (project != NULL && strcmp(project, r->who.project) == 0);
}

const char *fcgi_req_scope(const al_req *r)
{
	return r->who.role == AL_ROLE_ADMIN ? NULL : r->who.project;
}

const char *fcgi_req_list_project(al_req *r)
{
	const char *q = fcgi_req_query(r, "project");
	if (r->who.role == AL_ROLE_ADMIN)
		return q != NULL && q[0] != '\0' ? q : NULL;
	/* No project is named "": another project's list is empty. */
	if (q != NULL && strcmp(q, r->who.project) != 0)
		return "";
	return r->who.project;
}

int fcgi_req_sandbox_running(al_req *r)
{
	al_err err;
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL || al_sandbox_ops_running(r->cfg, db, r->id,
						 fcgi_req_scope(r), &err) < 0) {
		fcgi_http_error(r, &err);
		return -1;
	}
	return 0;
}

int fcgi_req_limit(al_req *r, const char *v, int max, int64_t *out)
{
	char *end = NULL;
	long long n = strtoll(v, &end, 10);
	if (v[0] < '0' || v[0] > '9' || *end != '\0' || n < 1 || n > max) {
		fcgi_http_errorf(r, AL_EINVAL, "'limit' must be 1 to %d", max);
		return -1;
	}
	*out = n;
	return 0;
}

const char *fcgi_http_reason(int status)
{
	/* clang-format off */
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 422: return "Unprocessable Content";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 507: return "Insufficient Storage";
	default: return "Unknown";
	}
	/* clang-format on */
}

int fcgi_http_head(al_req *r, int status, const char *content_type,
		   const char *extra_headers)
{
	char head[1024];

	if (r->headers_sent)
		return -1;
	int n = snprintf(head, sizeof head, "Status: %d %s\r\n%s%s%s%s\r\n",
			 status, fcgi_http_reason(status),
			 content_type != NULL ? "Content-Type: " : "",
			 content_type != NULL ? content_type : "",
			 content_type != NULL ? "\r\n" : "",
			 extra_headers != NULL ? extra_headers : "");
	if (n < 0 || (size_t)n >= sizeof head)
		return -1;
	r->headers_sent = 1;
	r->status = status;
	return FCGX_PutStr(head, n, r->fcgi->out) == n ? 0 : -1;
}

int fcgi_http_write(al_req *r, const void *p, size_t n)
{
	const char *s = p;
	while (n > 0) {
		int chunk = n > 65536 ? 65536 : (int)n;
		if (FCGX_PutStr(s, chunk, r->fcgi->out) != chunk)
			return -1;
		s += chunk;
		n -= (size_t)chunk;
	}
	return 0;
}

int fcgi_http_flush(al_req *r)
{
	if (FCGX_FFlush(r->fcgi->out) < 0 || FCGX_GetError(r->fcgi->out) != 0)
		return -1;
	return 0;
}

/* body as one JSON line, with headers ("Name: value\r\n"... or ""). */
static void send_json(al_req *r, int status, json_object *body,
		      const char *headers)
{
	const char *s = body != NULL ? al_json_compact(body) : "{}";
	size_t n = strlen(s);
	char extra[160];
	snprintf(extra, sizeof extra, "%sContent-Length: %zu\r\n", headers,
		 n + 1);
	if (fcgi_http_head(r, status, "application/json", extra) < 0)
		return;
	fcgi_http_write(r, s, n);
	fcgi_http_write(r, "\n", 1);
}

void fcgi_http_json(al_req *r, int status, json_object *body)
{
	send_json(r, status, body, "");
}

void fcgi_http_error(al_req *r, const al_err *e)
{
	/* Unavailable (PostgreSQL down or out of connections, a shim
	 * gone): the client is told when to ask again. */
	fcgi_http_error_retry(r, e,
			      e->code == AL_EUNAVAIL ? AL_CAPACITY_RETRY_S : 0);
}

void fcgi_http_error_retry(al_req *r, const al_err *e, int retry_after_s)
{
	al_code code = e->code;
	if (code == AL_OK || (unsigned)code >= AL_CODE_MAX)
		code = AL_EINTERNAL;
	int status = al_code_http_status(code);
	if (r->headers_sent) {
		al_warn("%s %s: error after response started: %s", r->method,
			r->path, e->msg);
		return;
	}
	/* Server-side failures are logged in full; the client gets the
	 * same message, which never holds secrets by construction. */
	if (status >= 500)
		al_warn("%s %s: %s: %s", r->method, r->path, al_code_name(code),
			e->msg);
	json_object *o = json_object_new_object();
	json_object *eo = json_object_new_object();
	json_object_object_add(eo, "code",
			       json_object_new_string(al_code_name(code)));
	json_object_object_add(
		eo, "message",
		json_object_new_string(e->msg[0] != '\0' ? e->msg
							 : al_code_name(code)));
	json_object_object_add(o, "error", eo);
	/* A failed authentication goes back to nginx (nginx/airlock.conf),
	 * which counts it against the client's address and answers the 401
	 * itself, or 429 once the address failed too often. Without that
	 * nginx the client gets this 401 as it is. */
	char headers[96] = "";
	if (code == AL_EAUTH)
		snprintf(headers, sizeof headers, "%s",
			 "X-Accel-Redirect: @airlock_unauthorized\r\n");
	else if (retry_after_s > 0)
		snprintf(headers, sizeof headers, "Retry-After: %d\r\n",
			 retry_after_s);
	send_json(r, status, o, headers);
	json_object_put(o);
}

void fcgi_http_errorf(al_req *r, al_code code, const char *fmt, ...)
{
	al_err e;
	va_list ap;
	e.code = code;
	e.sys_errno = 0;
	va_start(ap, fmt);
	vsnprintf(e.msg, sizeof e.msg, fmt, ap);
	va_end(ap);
	fcgi_http_error(r, &e);
}

void fcgi_http_no_content(al_req *r)
{
	fcgi_http_head(r, 204, NULL, NULL);
}
