/* POST /v1/sandboxes/{id}/exec: run a command through the shim, answer
 * with one JSON document or stream it as server-sent events. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentproto.h"
#include "http.h"
#include "json.h"
#include "log.h"
#include "project.h"
#include "upstream.h"

#define KEEPALIVE_MS 15000
#define EXEC_GRACE_MS 15000	     /* past the agent's own timeout */
#define COLLECT_MAX (16u << 20)	     /* per stream in JSON mode */
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
				       json_object_new_string_len(d, (int)c->len));
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

typedef struct exec_state {
	al_req *r;
	int sse;
	collect out[2]; /* stdout, stderr */
	uint8_t carry[2][4];
	size_t carry_len[2];
	int64_t last_write_ms;
	int client_gone;
} exec_state;

static int sse_event(exec_state *st, const char *event, json_object *data)
{
	al_req *r = st->r;
	if (!r->headers_sent &&
	    al_http_head(r, 200, "text/event-stream",
			 "Cache-Control: no-cache\r\n"
			 "X-Accel-Buffering: no\r\n") < 0)
		goto gone;
	const char *s = al_json_compact(data);
	if (al_http_write(r, "event: ", 7) < 0 ||
	    al_http_write(r, event, strlen(event)) < 0 ||
	    al_http_write(r, "\ndata: ", 7) < 0 ||
	    al_http_write(r, s, strlen(s)) < 0 ||
	    al_http_write(r, "\n\n", 2) < 0 || al_http_flush(r) < 0)
		goto gone;
	st->last_write_ms = al_now_ms();
	return 0;
gone:
	st->client_gone = 1;
	return -1;
}

static int sse_bytes(exec_state *st, const char *event, const uint8_t *p,
		     size_t n, int as_b64)
{
	json_object *o = json_object_new_object();
	if (as_b64) {
		char *b = al_base64_encode(p, n);
		json_object_object_add(o, "data_b64",
				       json_object_new_string(b != NULL ? b : ""));
		free(b);
	} else {
		json_object_object_add(o, "data",
				       json_object_new_string_len(
					       (const char *)p, (int)n));
	}
	int rc = sse_event(st, event, o);
	json_object_put(o);
	return rc;
}

/* Stream one output chunk. A multi-byte character split across chunks is
 * held back until its end arrives, so text stays text. */
static int sse_output(exec_state *st, int which, const uint8_t *p, size_t n)
{
	static const char *const names[2] = {"stdout", "stderr"};
	size_t cl = st->carry_len[which];
	uint8_t *buf = malloc(n + cl);
	if (buf == NULL)
		return sse_bytes(st, names[which], p, n, 1);
	memcpy(buf, st->carry[which], cl);
	memcpy(buf + cl, p, n);
	size_t total = n + cl;
	st->carry_len[which] = 0;

	int bad = 0, rc = 0;
	size_t ok = al_utf8_complete_prefix(buf, total, &bad);
	if (bad) {
		/* Text up to the first invalid byte, the rest as base64. */
		if (ok > 0)
			rc = sse_bytes(st, names[which], buf, ok, 0);
		if (rc == 0)
			rc = sse_bytes(st, names[which], buf + ok, total - ok,
				       1);
	} else {
		if (ok > 0)
			rc = sse_bytes(st, names[which], buf, ok, 0);
		st->carry_len[which] = total - ok;
		memcpy(st->carry[which], buf + ok, total - ok);
	}
	free(buf);
	return rc;
}

/* Copy only the fields we document from the agent's EXIT payload. */
static json_object *exit_object(json_object *in)
{
	json_object *o = json_object_new_object();
	json_object *v = NULL;
	if (json_object_object_get_ex(in, "exit_code", &v) &&
	    json_object_is_type(v, json_type_int)) {
		int64_t c = json_object_get_int64(v);
		if (c >= 0 && c <= 255)
			json_object_object_add(o, "exit_code",
					       json_object_new_int64(c));
	}
	if (json_object_object_get_ex(in, "signal", &v) &&
	    json_object_is_type(v, json_type_string)) {
		const char *s = json_object_get_string(v);
		int ok = strlen(s) > 0 && strlen(s) <= 16;
		for (const char *q = s; ok && *q != '\0'; q++)
			if (!((*q >= 'A' && *q <= 'Z') ||
			      (*q >= '0' && *q <= '9')))
				ok = 0;
		if (ok)
			json_object_object_add(o, "signal",
					       json_object_new_string(s));
	}
	if (json_object_object_get_ex(in, "timed_out", &v) &&
	    json_object_is_type(v, json_type_boolean) &&
	    json_object_get_boolean(v))
		json_object_object_add(o, "timed_out",
				       json_object_new_boolean(1));
	return o;
}

/* The exec on r's sandbox, its stdin sent: the shim connection's fd. */
static int open_exec(al_req *r, const al_exec_req *req, json_object *env,
		     al_err *err)
{
	al_exec_msg m = {
		.cmd = req->cmd,
		.env = env,
		.cwd = req->cwd[0] != '\0' ? req->cwd : NULL,
		.user = req->user,
		.timeout_ms = (int64_t)req->timeout_s * 1000,
		.stdin_open = req->stdin_data != NULL,
	};
	char *s = al_exec_pack(&m, err);
	if (s == NULL)
		return -1;
	int fd = al_upstream_open(r, AL_F_EXEC, s, 0, err);
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
	al_upstream_relay_error(err);
	close(fd);
	return -1;
}

void al_api_exec(al_req *r)
{
	al_err err;
	char *body = NULL;
	size_t len = 0;
	al_exec_req req;
	json_object *env = NULL, *result = NULL;
	al_frame_reader rd;
	exec_state st;
	int fd = -1, slot = -1;

	memset(&st, 0, sizeof st);
	st.r = r;
	st.sse = al_req_wants_sse(r);
	al_frame_reader_init(&rd);

	if (al_req_body(r, AL_JSON_BODY_MAX, &body, &len, &err) < 0) {
		al_http_error(r, &err);
		goto out;
	}
	int prc = al_json_exec_req_parse(body, len, &req, &err);
	free(body);
	if (prc < 0) {
		al_http_error(r, &err);
		goto out;
	}
	if (al_api_running_sandbox(r, NULL) < 0)
		goto out_req;
	/* An event stream holds one of the key's project's stream slots
	 * for its life, on this worker's connection. */
	al_db *db = al_req_db(r, &err);
	if (db == NULL || (st.sse && al_project_stream_acquire(
					     db, r->cfg, r->who.project,
					     &slot, &err) < 0)) {
		al_http_error(r, &err);
		goto out_req;
	}
	/* The shim lays this over the sandbox's own env. */
	env = req.env != NULL ? json_object_get(req.env)
			      : json_object_new_object();
	int64_t t0 = al_now_ms();
	int64_t deadline = t0 + (int64_t)req.timeout_s * 1000 + EXEC_GRACE_MS;
	fd = open_exec(r, &req, env, &err);
	if (fd < 0) {
		al_http_error(r, &err);
		goto out_req;
	}
	st.last_write_ms = al_now_ms();
	int64_t key_check = st.last_write_ms + KEY_CHECK_MS;

	for (;;) {
		al_frame f;
		int64_t until = deadline;
		if (st.sse && r->headers_sent &&
		    st.last_write_ms + KEEPALIVE_MS < until)
			until = st.last_write_ms + KEEPALIVE_MS;
		if (key_check < until)
			until = key_check;
		int k = al_upstream_next(r, fd, &rd, &f, until, &err);
		if (k == -2) {
			st.client_gone = 1;
			break;
		}
		if (k < 0) {
			al_upstream_relay_error(&err);
			goto stream_error;
		}
		if (k == 0 && al_now_ms() >= key_check) {
			al_err kerr;
			int active = al_auth_key_active(db, r->who.key_id,
							&kerr);
			if (active == 0) {
				err = kerr;
				goto stream_error;
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
		if (k == 0) {
			if (al_now_ms() >= deadline) {
				al_err_set(&err, AL_ETIMEDOUT, 0,
					   "command did not finish in time");
				goto stream_error;
			}
			if (al_http_write(r, ": keepalive\n\n", 13) < 0 ||
			    al_http_flush(r) < 0) {
				st.client_gone = 1;
				break;
			}
			st.last_write_ms = al_now_ms();
			continue;
		}
		if (f.id != AL_REQ_ID_CLIENT) {
			al_frame_free(&f);
			al_err_set(&err, AL_EPROTO,
				   0, "sandbox answered for another request");
			goto stream_error;
		}
		int done = 0;
		switch (f.type) {
		case AL_F_STARTED: {
			json_object *o = al_upstream_json(&f, &err);
			if (o == NULL) {
				al_frame_free(&f);
				goto stream_error;
			}
			json_object *pid = NULL;
			json_object *ev = json_object_new_object();
			if (json_object_object_get_ex(o, "pid", &pid) &&
			    json_object_is_type(pid, json_type_int))
				json_object_object_add(
					ev, "pid",
					json_object_new_int64(
						json_object_get_int64(pid)));
			json_object_put(o);
			if (st.sse)
				sse_event(&st, "start", ev);
			json_object_put(ev);
			break;
		}
		case AL_F_STDOUT:
		case AL_F_STDERR: {
			int which = f.type == AL_F_STDOUT ? 0 : 1;
			if (st.sse)
				sse_output(&st, which, f.payload, f.len);
			else
				collect_add(&st.out[which], f.payload, f.len);
			break;
		}
		case AL_F_EXIT: {
			json_object *o = al_upstream_json(&f, &err);
			if (o == NULL) {
				al_frame_free(&f);
				goto stream_error;
			}
			result = exit_object(o);
			json_object_put(o);
			done = 1;
			break;
		}
		case AL_F_ERROR:
			al_upstream_error(&f, &err);
			al_frame_free(&f);
			goto stream_error;
		default:
			al_err_set(&err, AL_EPROTO, 0,
				   "unexpected %s frame from sandbox",
				   al_frame_type_name(f.type));
			al_frame_free(&f);
			goto stream_error;
		}
		al_frame_free(&f);
		if (st.client_gone || done)
			break;
	}

	if (st.client_gone) {
		al_info("sandbox %s: exec client went away, stopping command",
			r->id);
		goto out_req;
	}
	int64_t dur = al_now_ms() - t0;
	json_object_object_add(result, "duration_ms",
			       json_object_new_int64(dur));
	if (st.sse) {
		for (int w = 0; w < 2; w++)
			if (st.carry_len[w] > 0)
				sse_bytes(&st, w == 0 ? "stdout" : "stderr",
					  st.carry[w], st.carry_len[w], 1);
		sse_event(&st, "exit", result);
	} else {
		json_object *v = NULL;
		if (!json_object_object_get_ex(result, "exit_code", &v))
			json_object_object_add(result, "exit_code", NULL);
		add_output(result, "stdout", &st.out[0]);
		add_output(result, "stderr", &st.out[1]);
		json_object_object_add(
			result, "truncated",
			json_object_new_boolean(st.out[0].truncated ||
						st.out[1].truncated));
		al_http_json(r, 200, result);
	}
	goto out_req;

stream_error:
	if (st.sse && r->headers_sent) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "code", json_object_new_string(
							  al_code_name(err.code)));
		json_object_object_add(o, "message",
				       json_object_new_string(err.msg));
		sse_event(&st, "error", o);
		json_object_put(o);
		al_warn("sandbox %s: exec stream failed: %s", r->id, err.msg);
	} else {
		al_http_error(r, &err);
	}
out_req:
	al_json_exec_req_free(&req);
out:
	/* Closing the connection tells the shim to kill a command that is
	 * still running. */
	if (fd >= 0)
		close(fd);
	if (slot >= 0)
		al_project_stream_release(*r->dbp, r->who.project, slot);
	al_frame_reader_free(&rd);
	json_object_put(result);
	json_object_put(env);
	free(st.out[0].data);
	free(st.out[1].data);
}
