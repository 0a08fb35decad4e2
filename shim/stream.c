/* Streams nginx carries: the shim's side of an exec's event stream.
 *
 * fcgi starts the process with STREAM_EXEC and answers its client with
 * X-Accel-Redirect to nginx's internal stream location, which connects
 * to this shim's stream socket (run/stream/<id>.sock) and asks for
 * GET /stream/<token>. From then on the shim writes the HTTP head and
 * the events straight to nginx from its poll loop; no fcgi worker is
 * involved. nginx closing the connection (its client went away) kills
 * the process unless it was started with "background". */
#include "stream.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/log.h"
#include "proto/streamhttp.h"
#include "route.h"

/* Room for the streams' sockets beside the control clients. */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	rlim_t want = 4 * (SHIM_MAX_CLIENTS + SHIM_STREAM_POLL_MAX);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* The stream socket and the tables, once per shim. Only nginx's group
 * can reach the socket: its directory is root:<nginx group> 0710
 * (scripts/stack.sh, docs/operations.md). */
static int listen_streams(shim *s, al_err *err)
{
	if (s->streams != NULL)
		return 0;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (al_config_stream_socket(&s->cfg, s->sb.id, sa.sun_path,
				    sizeof sa.sun_path, err) < 0)
		return -1;
	int fd = al_streamhttp_listen(sa.sun_path, err);
	if (fd < 0)
		return -1;
	s->streams = calloc(SHIM_MAX_STREAMS, sizeof *s->streams);
	s->http = calloc(SHIM_MAX_HTTP_PENDING, sizeof *s->http);
	if (s->streams == NULL || s->http == NULL) {
		free(s->streams);
		free(s->http);
		s->streams = NULL;
		s->http = NULL;
		close(fd);
		unlink(sa.sun_path);
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	}
	for (int i = 0; i < SHIM_MAX_HTTP_PENDING; i++)
		s->http[i].fd = -1;
	s->http_fd = fd;
	snprintf(s->http_path, sizeof s->http_path, "%s", sa.sun_path);
	raise_fd_limit();
	return 0;
}

int shim_streams_open(const shim *s)
{
	int n = 0;
	for (int i = 0; s->streams != NULL && i < SHIM_MAX_STREAMS; i++)
		n += s->streams[i].used;
	for (const shim_route *r = s->routes; r != NULL; r = r->next)
		n += r->kind == AL_F_STREAM_EXEC && r->stream < 0;
	return n;
}

int shim_stream_begin(shim *s, shim_route *r, int64_t pid, al_err *err)
{
	if (listen_streams(s, err) < 0)
		return -1;
	int i = 0;
	while (i < SHIM_MAX_STREAMS && s->streams[i].used)
		i++;
	if (i == SHIM_MAX_STREAMS)
		return al_err_set(err, AL_EUNAVAIL, 0,
				  "sandbox %s has %d streams open", s->sb.id,
				  SHIM_MAX_STREAMS);
	shim_stream *st = &s->streams[i];
	memset(st, 0, sizeof *st);
	st->fd = -1;
	al_buf_init(&st->out, SHIM_STREAM_QUEUE_MAX);
	if (al_hex_random(st->token, AL_STREAM_TOKEN_LEN, err) < 0 ||
	    al_buf_append(&st->out, al_streamhttp_sse_head,
			  al_streamhttp_sse_head_len, err) < 0 ||
	    al_sse_start(&st->out, pid, err) < 0) {
		al_buf_free(&st->out);
		return -1;
	}
	st->used = 1;
	memcpy(st->lease, r->lease, sizeof st->lease);
	st->background = r->background;
	st->agent_id = r->agent_id;
	st->t0_ms = al_now_ms();
	st->expires_ms = st->t0_ms + SHIM_STREAM_TOKEN_MS;
	r->stream = i;
	return i;
}

/* Free slot i. A process still running is killed unless it asked to
 * outlive its stream; either way no more of its output goes anywhere. */
static void stream_close(shim *s, int i)
{
	shim_stream *st = &s->streams[i];
	if (!st->used)
		return;
	if (st->agent_id != 0) {
		shim_route *r = shim_route_find(s, st->agent_id);
		if (r != NULL)
			r->stream = -1;
		if (!st->background)
			shim_agent_kill(s, st->agent_id);
	}
	if (st->fd >= 0)
		close(st->fd);
	al_buf_free(&st->out);
	explicit_bzero(st->token, sizeof st->token);
	memset(st, 0, sizeof *st);
	st->fd = -1;
}

/* End stream i with an error event: the process is stopped (unless
 * background), the stream closes once the event is out. */
static void stream_fail(shim *s, int i, al_code code, const char *msg)
{
	shim_stream *st = &s->streams[i];
	if (st->done)
		return;
	if (st->fd < 0) {
		/* Nobody is there to tell. */
		stream_close(s, i);
		return;
	}
	al_err err = {0};
	al_sse_output_flush(&st->text, &st->out, &err);
	al_sse_error(&st->out, code, msg, &err);
	st->done = 1;
	if (st->agent_id != 0) {
		shim_route *r = shim_route_find(s, st->agent_id);
		if (r != NULL)
			r->stream = -1;
		if (!st->background)
			shim_agent_kill(s, st->agent_id);
		st->agent_id = 0;
	}
}

void shim_stream_frame(shim *s, int i, const al_frame *f)
{
	shim_stream *st = &s->streams[i];
	al_err err = {0};
	int rc = 0;
	switch (f->type) {
	case AL_F_STDOUT:
	case AL_F_STDERR:
		rc = al_sse_output(&st->text, &st->out, f->type == AL_F_STDERR,
				   f->payload, f->len, &err);
		break;
	case AL_F_EXIT: {
		al_exit_msg m;
		st->agent_id = 0;
		if (al_exit_unpack(f->payload, f->len, &m, &err) < 0) {
			al_warn("sandbox %s: stream: %s", s->sb.id, err.msg);
			stream_fail(s, i, AL_EPROTO,
				    "sandbox sent a malformed EXIT");
			return;
		}
		rc = al_sse_output_flush(&st->text, &st->out, &err);
		if (rc == 0)
			rc = al_sse_exit(&st->out, &m, al_now_ms() - st->t0_ms,
					 &err);
		st->done = 1;
		break;
	}
	case AL_F_ERROR: {
		al_err why, perr;
		st->agent_id = 0;
		if (al_error_unpack(f->payload, f->len, &why, &perr) < 0)
			al_err_set(&why, AL_EPROTO, 0,
				   "sandbox sent a malformed error");
		stream_fail(s, i, why.code, why.msg);
		return;
	}
	default:
		/* STARTED twice, or a frame no exec has: the guest is
		 * confused or hostile. */
		stream_fail(s, i, AL_EPROTO, "unexpected frame from sandbox");
		return;
	}
	if (rc < 0) {
		/* Past SHIM_STREAM_QUEUE_MAX: never for output the flow
		 * control admits. */
		al_warn("sandbox %s: stream dropped: %s", s->sb.id, err.msg);
		stream_close(s, i);
	}
}

char *shim_streams_answer(shim *s, const al_streams_msg *m, al_err *err)
{
	char(*live)[AL_STREAM_LEASE_LEN + 1] = calloc(m->n + 1, sizeof *live);
	if (live == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		return NULL;
	}
	size_t n = 0;
	for (size_t k = 0; k < m->n; k++) {
		int found = 0;
		for (int i = 0; s->streams != NULL && i < SHIM_MAX_STREAMS;
		     i++) {
			shim_stream *st = &s->streams[i];
			if (!st->used || st->done ||
			    strcmp(st->lease, m->lease[k]) != 0)
				continue;
			if (m->end != AL_OK)
				stream_fail(s, i, m->end, m->message);
			else
				found = 1;
		}
		for (shim_route *r = s->routes; r != NULL; r = r->next) {
			if (r->kind != AL_F_STREAM_EXEC || r->stream >= 0 ||
			    strcmp(r->lease, m->lease[k]) != 0)
				continue;
			if (m->end != AL_OK)
				shim_agent_kill(s, r->agent_id);
			else
				found = 1;
		}
		if (found)
			memcpy(live[n++], m->lease[k], sizeof live[0]);
	}
	char *txt = al_streams_pack(live, n, AL_OK, NULL, err);
	free(live);
	return txt;
}

/* ---- nginx's connections ---- */

static void http_drop(shim *s, int k, int status)
{
	al_streamhttp_conn *c = &s->http[k];
	if (status != 0)
		al_streamhttp_refuse(c->fd, status);
	else
		close(c->fd);
	c->fd = -1;
	c->len = 0;
}

/* The stream whose token this is; every slot is compared in full so the
 * time taken says nothing about the token. */
static int stream_by_token(shim *s, const char *token)
{
	int found = -1;
	for (int i = 0; i < SHIM_MAX_STREAMS; i++) {
		const shim_stream *st = &s->streams[i];
		unsigned diff = st->used && st->fd < 0 ? 0 : 1;
		for (int j = 0; j < AL_STREAM_TOKEN_LEN; j++)
			diff |= (unsigned char)st->token[j] ^
				(unsigned char)token[j];
		if (diff == 0)
			found = i;
	}
	return found;
}

static void http_read(shim *s, int k)
{
	al_streamhttp_conn *c = &s->http[k];
	char token[AL_STREAM_TOKEN_LEN + 1];
	enum al_streamhttp_result r = al_streamhttp_read(c, token);
	if (r == AL_STREAMHTTP_INCOMPLETE || r == AL_STREAMHTTP_CLOSED)
		return;
	if (r == AL_STREAMHTTP_BAD) {
		http_drop(s, k, 400);
		return;
	}
	int i = r == AL_STREAMHTTP_OK ? stream_by_token(s, token) : -1;
	explicit_bzero(token, sizeof token);
	if (i < 0) {
		http_drop(s, k, 404);
		return;
	}
	/* The token is spent: a second request with it finds nothing. */
	shim_stream *st = &s->streams[i];
	explicit_bzero(st->token, sizeof st->token);
	st->fd = c->fd;
	st->last_write_ms = al_now_ms();
	c->fd = -1;
	c->len = 0;
}

static void http_accept(shim *s)
{
	if (al_streamhttp_accept(s->http_fd, s->http, SHIM_MAX_HTTP_PENDING,
				 al_now_ms() + SHIM_HTTP_HEAD_MS) > 0)
		al_warn("sandbox %s: too many stream connections waiting for "
			"their request",
			s->sb.id);
}

/* nginx sends nothing after its request: bytes or EOF from it mean the
 * client went away (nginx closes the upstream then). */
static void stream_readable(shim *s, int i)
{
	shim_stream *st = &s->streams[i];
	if (!al_streamhttp_client_gone(st->fd))
		return;
	al_info("sandbox %s: stream client went away%s", s->sb.id,
		st->agent_id != 0 && !st->background ? ", stopping its command"
						     : "");
	stream_close(s, i);
}

int shim_streams_poll(shim *s, struct pollfd *pfd, int *who, int n)
{
	if (s->streams == NULL)
		return n;
	pfd[n] = (struct pollfd){.fd = s->http_fd, .events = POLLIN};
	who[n++] = SHIM_WHO_HTTP_LISTEN;
	for (int i = 0; i < SHIM_MAX_STREAMS; i++) {
		shim_stream *st = &s->streams[i];
		if (!st->used || st->fd < 0)
			continue;
		short ev = POLLIN | POLLRDHUP;
		if (al_buf_pending(&st->out) > 0)
			ev |= POLLOUT;
		pfd[n] = (struct pollfd){.fd = st->fd, .events = ev};
		who[n++] = SHIM_WHO_STREAM + i;
	}
	for (int k = 0; k < SHIM_MAX_HTTP_PENDING; k++) {
		if (s->http[k].fd < 0)
			continue;
		pfd[n] = (struct pollfd){.fd = s->http[k].fd, .events = POLLIN};
		who[n++] = SHIM_WHO_HTTP + k;
	}
	return n;
}

static void stream_write(shim *s, int i)
{
	shim_stream *st = &s->streams[i];
	al_err err = {0};
	if (al_buf_pending(&st->out) > 0) {
		int rc = al_buf_flush(&st->out, st->fd, &err);
		if (rc < 0) {
			stream_close(s, i);
			return;
		}
		st->last_write_ms = al_now_ms();
		if (rc == AL_AGAIN)
			return;
	}
	if (st->done)
		stream_close(s, i);
}

void shim_streams_event(shim *s, int who, short revents)
{
	if (who == SHIM_WHO_HTTP_LISTEN) {
		http_accept(s);
	} else if (who >= SHIM_WHO_HTTP) {
		int k = who - SHIM_WHO_HTTP;
		if (s->http[k].fd >= 0)
			http_read(s, k);
	} else if (who >= SHIM_WHO_STREAM) {
		int i = who - SHIM_WHO_STREAM;
		if (!s->streams[i].used || s->streams[i].fd < 0)
			return;
		if (revents & POLLOUT)
			stream_write(s, i);
		if (s->streams[i].used && s->streams[i].fd >= 0 &&
		    (revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)))
			stream_readable(s, i);
	}
}

int shim_streams_timeout(const shim *s, int64_t now)
{
	if (s->streams == NULL)
		return -1;
	int64_t next = -1;
	for (int i = 0; i < SHIM_MAX_STREAMS; i++) {
		const shim_stream *st = &s->streams[i];
		if (!st->used)
			continue;
		int64_t t = st->fd < 0 ? st->expires_ms
				       : st->last_write_ms +
						 SHIM_STREAM_KEEPALIVE_MS;
		if (next < 0 || t < next)
			next = t;
	}
	for (int k = 0; k < SHIM_MAX_HTTP_PENDING; k++)
		if (s->http[k].fd >= 0 &&
		    (next < 0 || s->http[k].deadline_ms < next))
			next = s->http[k].deadline_ms;
	if (next < 0)
		return -1;
	return next <= now ? 0 : (int)(next - now);
}

void shim_streams_tick(shim *s, int64_t now)
{
	if (s->streams == NULL)
		return;
	for (int i = 0; i < SHIM_MAX_STREAMS; i++) {
		shim_stream *st = &s->streams[i];
		if (!st->used)
			continue;
		if (st->fd < 0 && now >= st->expires_ms) {
			al_info("sandbox %s: stream token expired unused",
				s->sb.id);
			stream_close(s, i);
		} else if (st->fd >= 0 && al_buf_pending(&st->out) == 0 &&
			   now >= st->last_write_ms +
					   SHIM_STREAM_KEEPALIVE_MS) {
			al_err err = {0};
			al_sse_keepalive(&st->out, &err);
			st->last_write_ms = now;
		}
	}
	for (int k = 0; k < SHIM_MAX_HTTP_PENDING; k++)
		if (s->http[k].fd >= 0 && now >= s->http[k].deadline_ms)
			http_drop(s, k, 400);
}

void shim_streams_flush(shim *s)
{
	for (int i = 0; s->streams != NULL && i < SHIM_MAX_STREAMS; i++)
		if (s->streams[i].used && s->streams[i].fd >= 0)
			stream_write(s, i);
}

int shim_streams_behind(const shim *s)
{
	for (int i = 0; s->streams != NULL && i < SHIM_MAX_STREAMS; i++)
		if (s->streams[i].used && al_buf_pending(&s->streams[i].out) >=
						  SHIM_STREAM_QUEUE_HIGH)
			return 1;
	return 0;
}

void shim_streams_finish(shim *s)
{
	if (s->streams == NULL)
		return;
	for (int i = 0; i < SHIM_MAX_STREAMS; i++) {
		if (!s->streams[i].used)
			continue;
		stream_fail(s, i, AL_ESTATE, "the sandbox ended");
		if (s->streams[i].used && s->streams[i].fd >= 0) {
			al_err err = {0};
			al_buf_flush(&s->streams[i].out, s->streams[i].fd,
				     &err);
		}
		stream_close(s, i);
	}
	for (int k = 0; k < SHIM_MAX_HTTP_PENDING; k++)
		if (s->http[k].fd >= 0)
			http_drop(s, k, 0);
	close(s->http_fd);
	unlink(s->http_path);
	free(s->streams);
	free(s->http);
	s->streams = NULL;
	s->http = NULL;
	s->http_fd = -1;
}
