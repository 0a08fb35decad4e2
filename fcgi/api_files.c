/* PUT/GET /v1/sandboxes/{id}/files?path=/abs[&list=1]: file contents and
 * directory listings, relayed to the agent through the shim. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "base/log.h"
#include "base/path.h"
#include "http.h"
#include "proto/agentproto.h"
#include "sandbox/shimctl.h"
#include "upstream.h"

#define FILE_CHUNK (256u << 10)
#define FILE_PUT_MAX (1ull << 30) /* bytes per upload */
#define FILE_IDLE_MS 60000	  /* silence from the sandbox */

/* The normalised ?path= of r into out; answers 422 itself. */
static int query_path(al_req *r, char *out, size_t outlen)
{
	al_err err;
	const char *p = fcgi_req_query(r, "path");
	if (p == NULL) {
		fcgi_http_errorf(r, AL_EPATH,
				 "query parameter 'path' is "
				 "required");
		return -1;
	}
	if (al_path_normalize(p, out, outlen, &err) < 0) {
		fcgi_http_error(r, &err);
		return -1;
	}
	return 0;
}

/* The next frame of the file request on fd: 1 with *f filled (never an
 * ERROR: that becomes err), 0 when the HTTP client went away, -1 with err
 * ready for fcgi_http_error (stalled says what a timeout means). */
static int next_reply(al_req *r, int fd, al_frame_reader *rd, al_frame *f,
		      const char *stalled, al_err *err)
{
	int k = fcgi_upstream_next(r, fd, rd, f, al_now_ms() + FILE_IDLE_MS,
				   err);
	if (k == AL_UPSTREAM_GONE)
		return 0;
	if (k == AL_UPSTREAM_IDLE)
		return al_err_set(err, AL_ETIMEDOUT, 0, "%s", stalled);
	return k;
}

/* Content-Length of the upload, or UINT64_MAX when there is none: nginx
 * streams a body with a length as it arrives, but buffers a chunked one
 * whole before it passes it on without a length, so that one is complete
 * at its EOF. */
static int body_length(al_req *r, uint64_t *len, al_err *err)
{
	const char *cl = fcgi_req_param(r, "CONTENT_LENGTH");
	*len = UINT64_MAX;
	if (cl == NULL || cl[0] == '\0')
		return 0;
	char *end = NULL;
	errno = 0;
	unsigned long long n = strtoull(cl, &end, 10);
	if (errno != 0 || *end != '\0' || cl[0] < '0' || cl[0] > '9')
		return al_err_set(err, AL_EINVAL, 0, "invalid Content-Length");
	if (n > FILE_PUT_MAX)
		return al_err_set(err, AL_ETOOBIG, 0,
				  "file is larger than %llu bytes",
				  (unsigned long long)FILE_PUT_MAX);
	*len = n;
	return 0;
}

/* The request frame of type for path on a new connection to the shim:
 * the fd, or -1 with err ready for fcgi_http_error. */
static int open_request(al_req *r, uint16_t type, const char *path, int mode,
			al_err *err)
{
	char *s = al_file_req_pack(path, mode, err);
	if (s == NULL)
		return -1;
	int fd = fcgi_upstream_open(r, type, s, al_now_ms() + FILE_IDLE_MS,
				    err);
	free(s);
	return fd;
}

/* Whether the sandbox spoke before FILE_END, which only an ERROR may:
 * 0 if not, -1 (err) if it did, the channel failed or the client left. */
static int early_reply(al_req *r, int fd, al_frame_reader *rd, al_err *err)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (al_buf_pending(&rd->in) == 0 && poll(&p, 1, 0) <= 0)
		return 0;
	al_frame f;
	int k = next_reply(r, fd, rd, &f, "sandbox stopped answering", err);
	if (k == 0)
		return al_err_set(err, AL_EUNAVAIL, 0, "the client went away");
	if (k < 0)
		return -1;
	al_err_set(err, AL_EPROTO, 0, "unexpected %s frame from sandbox",
		   al_frame_type_name(f.type));
	al_frame_free(&f);
	return -1;
}

/* The body goes to the sandbox as it arrives, one chunk at a time: a
 * slow sandbox stalls the sends below and with them the reads from
 * nginx, which then stops reading from the client. Only a body that
 * arrived whole is followed by FILE_END; anything else closes the
 * connection without it, and the shim aborts the write, which leaves
 * no file. */
void fcgi_api_files_put(al_req *r)
{
	char path[AL_API_PATH_MAX + 2];
	al_err err;
	al_frame_reader rd;
	int fd = -1;
	char *buf = NULL;
	uint64_t total = 0, want = 0;

	al_frame_reader_init(&rd);
	if (query_path(r, path, sizeof path) < 0)
		goto out;
	if (body_length(r, &want, &err) < 0)
		goto fail;
	if (fcgi_req_sandbox_running(r) < 0)
		goto out;
	buf = malloc(FILE_CHUNK);
	if (buf == NULL) {
		al_err_set(&err, AL_ENOMEM, 0, "out of memory");
		goto fail;
	}
	fd = open_request(r, AL_F_FILE_WRITE, path, AL_FILE_MODE_DEFAULT, &err);
	if (fd < 0)
		goto fail;
	while (total < want) {
		uint64_t left = want - total;
		int n = FCGX_GetStr(buf,
				    left < FILE_CHUNK ? (int)left
						      : (int)FILE_CHUNK,
				    r->fcgi->in);
		if (n <= 0 && want == UINT64_MAX &&
		    FCGX_GetError(r->fcgi->in) == 0)
			break;
		if (n <= 0) {
			al_err_set(&err, AL_EINVAL, 0,
				   "upload ended after %llu bytes of %s",
				   (unsigned long long)total,
				   want == UINT64_MAX ? "the body"
						      : "its Content-Length");
			goto fail;
		}
		total += (uint64_t)n;
		if (total > FILE_PUT_MAX) {
			al_err_set(&err, AL_ETOOBIG, 0,
				   "file is larger than %llu bytes",
				   (unsigned long long)FILE_PUT_MAX);
			goto fail;
		}
		if (al_frame_send_until(fd, AL_F_FILE_DATA, AL_REQ_ID_CLIENT,
					buf, (size_t)n,
					al_now_ms() + FILE_IDLE_MS, &err) < 0)
			goto fail_relay;
		if (early_reply(r, fd, &rd, &err) < 0)
			goto fail;
	}
	if (al_frame_send_until(fd, AL_F_FILE_END, AL_REQ_ID_CLIENT, "", 0,
				al_now_ms() + FILE_IDLE_MS, &err) < 0)
		goto fail_relay;

	{
		al_frame f;
		int k = next_reply(r, fd, &rd, &f,
				   "sandbox did not confirm the write", &err);
		if (k == 0)
			goto out;
		if (k < 0)
			goto fail;
		if (f.type != AL_F_RESULT) {
			al_err_set(&err, AL_EPROTO, 0,
				   "unexpected %s frame from sandbox",
				   al_frame_type_name(f.type));
			al_frame_free(&f);
			goto fail;
		}
		al_frame_free(&f);
	}
	json_object *res = json_object_new_object();
	json_object_object_add(res, "path", json_object_new_string(path));
	json_object_object_add(res, "bytes",
			       json_object_new_int64((int64_t)total));
	fcgi_http_json(r, 201, res);
	json_object_put(res);
	goto out;

fail_relay:
	al_shimctl_relay_error(&err);
fail:
	fcgi_http_error(r, &err);
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	al_frame_reader_free(&rd);
}

/* Keep only the documented, well-typed fields of each entry. */
static json_object *clean_entries(json_object *result, al_err *err)
{
	json_object *in = NULL;
	if (!json_object_object_get_ex(result, "entries", &in) ||
	    !json_object_is_type(in, json_type_array)) {
		al_err_set(err, AL_EPROTO, 0,
			   "sandbox sent a malformed listing");
		return NULL;
	}
	static const char *const types[] = {"file", "dir", "symlink", "other"};
	json_object *out = json_object_new_array();
	size_t n = json_object_array_length(in);
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(in, i), *v = NULL;
		if (e == NULL || !json_object_is_type(e, json_type_object))
			continue;
		if (!json_object_object_get_ex(e, "name", &v) ||
		    !json_object_is_type(v, json_type_string))
			continue;
		const char *name = json_object_get_string(v);
		size_t nl = (size_t)json_object_get_string_len(v);
		if (nl == 0 || nl > 255 || memchr(name, '/', nl) != NULL ||
		    memchr(name, '\0', nl) != NULL)
			continue;
		json_object *c = json_object_new_object();
		if (al_utf8_valid(name, nl)) {
			json_object_object_add(c, "name", json_object_get(v));
		} else {
			char *b = al_base64_encode(name, nl);
			json_object_object_add(
				c, "name_b64",
				json_object_new_string(b != NULL ? b : ""));
			free(b);
		}
		const char *type = "other";
		if (json_object_object_get_ex(e, "type", &v) &&
		    json_object_is_type(v, json_type_string))
			for (size_t t = 0; t < 4; t++)
				if (strcmp(json_object_get_string(v),
					   types[t]) == 0)
					type = types[t];
		json_object_object_add(c, "type", json_object_new_string(type));
		static const char *const nums[] = {"size", "mode", "mtime"};
		for (size_t k = 0; k < 3; k++)
			if (json_object_object_get_ex(e, nums[k], &v) &&
			    json_object_is_type(v, json_type_int))
				json_object_object_add(
					c, nums[k],
					json_object_new_int64(
						json_object_get_int64(v)));
		json_object_array_add(out, c);
	}
	return out;
}

static void files_list(al_req *r, const char *path)
{
	al_err err;
	json_object *result = NULL;
	int fd = open_request(r, AL_F_FILE_LIST, path, -1, &err);
	if (fd < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	al_frame_reader rd;
	al_frame_reader_init(&rd);
	int k;
	for (;;) {
		al_frame f;
		k = next_reply(r, fd, &rd, &f, "sandbox stopped answering",
			       &err);
		if (k < 1)
			break;
		int answer = f.type == AL_F_RESULT;
		if (answer)
			result = fcgi_upstream_json(&f, &err);
		al_frame_free(&f);
		if (answer)
			break;
	}
	al_frame_reader_free(&rd);
	close(fd);
	if (k == 0)
		return; /* the client went away */
	if (result == NULL) {
		fcgi_http_error(r, &err);
		return;
	}
	json_object *entries = clean_entries(result, &err);
	json_object_put(result);
	if (entries == NULL) {
		fcgi_http_error(r, &err);
		return;
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "entries", entries);
	fcgi_http_json(r, 200, o);
	json_object_put(o);
}

void fcgi_api_files_get(al_req *r)
{
	char path[AL_API_PATH_MAX + 2];
	al_err err;
	al_frame_reader rd;
	int fd = -1;

	al_frame_reader_init(&rd);
	if (query_path(r, path, sizeof path) < 0)
		goto out;
	if (fcgi_req_sandbox_running(r) < 0)
		goto out;
	const char *list = fcgi_req_query(r, "list");
	if (list != NULL && strcmp(list, "1") != 0 &&
	    strcmp(list, "true") != 0 && strcmp(list, "0") != 0 &&
	    strcmp(list, "false") != 0) {
		fcgi_http_errorf(r, AL_EINVAL, "'list' must be 1 or 0");
		goto out;
	}
	if (list != NULL &&
	    (strcmp(list, "1") == 0 || strcmp(list, "true") == 0)) {
		files_list(r, path);
		goto out;
	}

	fd = open_request(r, AL_F_FILE_READ, path, -1, &err);
	if (fd < 0)
		goto fail;

	/* Headers go out with the first chunk, so an ERROR before any data
	 * still becomes a proper status. */
	for (;;) {
		al_frame f;
		int k = next_reply(r, fd, &rd, &f,
				   "sandbox stopped sending the file", &err);
		if (k == 0)
			goto out;
		if (k < 0)
			goto fail;
		if (f.type != AL_F_FILE_DATA && f.type != AL_F_FILE_END) {
			al_err_set(&err, AL_EPROTO, 0,
				   "unexpected %s frame from sandbox",
				   al_frame_type_name(f.type));
			al_frame_free(&f);
			goto fail;
		}
		if (!r->headers_sent)
			fcgi_http_head(r, 200, "application/octet-stream",
				       NULL);
		int end = f.type == AL_F_FILE_END;
		int wrc = 0;
		if (f.len > 0)
			wrc = fcgi_http_write(r, f.payload, f.len);
		al_frame_free(&f);
		if (wrc < 0 || end)
			break;
	}
	goto out;

fail:
	fcgi_http_error(r, &err);
out:
	if (fd >= 0)
		close(fd);
	al_frame_reader_free(&rd);
}
