/* Templates over the API:
 *   GET    /v1/templates                    public ones and the project's
 *   POST   /v1/templates                    multipart: name, airlockfile,
 *                                           context (tar), no_cache
 *   GET    /v1/templates/{name}             a template and its versions
 *   DELETE /v1/templates/{name}             409 while a sandbox uses it
 *   GET    /v1/templates/builds/{id}        a build's status
 *   GET    /v1/templates/builds/{id}/logs   the build log as SSE
 * A member key sees public templates and its project's, changes only its
 * project's; builds and their logs are its project's only.
 * The build itself runs in airlock-builder (builder/), started detached;
 * it writes state/builds/<id>/log.jsonl, and its log streamer
 * (builder/logstream.c) serves the logs endpoint's streams via nginx. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "api_templates.h"
#include "base/log.h"
#include "base/multipart.h"
#include "model/build.h"
#include "model/template.h"
#include "proto/agentproto.h"
#include "proto/sse.h"
#include "sandbox/poolbounds.h"
#include "sandbox/template_ops.h"
#include "streams.h"
#include "template/builddir.h"
#include "template/buildlog.h"
#include "template/context.h"

#define AIRLOCKFILE_MAX (1024 * 1024)
#define CONTEXT_MAX (1024ull << 20)
#define BODY_CHUNK 65536
#define LOG_POLL_MS 50
/* How long a log request waits for a queued build's builder. */
#define BUILDER_START_MS 5000

/* Stream the multipart body into fields (context straight to its file). */
static int read_form(al_req *r, al_mp_field *fields, size_t n, al_err *err)
{
	const char *ct = fcgi_req_param(r, "CONTENT_TYPE");
	if (ct == NULL || ct[0] == '\0')
		return al_err_set(err, AL_EINVAL, 0,
				  "send the template as multipart/form-data");
	al_multipart *mp = al_multipart_new_form(ct, fields, n, err);
	if (mp == NULL)
		return -1;
	char *buf = malloc(BODY_CHUNK);
	int rc = buf != NULL ? 0
			     : al_err_set(err, AL_ENOMEM, 0, "out of memory");
	while (rc == 0) {
		int got = FCGX_GetStr(buf, BODY_CHUNK, r->fcgi->in);
		if (got <= 0)
			break;
		rc = al_multipart_feed(mp, buf, (size_t)got, err);
	}
	if (rc == 0)
		rc = al_multipart_finish(mp, err);
	free(buf);
	al_multipart_free(mp);
	return rc;
}

static int parse_bool(const al_mp_field *f, int *out, al_err *err)
{
	*out = 0;
	if (!f->present)
		return 0;
	if (strcmp(f->value, "1") == 0 || strcmp(f->value, "true") == 0)
		*out = 1;
	else if (strcmp(f->value, "0") != 0 && strcmp(f->value, "false") != 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "no_cache must be true or false");
	return 0;
}

void fcgi_api_template_build(al_req *r)
{
	al_err err = {0};
	char id[21], dir[AL_PATH_MAX];
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL ||
	    al_template_ops_build_dir(r->cfg, id, dir, sizeof dir, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	char ctx_path[AL_PATH_MAX + 32];
	snprintf(ctx_path, sizeof ctx_path, "%s/context.tar", dir);
	int ctx_fd = open(ctx_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			  0600);
	if (ctx_fd < 0) {
		al_err_sys(&err, AL_ESYS, errno, "create %s", ctx_path);
		al_template_ops_build_abandon(dir);
		fcgi_http_error(r, &err);
		return;
	}
	al_mp_field fields[] = {
		/* Longer than any valid name, so a bad one gets the name
		 * check's message rather than a size error. */
		{.name = "name", .max = 256, .fd = -1, .required = 1},
		{.name = "airlockfile",
		 .max = AIRLOCKFILE_MAX,
		 .fd = -1,
		 .required = 1},
		{.name = "context", .max = CONTEXT_MAX, .fd = ctx_fd},
		{.name = "no_cache", .max = 8, .fd = -1},
	};
	const size_t nf = sizeof fields / sizeof fields[0];
	int no_cache = 0;
	int rc = read_form(r, fields, nf, &err);
	close(ctx_fd);
	if (rc == 0 && fields[2].present && fields[2].len == 0)
		rc = al_err_set(&err, AL_EINVAL, 0, "context is empty");
	if (rc == 0 && !fields[2].present)
		unlink(ctx_path); /* no context: COPY has nothing to copy */
	if (rc == 0 && strlen(fields[0].value) != fields[0].len)
		rc = al_err_set(&err, AL_EINVAL, 0,
				"name must be 1-63 characters of [a-z0-9-], "
				"not starting with '-', and not 'builds'");
	if (rc == 0)
		rc = parse_bool(&fields[3], &no_cache, &err);
	if (rc < 0)
		al_template_ops_build_abandon(dir);
	else
		rc = al_template_ops_build(r->cfg, db, &r->who, id, dir,
					   fields[0].value, fields[1].value,
					   (size_t)fields[1].len, no_cache,
					   &err);
	if (rc < 0) {
		al_mp_fields_free(fields, nf);
		fcgi_http_error(r, &err);
		return;
	}
	json_object *o = json_object_new_object();
	/* Under the prefix the client reached the API by. */
	size_t pl;
	const char *prefix = fcgi_req_prefix(r, &pl);
	char logs[AL_PATH_MAX];
	snprintf(logs, sizeof logs, "%.*s/v1/templates/builds/%s/logs", (int)pl,
		 prefix, id);
	json_object_object_add(o, "build_id", json_object_new_string(id));
	json_object_object_add(o, "name",
			       json_object_new_string(fields[0].value));
	json_object_object_add(o, "status", json_object_new_string("queued"));
	json_object_object_add(o, "logs", json_object_new_string(logs));
	al_mp_fields_free(fields, nf);
	fcgi_http_json(r, 202, o);
	json_object_put(o);
}

void fcgi_api_templates(al_req *r)
{
	al_err err = {0};
	al_db *db = fcgi_req_db(r, &err);
	const char *project = fcgi_req_query(r, "project");
	json_object *arr = NULL;
	if (db == NULL || (arr = al_template_list(db, fcgi_req_scope(r),
						  project, &err)) == NULL) {
		fcgi_http_error(r, &err);
		return;
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "templates", arr);
	fcgi_http_json(r, 200, o);
	json_object_put(o);
}

void fcgi_api_template_get(al_req *r)
{
	al_err err = {0};
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL) {
		fcgi_http_error(r, &err);
		return;
	}
	al_template_version tv = {0};
	al_template_row row;
	if (!al_id_valid(r->id)) {
		fcgi_http_errorf(r, AL_ENOENT, "no such template");
		return;
	}
	if (al_template_access(db, r->id, &r->who, 0, &err) < 0 ||
	    al_template_row_get(db, r->id, &row, &err) < 0 ||
	    al_template_get_version(db, r->id, 0, &tv, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	json_object *versions = al_template_versions(db, r->id, &err);
	if (versions == NULL) {
		al_template_version_free(&tv);
		fcgi_http_error(r, &err);
		return;
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "name", json_object_new_string(tv.name));
	json_object_object_add(o, "version", json_object_new_int(tv.version));
	json_object_object_add(o, "project",
			       json_object_new_string(row.owner.project));
	json_object_object_add(o, "public",
			       json_object_new_boolean(row.owner.public));
	json_object_object_add(o, "driver", json_object_new_string(row.driver));
	json_object_object_add(o, "warm_pool",
			       al_poolbounds_json(r->cfg, row.pool));
	json_object_object_add(o, "memory_mb",
			       json_object_new_int64(row.memory_mb));
	json_object_object_add(o, "pids", json_object_new_int64(row.pids));
	json_object_object_add(o, "cpu_shares",
			       json_object_new_int64(row.cpu_shares));
	json_object_object_add(o, "env", json_object_get(tv.env));
	json_object_object_add(o, "workdir",
			       json_object_new_string(tv.workdir));
	json_object_object_add(o, "user", json_object_new_string(tv.user));
	json_object_object_add(o, "start", json_object_get(tv.start));
	json_object_object_add(o, "ready", json_object_get(tv.ready));
	json_object_object_add(o, "versions", versions);
	al_template_version_free(&tv);
	fcgi_http_json(r, 200, o);
	json_object_put(o);
}

void fcgi_api_template_delete(al_req *r)
{
	al_err err = {0};
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL) {
		fcgi_http_error(r, &err);
		return;
	}
	if (al_template_ops_delete(r->cfg, db, &r->who, r->id, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	fcgi_http_no_content(r);
}

static json_object *load_build(al_req *r, al_err *err)
{
	al_db *db = fcgi_req_db(r, err);
	if (db == NULL)
		return NULL;
	if (!al_id_valid(r->id)) {
		al_err_set(err, AL_ENOENT, 0, "no such build");
		return NULL;
	}
	return al_build_get(db, r->id, fcgi_req_scope(r), err);
}

void fcgi_api_build_get(al_req *r)
{
	al_err err = {0};
	json_object *b = load_build(r, &err);
	if (b == NULL) {
		fcgi_http_error(r, &err);
		return;
	}
	fcgi_http_json(r, 200, b);
	json_object_put(b);
}

static int build_status_is(json_object *b, const char *status)
{
	json_object *s = NULL;
	return json_object_object_get_ex(b, "status", &s) &&
	       strcmp(json_object_get_string(s), status) == 0;
}

static int build_finished(json_object *b)
{
	return build_status_is(b, "succeeded") || build_status_is(b, "failed");
}

/* The log as it is stored, as one answer: what a client gets once the
 * build is over (or its builder is gone). It ends with the build's
 * status: the log's own status line, else the row's (a builder that
 * died wrote none), else an error event while the row has not caught
 * up with a dead builder yet. Bounded by what the builder may log. */
static void serve_stored_log(al_req *r, const char *path, json_object *row)
{
	al_err err = {0};
	al_buf out;
	al_buf_init(&out, 0);
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int done = 0;
	while (!done && f != NULL && (n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] != '\n')
			break; /* a line still being written */
		line[n - 1] = '\0';
		int rc = al_buildlog_event(&out, line, &err);
		if (rc < 0)
			break;
		done = rc == 1;
	}
	free(line);
	if (f != NULL)
		fclose(f);
	if (!done && build_finished(row)) {
		json_object_object_add(row, "event",
				       json_object_new_string("status"));
		al_sse_event(&out, "status", row, &err);
	} else if (!done) {
		al_sse_error(&out, AL_EUNAVAIL,
			     "the builder exited before finishing the build",
			     &err);
	}
	if (fcgi_http_head(r, 200, "text/event-stream",
			   "Cache-Control: no-cache\r\n"
			   "X-Accel-Buffering: no\r\n") == 0 &&
	    fcgi_http_write(r, out.data + out.off, al_buf_pending(&out)) == 0)
		fcgi_http_flush(r);
	al_buf_free(&out);
}

/* A build that is not over: its stream is the builder's (nginx carries
 * it, builder/logstream.c); this answer hands it over, with one of the
 * project's stream leases (AL_EQUOTA when none is left). 1 when handed
 * over, 0 when the builder is not there (still starting: waited for;
 * gone), -1 (err). The streamer serves every stream of a build that is
 * not over, and a few seconds past its end. */
static int hand_over_stream(al_req *r, const char *dir, json_object **row,
			    al_err *err)
{
	char name[AL_BUILDLOG_NAME_MAX], token[AL_STREAM_TOKEN_LEN + 1];
	char lease[AL_STREAM_LEASE_LEN + 1];
	if (al_buildlog_stream_name(r->id, name, err) < 0)
		return -1;
	int64_t deadline = al_now_ms() + BUILDER_START_MS;
	while (!al_buildlog_streamer_up(r->cfg, r->id)) {
		/* Only a queued build's builder may still come. */
		if (!build_status_is(*row, "queued") || al_now_ms() >= deadline)
			return 0;
		poll(NULL, 0, LOG_POLL_MS);
		json_object *again = load_build(r, err);
		if (again == NULL)
			return -1;
		json_object_put(*row);
		*row = again;
	}
	if (fcgi_streams_acquire(r, name, lease, err) < 0)
		return -1;
	/* Recorded before it is handed over: a lease fcgi could not
	 * record never opens a stream (its token goes unused). */
	int ok = al_buildlog_token_issue(dir, r->who.key_id, lease, token,
					 err) == 0;
	if (fcgi_streams_done(r, ok, err) < 0 && ok) {
		al_buildlog_lease_end(dir, lease);
		ok = 0;
	}
	if (!ok)
		return -1;
	char hdr[160 + AL_STREAM_TOKEN_LEN];
	snprintf(hdr, sizeof hdr,
		 "X-Accel-Redirect: /_airlock/stream/%s/%s\r\n", name, token);
	fcgi_http_head(r, 200, "text/event-stream", hdr);
	explicit_bzero(token, sizeof token);
	explicit_bzero(hdr, sizeof hdr);
	return 1;
}

/* No fcgi worker is held for a stream: a live build's is the builder's,
 * a finished one's is written at once. A key revoked while its stream
 * is open ends it: the streamer watches for the key's mark
 * (al_buildlog_key_revoke). */
void fcgi_api_build_logs(al_req *r)
{
	al_err err = {0};
	json_object *row = load_build(r, &err);
	if (row == NULL) {
		fcgi_http_error(r, &err);
		return;
	}
	char dir[AL_PATH_MAX], path[AL_PATH_MAX + 16];
	if (al_builddir_path(r->cfg, r->id, dir, sizeof dir, &err) < 0) {
		json_object_put(row);
		fcgi_http_error(r, &err);
		return;
	}
	snprintf(path, sizeof path, "%s/log.jsonl", dir);
	int rc = build_finished(row) ? 0 : hand_over_stream(r, dir, &row, &err);
	if (rc < 0) {
		fcgi_http_error(r, &err);
	} else if (rc == 0) {
		/* The row again: the builder may have finished meanwhile. */
		json_object *now = load_build(r, &err);
		if (now != NULL) {
			json_object_put(row);
			row = now;
		}
		serve_stored_log(r, path, row);
	}
	json_object_put(row);
}

/* PUT /v1/templates/{name}/warm_pool (admin keys): the template's own
 * standby bounds; the controller follows them within 5 s. Standbys cost
 * host memory charged to no project, hence admin only. */
void fcgi_api_template_pool(al_req *r)
{
	al_err err;
	char *body = NULL;
	size_t len = 0;
	al_json_setting u[AL_POOL_NBOUNDS];
	if (fcgi_req_body(r, AL_JSON_BODY_MAX, &body, &len, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	int rc = al_poolbounds_parse(body, len, u, &err);
	free(body);
	al_db *db = rc == 0 ? fcgi_req_db(r, &err) : NULL;
	al_template_row row;
	if (db == NULL || al_template_pool_set(db, r->id, u, &err) < 0 ||
	    al_template_row_get(db, r->id, &row, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	al_info("template %s: warm pool bounds changed", r->id);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "name", json_object_new_string(r->id));
	json_object_object_add(o, "warm_pool",
			       al_poolbounds_json(r->cfg, row.pool));
	fcgi_http_json(r, 200, o);
	json_object_put(o);
}
