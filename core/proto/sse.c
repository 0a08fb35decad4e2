/* Server-sent events (see sse.h). */
#include "proto/sse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

int al_sse_event(al_buf *out, const char *event, json_object *data, al_err *err)
{
	if (data == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	const char *s = al_json_compact(data);
	if (al_buf_append(out, "event: ", 7, err) < 0 ||
	    al_buf_append(out, event, strlen(event), err) < 0 ||
	    al_buf_append(out, "\ndata: ", 7, err) < 0 ||
	    al_buf_append(out, s, strlen(s), err) < 0 ||
	    al_buf_append(out, "\n\n", 2, err) < 0)
		return -1;
	return 0;
}

int al_sse_keepalive(al_buf *out, al_err *err)
{
	return al_buf_append(out, ": keepalive\n\n", 13, err);
}

static int bytes_event(al_buf *out, const char *event, const uint8_t *p,
		       size_t n, int as_b64, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	if (as_b64) {
		char *b = al_base64_encode(p, n);
		if (b == NULL) {
			json_object_put(o);
			return al_err_set(err, AL_ENOMEM, ENOMEM,
					  "out of memory");
		}
		json_object_object_add(o, "data_b64",
				       json_object_new_string(b));
		free(b);
	} else {
		json_object_object_add(
			o, "data",
			json_object_new_string_len((const char *)p, (int)n));
	}
	int rc = al_sse_event(out, event, o, err);
	json_object_put(o);
	return rc;
}

static const char *const output_names[2] = {"stdout", "stderr"};

int al_sse_output(al_sse_text *st, al_buf *out, int which, const uint8_t *p,
		  size_t n, al_err *err)
{
	const char *name = output_names[which != 0];
	size_t cl = st->carry_len[which != 0];
	uint8_t *buf = malloc(n + cl + 1);
	if (buf == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	memcpy(buf, st->carry[which != 0], cl);
	memcpy(buf + cl, p, n);
	size_t total = n + cl;
	st->carry_len[which != 0] = 0;

	int bad = 0, rc = 0;
	size_t ok = al_utf8_complete_prefix(buf, total, &bad);
	if (ok > 0)
		rc = bytes_event(out, name, buf, ok, 0, err);
	if (rc == 0 && bad) {
		/* Text up to the first invalid byte, the rest as base64. */
		rc = bytes_event(out, name, buf + ok, total - ok, 1, err);
	} else if (rc == 0) {
		st->carry_len[which != 0] = total - ok;
		memcpy(st->carry[which != 0], buf + ok, total - ok);
	}
	free(buf);
	return rc;
}

int al_sse_output_flush(al_sse_text *st, al_buf *out, al_err *err)
{
	for (int w = 0; w < 2; w++) {
		size_t n = st->carry_len[w];
		st->carry_len[w] = 0;
		if (n > 0 && bytes_event(out, output_names[w], st->carry[w], n,
					 1, err) < 0)
			return -1;
	}
	return 0;
}

int al_sse_start(al_buf *out, int64_t pid, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o != NULL && pid > 0)
		json_object_object_add(o, "pid", json_object_new_int64(pid));
	int rc = al_sse_event(out, "start", o, err);
	json_object_put(o);
	return rc;
}

int al_sse_exit(al_buf *out, const al_exit_msg *m, int64_t duration_ms,
		al_err *err)
{
	json_object *o = json_object_new_object();
	if (o != NULL && m->signal[0] != '\0') {
		json_object_object_add(o, "signal",
				       json_object_new_string(m->signal));
		if (m->timed_out)
			json_object_object_add(o, "timed_out",
					       json_object_new_boolean(1));
	} else if (o != NULL) {
		json_object_object_add(o, "exit_code",
				       json_object_new_int(m->exit_code));
	}
	if (o != NULL)
		json_object_object_add(o, "duration_ms",
				       json_object_new_int64(duration_ms));
	int rc = al_sse_event(out, "exit", o, err);
	json_object_put(o);
	return rc;
}

int al_sse_error(al_buf *out, al_code code, const char *message, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o != NULL) {
		json_object_object_add(
			o, "code", json_object_new_string(al_code_name(code)));
		json_object_object_add(o, "message",
				       json_object_new_string(message));
	}
	int rc = al_sse_event(out, "error", o, err);
	json_object_put(o);
	return rc;
}
