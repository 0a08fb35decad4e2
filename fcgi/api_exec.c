/* POST /v1/sandboxes/{id}/exec: run a command through the shim, answer
 * with one JSON document, or start it as an event stream that nginx
 * carries from the shim (X-Accel-Redirect to the internal location
 * /_airlock/stream/<sandbox>/<token>, nginx/airlock.conf): no worker is
 * held for a stream's life. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "base/log.h"
#include "http.h"
#include "proto/agentproto.h"
#include "sandbox/sandbox_req.h"
#include "sandbox/shimctl.h"
#include "streams.h"
#include "upstream.h"

#define EXEC_GRACE_MS 15000	/* past the agent's own timeout */
#define STREAM_START_MS 30000	/* the process runs, or the start failed */
#define COLLECT_MAX (16u << 20) /* per stream in JSON mode */
#define STDIN_CHUNK (64u << 10)
#define KEY_CHECK_MS 2000 /* a revoked key's running execs end this soon */

/* Output collected for the JSON answer. */
typedef struct collect {
	char *data;
	size_t len, cap;
	int truncated;
} collect;

static void collect_add(collect *c, const uint8_t *p, size_t n)
{
	if (c->len + n > COLLECT_MAX) {
		c->truncated = 1;
		n = COLLECT_MAX - c->len;
	}
	if (n == 0)
		return;
	if (c->len + n > c->cap) {
		size_t ncap = c->cap == 0 ? 4096 : c->cap;
		while (ncap < c->len + n)
			ncap *= 2;
		char *nd = realloc(c->data, ncap);
		if (nd == NULL) {
			c->truncated = 1;
			return;
		}
		c->data = nd;
		c->cap = ncap;
	}
	memcpy(c->data + c->len, p, n);
	c->len += n;
}

/* Valid UTF-8 copy of p with U+FFFD for every invalid byte. */
static json_object *lossy_string(const char *p, size_t n)
{
	size_t cap = n + 16, o = 0;
	char *out = malloc(cap);
	if (out == NULL)
		return json_object_new_string("");
	size_t i = 0;
	while (i < n) {
		int bad = 0;
		size_t ok = al_utf8_complete_prefix(p + i, n - i, &bad);
		if (o + ok + 3 > cap) {
			cap = (o + ok + 3) * 2;
			char *nb = realloc(out, cap);
			if (nb == NULL)
				break;
			out = nb;
		}
		memcpy(out + o, p + i, ok);
		o += ok;
		i += ok;
		if (i < n) {
			/* An invalid byte or a truncated final sequence. */
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	json_object *s = json_object_new_string_len(out, (int)o);
	free(out);
	return s;
}

static void add_output(json_object *o, const char *name, const collect *c)
{
	const char *d = c->data != NULL ? c->data : "";
	if (al_utf8_valid(d, c->len)) {
		json_object_object_add(o, name,
				       json_object_new_string_len(d,
								  (int)c->len));
		return;
	}
	json_object_object_add(o, name, lossy_string(d, c->len));
	char key[32];
	snprintf(key, sizeof key, "%s_b64", name);
	char *b = al_base64_encode(d, c->len);
	if (b != NULL)
		json_object_object_add(o, key, json_object_new_string(b));
	free(b);
}

/* The EXIT fields we document, for the JSON answer. */
static json_object *exit_object(const al_exit_msg *m)
{
	json_object *o = json_object_new_object();
	if (m->signal[0] != '\0') {
		json_object_object_add(o, "signal",
				       json_object_new_string(m->signal));
		if (m->timed_out)
			json_object_object_add(o, "timed_out",
					       json_object_new_boolean(1));
	} else {
		json_object_object_add(o, "exit_code",
				       json_object_new_int(m->exit_code));
	}
	return o;
}

static al_exec_msg exec_msg(const al_exec_req *req, json_object *env)
{
	return (al_exec_msg){
		.cmd = req->cmd,
		.env = env,
		.cwd = req->cwd[0] != '\0' ? req->cwd : NULL,
		.user = req->user,
		.timeout_ms = (int64_t)req->timeout_s * 1000,
		.stdin_open = req->stdin_data != NULL,
		.kill_on_exit = req->kill_on_exit,
	};
}

/* Request payload s (EXEC or STREAM_EXEC) sent to r's sandbox and the
 * request's stdin after it: the shim connection's fd. */
static int open_exec(al_req *r, uint16_t type, char *s, const al_exec_req *req,
		     al_err *err)
{
	if (s == NULL)
		return -1;
	int fd = fcgi_upstream_open(r, type, s, 0, err);
	free(s);
	if (fd < 0 || req->stdin_data == NULL)
		return fd;
	for (size_t off = 0; off < req->stdin_len; off += STDIN_CHUNK) {
		size_t n = req->stdin_len - off;
		if (n > STDIN_CHUNK)
			n = STDIN_CHUNK;
		if (al_frame_send(fd, AL_F_STDIN, AL_REQ_ID_CLIENT,
				  req->stdin_data + off, n, err) < 0)
			goto fail;
	}
	if (al_frame_send(fd, AL_F_STDIN, AL_REQ_ID_CLIENT, "", 0, err) == 0)
		return fd;
fail:
	al_shimctl_relay_error(err);
	close(fd);
	return -1;
}

/* The stream's start: a slot of the project's stream quota, the process
 * started by its shim, and the stream handed to nginx. The shim kills
 * the process if nginx does not come for it within seconds, or when
 * nginx's client goes away (unless req->background). */
static void exec_stream(al_req *r, const al_exec_req *req, json_object *env)
{
	al_err err = {0};
	char lease[AL_STREAM_LEASE_LEN + 1];
	char token[AL_STREAM_TOKEN_LEN + 1];
	al_frame_reader rd;
	al_frame_reader_init(&rd);
	if (fcgi_streams_acquire(r, r->id, lease, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	al_exec_msg m = exec_msg(req, env);
	int fd = open_exec(r, AL_F_STREAM_EXEC,
			   al_stream_exec_pack(&m, lease, req->background,
					       &err),
			   req, &err);
	int ok = 0;
	int64_t deadline = al_now_ms() + STREAM_START_MS;
	while (fd >= 0) {
		al_frame f;
		int k = fcgi_upstream_next(r, fd, &rd, &f, deadline, &err);
		if (k == AL_UPSTREAM_IDLE)
			al_err_set(&err, AL_ETIMEDOUT, 0,
				   "the command did not start in time");
		if (k == AL_UPSTREAM_GONE)
			al_err_set(&err, AL_EUNAVAIL, 0, "client went away");
		if (k != AL_UPSTREAM_FRAME)
			break;
		int answer = f.type == AL_F_RESULT;
		if (answer &&
		    al_stream_token_unpack(f.payload, f.len, token, &err) == 0)
			ok = 1;
		else if (answer)
			err.code = AL_EPROTO;
		al_frame_free(&f);
		if (answer)
			break;
	}
	al_frame_reader_free(&rd);
	/* Closing the connection leaves the process to its stream. */
	if (fd >= 0)
		close(fd);
	/* A stream whose lease is not recorded is never handed to nginx:
	 * the shim kills its process when its token expires. */
	if (fcgi_streams_done(r, ok, &err) < 0)
		ok = 0;
	if (!ok) {
		fcgi_http_error(r, &err);
		return;
	}
	char hdr[160 + AL_STREAM_TOKEN_LEN];
	snprintf(hdr, sizeof hdr,
		 "X-Accel-Redirect: /_airlock/stream/%s/%s\r\n", r->id, token);
	fcgi_http_head(r, 200, "text/event-stream", hdr);
	explicit_bzero(token, sizeof token);
	explicit_bzero(hdr, sizeof hdr);
}

void fcgi_api_exec(al_req *r)
{
	al_err err;
	char *body = NULL;
	size_t len = 0;
	al_exec_req req;
	json_object *env = NULL, *result = NULL;
	al_frame_reader rd;
	collect out[2];
	int fd = -1;

	memset(out, 0, sizeof out);
	al_frame_reader_init(&rd);

	if (fcgi_req_body(r, AL_JSON_BODY_MAX, &body, &len, &err) < 0) {
		fcgi_http_error(r, &err);
		goto out;
	}
	int prc = al_exec_req_parse(body, len, &req, &err);
	free(body);
	if (prc < 0) {
		fcgi_http_error(r, &err);
		goto out;
	}
	int sse = fcgi_req_wants_sse(r);
	if (req.background && !sse) {
		fcgi_http_errorf(r, AL_EINVAL,
				 "'background' needs an event stream "
				 "(Accept: text/event-stream)");
		goto out_req;
	}
	if (fcgi_req_sandbox_running(r) < 0)
		goto out_req;
	/* The shim lays this over the sandbox's own env. */
	env = req.env != NULL ? json_object_get(req.env)
			      : json_object_new_object();
	if (sse) {
		exec_stream(r, &req, env);
		goto out_req;
	}
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL) {
		fcgi_http_error(r, &err);
		goto out_req;
	}
	int64_t t0 = al_now_ms();
	int64_t deadline = t0 + (int64_t)req.timeout_s * 1000 + EXEC_GRACE_MS;
	al_exec_msg m = exec_msg(&req, env);
	fd = open_exec(r, AL_F_EXEC, al_exec_pack(&m, &err), &req, &err);
	if (fd < 0) {
		fcgi_http_error(r, &err);
		goto out_req;
	}
	int64_t key_check = al_now_ms() + KEY_CHECK_MS;

	for (;;) {
		al_frame f;
		int64_t until = key_check < deadline ? key_check : deadline;
		int k = fcgi_upstream_next(r, fd, &rd, &f, until, &err);
		if (k == AL_UPSTREAM_GONE) {
			al_info("sandbox %s: exec client went away, stopping "
				"command",
				r->id);
			goto out_req;
		}
		if (k < 0)
			goto fail;
		if (k == AL_UPSTREAM_IDLE && al_now_ms() >= key_check) {
			al_err kerr;
			int active = al_auth_key_active(db, r->who.key_id,
							&kerr);
			if (active == 0) {
				err = kerr;
				goto fail;
			}
			/* A database that cannot answer cannot have
			 * recorded a revocation either: ask again later. */
			if (active < 0)
				al_warn("sandbox %s: checking the exec's key: "
					"%s",
					r->id, kerr.msg);
			key_check = al_now_ms() + KEY_CHECK_MS;
			continue;
		}
		if (k == AL_UPSTREAM_IDLE) {
			al_err_set(&err, AL_ETIMEDOUT, 0,
				   "command did not finish in time");
			goto fail;
		}
		switch (f.type) {
		case AL_F_STARTED:
			break;
		case AL_F_STDOUT:
		case AL_F_STDERR:
			collect_add(&out[f.type == AL_F_STDERR], f.payload,
				    f.len);
			break;
		case AL_F_EXIT: {
			al_exit_msg em;
			if (al_exit_unpack(f.payload, f.len, &em, &err) < 0) {
				al_frame_free(&f);
				al_err_set(&err, AL_EPROTO, 0,
					   "sandbox sent a malformed EXIT");
				goto fail;
			}
			result = exit_object(&em);
			break;
		}
		default:
			al_err_set(&err, AL_EPROTO, 0,
				   "unexpected %s frame from sandbox",
				   al_frame_type_name(f.type));
			al_frame_free(&f);
			goto fail;
		}
		al_frame_free(&f);
		if (result != NULL)
			break;
	}

	json_object_object_add(result, "duration_ms",
			       json_object_new_int64(al_now_ms() - t0));
	json_object *v = NULL;
	if (!json_object_object_get_ex(result, "exit_code", &v))
		json_object_object_add(result, "exit_code", NULL);
	add_output(result, "stdout", &out[0]);
	add_output(result, "stderr", &out[1]);
	json_object_object_add(result, "truncated",
			       json_object_new_boolean(out[0].truncated ||
						       out[1].truncated));
	fcgi_http_json(r, 200, result);
	goto out_req;

fail:
	fcgi_http_error(r, &err);
out_req:
	al_exec_req_free(&req);
out:
	/* Closing the connection tells the shim to kill a command that is
	 * still running. */
	if (fd >= 0)
		close(fd);
	al_frame_reader_free(&rd);
	json_object_put(result);
	json_object_put(env);
	free(out[0].data);
	free(out[1].data);
}
