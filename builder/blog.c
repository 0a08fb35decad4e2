/* log.jsonl: one JSON object per line, appended with one write() each, so
 * a reader tailing the file (the API's SSE stream) never sees half a
 * line from a live build. Command output is passed on as it comes; bytes
 * that are not UTF-8 go as "data_b64". A multi-byte character split
 * between two reads is held back until its end arrives. */
#include "builder.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "base/log.h"

/* What the commands of one build may put into log.jsonl: it lives on the
 * host's disk and the commands are the template author's. */
#define BLOG_OUTPUT_MAX (4u << 20)

int bld_blog_open(bld *b, al_err *err)
{
	char path[AL_PATH_MAX + 128];
	snprintf(path, sizeof path, "%s/log.jsonl", b->dir);
	b->logfd = open(path,
			O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
			0640);
	if (b->logfd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", path);
	return 0;
}

/* Bytes written, 0 on failure. */
static size_t write_event(bld *b, json_object *o)
{
	if (o == NULL) {
		al_error("build %s: out of memory for a log line", b->id);
		return 0;
	}
	const char *s = json_object_to_json_string_ext(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	size_t n = strlen(s);
	char *line = malloc(n + 2);
	if (line == NULL) {
		json_object_put(o);
		al_error("build %s: out of memory for a log line", b->id);
		return 0;
	}
	memcpy(line, s, n);
	line[n] = '\n';
	json_object_put(o);
	ssize_t w = 0;
	if (b->logfd >= 0) {
		do
			w = write(b->logfd, line, n + 1);
		while (w < 0 && errno == EINTR);
		if (w != (ssize_t)(n + 1))
			al_error("build %s: writing log.jsonl: %s", b->id,
				 w < 0 ? strerror(errno) : "short write");
	}
	free(line);
	return w > 0 ? (size_t)w : 0;
}

void bld_blog_event(bld *b, json_object *o)
{
	write_event(b, o);
}

static json_object *event(const char *name)
{
	json_object *o = json_object_new_object();
	if (o != NULL)
		json_object_object_add(o, "event",
				       json_object_new_string(name));
	return o;
}

void bld_blog_step(bld *b, const al_af_step *st, int cached)
{
	json_object *o = event("step");
	if (o == NULL)
		return;
	json_object_object_add(o, "step", json_object_new_int(b->step));
	json_object_object_add(o, "steps", json_object_new_int(b->steps));
	json_object_object_add(o, "line", json_object_new_int(st->line));
	json_object_object_add(o, "text", json_object_new_string(st->text));
	json_object_object_add(o, "cached", json_object_new_boolean(cached));
	bld_blog_event(b, o);
}

static void emit_output(bld *b, int stream, const unsigned char *p, size_t n,
			int utf8)
{
	if (n == 0 || b->output_cut)
		return;
	json_object *o = event("output");
	if (o == NULL)
		return;
	json_object_object_add(o, "step", json_object_new_int(b->step));
	if (b->output_logged >= BLOG_OUTPUT_MAX) {
		b->output_cut = 1;
		json_object_object_add(o, "stream",
				       json_object_new_string("stderr"));
		json_object_object_add(o, "truncated",
				       json_object_new_boolean(1));
		json_object_object_add(
			o, "data",
			json_object_new_string("airlock: the build's output "
					       "passed 4 MiB; the rest is "
					       "not logged\n"));
		bld_blog_event(b, o);
		return;
	}
	json_object_object_add(o, "stream",
			       json_object_new_string(stream == 0 ? "stdout"
								  : "stderr"));
	if (utf8) {
		json_object_object_add(
			o, "data",
			json_object_new_string_len((const char *)p, (int)n));
	} else {
		char *b64 = al_base64_encode(p, n);
		if (b64 == NULL) {
			json_object_put(o);
			return;
		}
		json_object_object_add(o, "data_b64",
				       json_object_new_string(b64));
		free(b64);
	}
	b->output_logged += write_event(b, o);
}

void bld_blog_output(bld *b, int stream, const void *data, size_t len)
{
	stream = stream != 0;
	if (len == 0)
		return;
	size_t hold = b->ncarry[stream];
	unsigned char *buf = malloc(hold + len);
	if (buf == NULL) {
		al_error("build %s: out of memory for output", b->id);
		return;
	}
	memcpy(buf, b->carry[stream], hold);
	memcpy(buf + hold, data, len);
	size_t n = hold + len;
	b->ncarry[stream] = 0;

	int bad = 0;
	size_t ok = al_utf8_complete_prefix(buf, n, &bad);
	/* NUL is valid UTF-8 but ends a C string in a reader: base64. */
	if (!bad && memchr(buf, '\0', n) != NULL)
		bad = 1;
	if (bad) {
		emit_output(b, stream, buf, n, 0);
	} else {
		emit_output(b, stream, buf, ok, 1);
		size_t rest = n - ok;
		if (rest > sizeof b->carry[stream]) {
			/* Cannot happen (at most 3 bytes are held back). */
			emit_output(b, stream, buf + ok, rest, 0);
		} else {
			memcpy(b->carry[stream], buf + ok, rest);
			b->ncarry[stream] = rest;
		}
	}
	free(buf);
}

void bld_blog_output_flush(bld *b)
{
	for (int s = 0; s < 2; s++) {
		if (b->ncarry[s] > 0)
			emit_output(b, s, (const unsigned char *)b->carry[s],
				    b->ncarry[s], 0);
		b->ncarry[s] = 0;
	}
}

void bld_blog_info(bld *b, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	json_object *o = event("info");
	if (o == NULL)
		return;
	json_object_object_add(o, "step", json_object_new_int(b->step));
	json_object_object_add(o, "message", json_object_new_string(msg));
	bld_blog_event(b, o);
}

void bld_blog_status_ok(bld *b, int version)
{
	json_object *o = event("status");
	if (o == NULL)
		return;
	json_object_object_add(o, "status",
			       json_object_new_string("succeeded"));
	json_object_object_add(o, "name", json_object_new_string(b->name));
	json_object_object_add(o, "version", json_object_new_int(version));
	bld_blog_event(b, o);
}

void bld_blog_status_failed(bld *b, int step, int line, const char *error)
{
	json_object *o = event("status");
	if (o == NULL)
		return;
	json_object_object_add(o, "status", json_object_new_string("failed"));
	json_object_object_add(o, "step", json_object_new_int(step));
	json_object_object_add(o, "line", json_object_new_int(line));
	json_object_object_add(o, "error", json_object_new_string(error));
	bld_blog_event(b, o);
}
