/* http: the request context of airlock-fcgi and the response helpers the
 * handlers share. One al_req per FastCGI request; everything it points to
 * is released at the end of the request (al_req_end). */
#ifndef AL_FCGI_HTTP_H
#define AL_FCGI_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <fcgiapp.h>
#include <json-c/json.h>

#include "base/config.h"
#include "base/err.h"
#include "base/query.h"
#include "model/auth.h"
#include "model/db.h"

#define AL_URI_PATH_MAX 2048
/* A captured path segment: ids (al_id_valid, 63) and credential names
 * (64) with their NUL. */
#define AL_REQ_ID_MAX 80

typedef struct al_req {
	FCGX_Request *fcgi;
	const al_config *cfg;
	al_db **dbp; /* the thread's connection, opened lazily */
	const char *method;
	char path[AL_URI_PATH_MAX]; /* route path, prefix stripped */
	char id[AL_REQ_ID_MAX];	    /* {id} captured by the router */
	al_query query;
	al_identity who; /* the key's, on routes that need one */
	char client[64]; /* for the access log */
	int status;	 /* sent status, for the access log */
	int headers_sent;
	int64_t start_ms;
} al_req;

typedef void (*al_handler_fn)(al_req *r);

/* Request parameters (FastCGI environment). */
const char *fcgi_req_param(al_req *r, const char *name);
/* The location prefix the API is served under (AIRLOCK_PREFIX, without
 * its trailing slashes): its length in *len, "" when none. */
const char *fcgi_req_prefix(al_req *r, size_t *len);
/* Query parameter by exact key, NULL if absent (first occurrence). */
const char *fcgi_req_query(al_req *r, const char *key);
/* The thread's database connection, connected if needed; NULL with
 * AL_EUNAVAIL when PostgreSQL is not reachable. */
al_db *fcgi_req_db(al_req *r, al_err *err);
/* Read the whole request body, at most max bytes (413 past it, whatever
 * CONTENT_LENGTH says). *buf is malloc'ed and NUL-terminated. */
int fcgi_req_body(al_req *r, size_t max, char **buf, size_t *len, al_err *err);
/* 1 if the client asked for server-sent events. */
int fcgi_req_wants_sse(al_req *r);
/* 1 if r's key may see an object of project: an admin key every
 * project's, a member key its own project's only. */
int fcgi_req_sees(const al_req *r, const char *project);
/* The project r's key is confined to: NULL (none) for an admin key. */
const char *fcgi_req_scope(const al_req *r);
/* Whose objects a list shows: an admin's ?project= (NULL: every
 * project's); a member's own project's only, whatever it asks. */
const char *fcgi_req_list_project(al_req *r);

/* 0 when the sandbox r->id, which r's key may see, is running (an exec
 * or a file transfer may go to it); else its error is answered here
 * (404, 409) and -1 returned. */
int fcgi_req_sandbox_running(al_req *r);

/* A page's ?limit= value v: 1..max into *out, else 400 answered here
 * and -1. */
int fcgi_req_limit(al_req *r, const char *v, int max, int64_t *out);

/* Responses. Each sends the status line and headers once. */
const char *fcgi_http_reason(int status);
int fcgi_http_head(al_req *r, int status, const char *content_type,
		   const char *extra_headers);
int fcgi_http_write(al_req *r, const void *p, size_t n);
int fcgi_http_flush(al_req *r);
void fcgi_http_json(al_req *r, int status, json_object *body);
void fcgi_http_error(al_req *r, const al_err *e);
/* The same with Retry-After when retry_after_s > 0. */
void fcgi_http_error_retry(al_req *r, const al_err *e, int retry_after_s);
void fcgi_http_errorf(al_req *r, al_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void fcgi_http_no_content(al_req *r);

/* Router (router.c): dispatch r to its handler, answering 404 / 405 / 401
 * itself. */
void fcgi_route(al_req *r);

/* Handlers. */
void fcgi_api_health(al_req *r);
void fcgi_api_info(al_req *r);
void fcgi_api_sandbox_create(al_req *r);
void fcgi_api_sandbox_list(al_req *r);
void fcgi_api_sandbox_get(al_req *r);
void fcgi_api_sandbox_delete(al_req *r);
void fcgi_api_sandbox_pause(al_req *r);
void fcgi_api_sandbox_resume(al_req *r);
void fcgi_api_sandbox_suspend(al_req *r);
void fcgi_api_sandbox_fork(al_req *r);
void fcgi_api_sandbox_timeout(al_req *r);
void fcgi_api_snapshot_create(al_req *r);
void fcgi_api_snapshot_list(al_req *r);
void fcgi_api_snapshot_get(al_req *r);
void fcgi_api_snapshot_delete(al_req *r);
void fcgi_api_sandbox_network_put(al_req *r);
void fcgi_api_sandbox_egress(al_req *r);
void fcgi_api_build_egress(al_req *r);
void fcgi_api_exec(al_req *r);
void fcgi_api_files_put(al_req *r);
void fcgi_api_files_get(al_req *r);

#endif
