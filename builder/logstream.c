/* The build log's streams, carried by nginx (core/template/buildlog.h).
 *
 * The builder starts this at once as its own process
 * ("airlock-builder --log-stream ID BUILDER_PID", the listening socket
 * on fd 3), so
 * that a builder killed mid-build still gets its streams ended with an
 * error event rather than cut. For each request nginx sends with a
 * token fcgi issued, it tails log.jsonl from the start as SSE events,
 * reading more only as nginx takes them, until the build's status line.
 * Once the builder is gone it ends every stream at the end of the log
 * (with an error event if the log has no status line), lingers a few
 * seconds for tokens already handed out, and exits. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/log.h"
#include "builder.h"
#include "proto/sse.h"
#include "proto/streamhttp.h"
#include "template/builddir.h"
#include "template/buildlog.h"

#define LS_STREAMS_MAX 256
#define LS_PENDING_MAX 16
#define LS_HEAD_MS 5000
#define LS_KEEPALIVE_MS 15000
#define LS_LINGER_MS 5000
#define LS_TICK_MS 100
/* How often a stream's key is checked for revocation. */
#define LS_KEY_CHECK_MS 500
/* Events queued for nginx before the log is read further. */
#define LS_QUEUE_HIGH (256u << 10)
/* A log line longer than this is not one the builder writes: skipped. */
#define LS_LINE_MAX (1u << 20)
#define LS_READ 65536

typedef struct ls_stream {
	int fd;	   /* to nginx; -1 = free slot */
	int logfd; /* log.jsonl, this stream's own offset */
	char *line;
	size_t line_len;
	int skipping; /* inside an over-long line */
	al_buf out;
	int done; /* nothing more to add: close once out is written */
	int64_t last_write_ms;
	long long key_id;		     /* whose token opened it */
	char lease[AL_STREAM_LEASE_LEN + 1]; /* its project stream lease */
	int64_t key_checked_ms; /* when its key was last looked at */
} ls_stream;

typedef struct ls {
	const char *id;
	al_config cfg;
	char dir[AL_PATH_MAX + 80];
	char log[AL_PATH_MAX + 96];
	int listen_fd;
	pid_t builder;
	int builder_gone;
	ls_stream st[LS_STREAMS_MAX];
	al_streamhttp_conn conn[LS_PENDING_MAX];
} ls;

static void stream_close(const ls *l, ls_stream *st)
{
	/* Its lease is over: the next stream start of the project may
	 * drop it (core/template/buildlog.h). */
	if (st->lease[0] != '\0')
		al_buildlog_lease_end(l->dir, st->lease);
	if (st->fd >= 0)
		close(st->fd);
	if (st->logfd >= 0)
		close(st->logfd);
	al_buf_free(&st->out);
	free(st->line);
	memset(st, 0, sizeof *st);
	st->fd = -1;
	st->logfd = -1;
}

static void stream_end_error(ls_stream *st, al_code code, const char *msg)
{
	al_err err = {0};
	al_sse_error(&st->out, code, msg, &err);
	st->done = 1;
}

/* A stream whose key was revoked ends, as exec streams do. */
static void stream_check_key(ls *l, ls_stream *st, int64_t now)
{
	if (st->done || now - st->key_checked_ms < LS_KEY_CHECK_MS)
		return;
	st->key_checked_ms = now;
	if (al_buildlog_key_revoked(&l->cfg, st->key_id))
		stream_end_error(st, AL_EAUTH, "the API key was revoked");
}

/* The complete lines of p as events; the last partial one is kept. */
static void take_lines(ls_stream *st, const char *p, size_t n)
{
	al_err err = {0};
	while (n > 0 && !st->done) {
		const char *nl = memchr(p, '\n', n);
		size_t k = nl != NULL ? (size_t)(nl - p) : n;
		if (!st->skipping) {
			if (st->line_len + k > LS_LINE_MAX) {
				st->skipping = 1;
				st->line_len = 0;
			} else {
				char *np = realloc(st->line,
						   st->line_len + k + 1);
				if (np == NULL) {
					stream_end_error(st, AL_EUNAVAIL,
							 "out of memory");
					return;
				}
				st->line = np;
				memcpy(st->line + st->line_len, p, k);
				st->line_len += k;
				st->line[st->line_len] = '\0';
			}
		}
		if (nl == NULL)
			return;
		if (!st->skipping) {
			int rc = al_buildlog_event(&st->out, st->line, &err);
			if (rc < 0) {
				stream_end_error(st, AL_EUNAVAIL, err.msg);
				return;
			}
			st->done = rc == 1;
		}
		st->skipping = 0;
		st->line_len = 0;
		p += k + 1;
		n -= k + 1;
	}
}

/* Read the log on while nginx keeps up. gone: the builder had exited
 * before this call, so an end of file is the end of the log. */
static void stream_fill(ls *l, ls_stream *st, int gone)
{
	char buf[LS_READ];
	while (!st->done && al_buf_pending(&st->out) < LS_QUEUE_HIGH) {
		if (st->logfd < 0)
			st->logfd = open(l->log,
					 O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		ssize_t n = st->logfd >= 0 ? read(st->logfd, buf, sizeof buf)
					   : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0) {
			take_lines(st, buf, (size_t)n);
			continue;
		}
		if (gone)
			stream_end_error(st, AL_EUNAVAIL,
					 "the builder exited before "
					 "finishing the build");
		return;
	}
}

static void stream_write(const ls *l, ls_stream *st, int64_t now)
{
	al_err err = {0};
	if (al_buf_pending(&st->out) > 0) {
		int rc = al_buf_flush(&st->out, st->fd, &err);
		if (rc < 0) {
			stream_close(l, st);
			return;
		}
		st->last_write_ms = now;
		if (rc == AL_AGAIN)
			return;
	}
	if (st->done)
		stream_close(l, st);
}

static void conn_request(ls *l, al_streamhttp_conn *c, int64_t now)
{
	char token[AL_STREAM_TOKEN_LEN + 1];
	enum al_streamhttp_result r = al_streamhttp_read(c, token);
	if (r == AL_STREAMHTTP_INCOMPLETE || r == AL_STREAMHTTP_CLOSED)
		return;
	long long key_id = -1;
	char lease[AL_STREAM_LEASE_LEN + 1] = "";
	int ok = r == AL_STREAMHTTP_OK &&
		 al_buildlog_token_take(l->dir, token, &key_id, lease);
	explicit_bzero(token, sizeof token);
	int i = 0;
	while (ok && i < LS_STREAMS_MAX && l->st[i].fd >= 0)
		i++;
	if (!ok || i == LS_STREAMS_MAX) {
		if (ok) {
			al_warn("build %s: %d log streams open, one refused",
				l->id, LS_STREAMS_MAX);
			al_buildlog_lease_end(l->dir, lease);
		}
		al_streamhttp_refuse(c->fd, r == AL_STREAMHTTP_BAD ? 400 : 404);
		c->fd = -1;
		return;
	}
	ls_stream *st = &l->st[i];
	st->fd = c->fd;
	st->last_write_ms = now;
	st->key_id = key_id;
	memcpy(st->lease, lease, sizeof st->lease);
	st->key_checked_ms = now;
	al_buf_init(&st->out, 0);
	al_err err = {0};
	al_buf_append(&st->out, al_streamhttp_sse_head,
		      al_streamhttp_sse_head_len, &err);
	c->fd = -1;
}

static int busy(const ls *l)
{
	for (int i = 0; i < LS_STREAMS_MAX; i++)
		if (l->st[i].fd >= 0)
			return 1;
	for (int k = 0; k < LS_PENDING_MAX; k++)
		if (l->conn[k].fd >= 0)
			return 1;
	return 0;
}

static void serve(ls *l)
{
	static struct pollfd pfd[1 + LS_STREAMS_MAX + LS_PENDING_MAX];
	static int who[1 + LS_STREAMS_MAX + LS_PENDING_MAX];
	int64_t gone_at = 0;
	for (;;) {
		int64_t now = al_now_ms();
		/* Sampled before the log is read: once the builder is gone,
		 * what it wrote is all there is. */
		int gone = getppid() != l->builder;
		if (gone && gone_at == 0)
			gone_at = now;
		if (gone && now - gone_at >= LS_LINGER_MS && !busy(l))
			return;
		int n = 0;
		pfd[n] = (struct pollfd){.fd = l->listen_fd, .events = POLLIN};
		who[n++] = -1;
		for (int i = 0; i < LS_STREAMS_MAX; i++) {
			ls_stream *st = &l->st[i];
			if (st->fd < 0)
				continue;
			stream_check_key(l, st, now);
			stream_fill(l, st, gone);
			if (al_buf_pending(&st->out) == 0 && !st->done &&
			    now - st->last_write_ms >= LS_KEEPALIVE_MS) {
				al_err err = {0};
				al_sse_keepalive(&st->out, &err);
			}
			stream_write(l, st, now);
			if (st->fd < 0)
				continue;
			short ev = POLLIN | POLLRDHUP;
			if (al_buf_pending(&st->out) > 0)
				ev |= POLLOUT;
			pfd[n] = (struct pollfd){.fd = st->fd, .events = ev};
			who[n++] = i;
		}
		for (int k = 0; k < LS_PENDING_MAX; k++) {
			if (l->conn[k].fd < 0)
				continue;
			if (now >= l->conn[k].deadline_ms) {
				al_streamhttp_refuse(l->conn[k].fd, 400);
				l->conn[k].fd = -1;
				continue;
			}
			pfd[n] = (struct pollfd){.fd = l->conn[k].fd,
						 .events = POLLIN};
			who[n++] = LS_STREAMS_MAX + k;
		}
		if (poll(pfd, (nfds_t)n, LS_TICK_MS) <= 0)
			continue;
		now = al_now_ms();
		for (int j = 0; j < n; j++) {
			if (pfd[j].revents == 0)
				continue;
			if (who[j] < 0) {
				al_streamhttp_accept(l->listen_fd, l->conn,
						     LS_PENDING_MAX,
						     now + LS_HEAD_MS);
			} else if (who[j] >= LS_STREAMS_MAX) {
				al_streamhttp_conn *c =
					&l->conn[who[j] - LS_STREAMS_MAX];
				if (c->fd >= 0)
					conn_request(l, c, now);
			} else {
				ls_stream *st = &l->st[who[j]];
				if (st->fd >= 0 && (pfd[j].revents & POLLOUT))
					stream_write(l, st, now);
				if (st->fd >= 0 &&
				    (pfd[j].revents & (POLLIN | POLLRDHUP |
						       POLLHUP | POLLERR)) &&
				    al_streamhttp_client_gone(st->fd))
					stream_close(l, st);
			}
		}
	}
}

int bld_logstream_main(const char *id, pid_t builder)
{
	static ls l;
	al_err err = {0};
	al_config *cfg = &l.cfg;
	l.id = id;
	l.listen_fd = 3;
	l.builder = builder;
	for (int i = 0; i < LS_STREAMS_MAX; i++)
		l.st[i].fd = l.st[i].logfd = -1;
	for (int k = 0; k < LS_PENDING_MAX; k++)
		l.conn[k].fd = -1;
	if (al_config_load(cfg, &err) < 0 ||
	    al_builddir_path(cfg, id, l.dir, sizeof l.dir, &err) < 0) {
		al_error("build %s: log stream: %s", id, err.msg);
		return 111;
	}
	snprintf(l.log, sizeof l.log, "%s/log.jsonl", l.dir);
	char sock[sizeof((struct sockaddr_un *)0)->sun_path];
	int have_sock = al_buildlog_socket(cfg, id, sock, sizeof sock, &err) ==
			0;
	serve(&l);
	/* A socket nobody serves would make nginx wait for nothing. */
	if (have_sock)
		unlink(sock);
	al_buildlog_tokens_clear(l.dir);
	return 0;
}

int bld_logstream_start(const bld *b, al_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char prog[AL_PATH_MAX + 32];
	if (al_buildlog_socket(&b->cfg, b->id, sa.sun_path, sizeof sa.sun_path,
			       err) < 0)
		return -1;
	if ((size_t)snprintf(prog, sizeof prog, "%s/airlock-builder",
			     b->cfg.libexec_dir) >= sizeof prog)
		return al_err_set(err, AL_EINVAL, 0, "path too long");
	/* A socket nobody would serve is not made. */
	if (access(prog, X_OK) < 0)
		return al_err_sys(err, AL_ESYS, errno, "%s", prog);
	int fd = al_streamhttp_listen(sa.sun_path, err);
	if (fd < 0)
		return -1;
	char me[24];
	snprintf(me, sizeof me, "%ld", (long)getpid());
	pid_t pid = fork();
	if (pid == 0) {
		if ((fd == 3 ? fcntl(fd, F_SETFD, 0) : dup2(fd, 3)) < 0)
			_exit(111);
		char *const argv[] = {prog, "--log-stream", (char *)b->id, me,
				      NULL};
		execv(prog, argv);
		_exit(111);
	}
	int e = errno;
	close(fd);
	if (pid < 0) {
		unlink(sa.sun_path);
		return al_err_sys(err, AL_ESYS, e, "fork");
	}
	return 0;
}
