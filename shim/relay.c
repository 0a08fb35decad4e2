/* The shim's event loop: fcgi clients on the control socket, the agent
 * channel, and signals, in one poll loop. Requests from clients are given
 * agent-side ids so that many clients can share the one agent channel;
 * every frame from the agent is routed back by that id or dropped. */
#include "relay.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/json.h"
#include "base/log.h"
#include "boot.h"
#include "gateway.h"
#include "host/cgroup.h"
#include "life.h"
#include "lifecycle.h"
#include "netctl.h"
#include "route.h"
#include "sandbox/machine_end.h"
#include "stream.h"

static void status_reply(shim *s, int i, uint32_t id)
{
	json_object *o = json_object_new_object();
	json_object_object_add(
		o, "state",
		json_object_new_string(s->standby ? "standby"
						  : shim_lifecycle_state(s)));
	json_object_object_add(o, "driver",
			       json_object_new_string(s->driver->name));
	if (s->driver->accel != NULL)
		json_object_object_add(
			o, "accel",
			json_object_new_string(s->driver->accel(&s->h)));
	json_object_object_add(o, "pid", json_object_new_int(s->h.init_pid));
	const char *txt =
		json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	shim_client_send(s, i, AL_F_RESULT, id, txt, strlen(txt));
	json_object_put(o);
}

static void claim(shim *s, int i, al_frame *f)
{
	al_err err = {0};
	if (!s->standby) {
		shim_client_fail(s, i, f->id, AL_ESTATE,
				 "this sandbox is not a standby");
		return;
	}
	char *result = NULL;
	int rc = shim_claim(s, f->payload, f->len, &result, &err);
	if (rc == AL_DECLINED) {
		shim_client_fail(s, i, f->id, err.code, err.msg);
		return;
	}
	if (rc < 0) {
		/* The standby is half-renamed: end it; the claimer starts
		 * the sandbox cold instead. */
		al_warn("standby %s: claim by %s failed: %s", s->slot, s->sb.id,
			err.msg);
		shim_client_fail(s, i, f->id, err.code, err.msg);
		free(result);
		s->stopping = 1;
		return;
	}
	al_info("standby %s is now sandbox %s", s->slot, s->sb.id);
	shim_client_send(s, i, AL_F_RESULT, f->id, result, strlen(result));
	free(result);
}

/* STREAM_EXEC: the exec is relayed like EXEC; its STARTED makes the
 * stream (from_agent). */
static void stream_exec(shim *s, int i, al_frame *f)
{
	al_err err = {0};
	al_stream_exec_msg m;
	if (shim_route_by_client(s, i, f->id) != NULL) {
		shim_client_fail(s, i, f->id, AL_EINVAL,
				 "request id already in use");
		return;
	}
	if (shim_streams_open(s) >= SHIM_MAX_STREAMS) {
		shim_client_fail(s, i, f->id, AL_EUNAVAIL,
				 "too many streams open in this sandbox");
		return;
	}
	if (al_stream_exec_unpack(f->payload, f->len, &m, &err) < 0) {
		shim_client_fail(s, i, f->id, err.code, err.msg);
		return;
	}
	char *req = shim_exec_defaults(s, &m.exec, &err);
	shim_route *r = req != NULL
				? shim_route_add(s, AL_F_STREAM_EXEC, i, f->id)
				: NULL;
	if (r != NULL) {
		memcpy(r->lease, m.lease, sizeof r->lease);
		r->background = m.background;
		if (shim_agent_send(s, AL_F_EXEC, r->agent_id, req, strlen(req),
				    &err) < 0) {
			shim_route_del(s, r);
			r = NULL;
		}
	} else if (req != NULL) {
		al_err_set(&err, AL_ENOMEM, ENOMEM, "out of memory");
	}
	free(req);
	al_stream_exec_free(&m);
	if (r == NULL)
		shim_client_fail(s, i, f->id, err.code, err.msg);
}

static void streams_reply(shim *s, int i, al_frame *f)
{
	al_err err = {0};
	al_streams_msg m;
	char *txt = al_streams_unpack(f->payload, f->len, &m, &err) == 0
			    ? shim_streams_answer(s, &m, &err)
			    : NULL;
	al_streams_msg_free(&m);
	if (txt == NULL) {
		shim_client_fail(s, i, f->id, err.code, err.msg);
		return;
	}
	shim_client_send(s, i, AL_F_RESULT, f->id, txt, strlen(txt));
	free(txt);
}

/* A frame from the agent for a STREAM_EXEC's process. Until it starts,
 * the client that asked hears the answer; then the stream. */
static void stream_from_agent(shim *s, shim_route *r, al_frame *f, int live)
{
	al_err err = {0};
	if (r->stream >= 0) {
		shim_stream_frame(s, r->stream, f);
		return;
	}
	if (f->type != AL_F_STARTED) {
		/* Refused to start (forwarded), or output nobody reads any
		 * more (a background process's after its stream closed). */
		if (live && f->type == AL_F_ERROR)
			shim_client_send(s, r->client, f->type, r->client_id,
					 f->payload, f->len);
		return;
	}
	al_err perr;
	json_object *o = al_json_parse_object((const char *)f->payload, f->len,
					      &perr);
	json_object *pid = NULL;
	int64_t p = 0;
	if (o != NULL && json_object_is_type(o, json_type_object) &&
	    json_object_object_get_ex(o, "pid", &pid) &&
	    json_object_is_type(pid, json_type_int))
		p = json_object_get_int64(pid);
	json_object_put(o);
	int k = shim_stream_begin(s, r, p, &err);
	char *txt = k >= 0 ? al_stream_token_pack(s->streams[k].token, &err)
			   : NULL;
	if (txt == NULL) {
		al_warn("sandbox %s: stream: %s", s->sb.id, err.msg);
		shim_agent_kill(s, r->agent_id);
		if (live)
			shim_client_fail(s, r->client, r->client_id, err.code,
					 err.msg);
		return;
	}
	if (live)
		shim_client_send(s, r->client, AL_F_RESULT, r->client_id, txt,
				 strlen(txt));
	free(txt);
}

/* A frame from client i. */
static void from_client(shim *s, int i, al_frame *f)
{
	al_err err = {0};
	shim_route *r;
	if (s->standby && f->type != AL_F_STATUS && f->type != AL_F_CLAIM &&
	    f->type != AL_F_DESTROY) {
		shim_client_fail(s, i, f->id, AL_ESTATE,
				 "a standby serves no requests until claimed");
		return;
	}
	switch (f->type) {
	case AL_F_STATUS:
		status_reply(s, i, f->id);
		return;
	case AL_F_CLAIM:
		claim(s, i, f);
		return;
	case AL_F_DESTROY:
		s->destroy_client = i;
		s->destroy_id = f->id;
		s->stopping = 1;
		return;
	case AL_F_STREAMS:
		streams_reply(s, i, f);
		return;
	case AL_F_STREAM_EXEC:
		stream_exec(s, i, f);
		return;
	case AL_F_NETWORK:
		shim_netctl_request(s, i, f);
		return;
	case AL_F_PAUSE:
	case AL_F_RESUME:
	case AL_F_SUSPEND:
	case AL_F_SNAPSHOT:
		shim_lifecycle_request(s, i, f);
		return;
	case AL_F_EXEC:
	case AL_F_FILE_READ:
	case AL_F_FILE_WRITE:
	case AL_F_FILE_LIST:
		if (shim_route_by_client(s, i, f->id) != NULL) {
			shim_client_fail(s, i, f->id, AL_EINVAL,
					 "request id already in use");
			return;
		}
		r = shim_route_add(s, f->type, i, f->id);
		if (r == NULL) {
			shim_client_fail(s, i, f->id, AL_ENOMEM,
					 "out of memory");
			return;
		}
		if (f->type == AL_F_EXEC) {
			al_exec_msg m;
			char *req = al_exec_unpack(f->payload, f->len, &m,
						   &err) == 0
					    ? shim_exec_defaults(s, &m, &err)
					    : NULL;
			al_exec_msg_free(&m);
			int rc = req != NULL
					 ? shim_agent_send(s, f->type,
							   r->agent_id, req,
							   strlen(req), &err)
					 : -1;
			free(req);
			if (rc < 0) {
				shim_client_fail(s, i, f->id, err.code,
						 err.msg);
				shim_route_del(s, r);
			}
			return;
		}
		if (shim_agent_send(s, f->type, r->agent_id, f->payload, f->len,
				    &err) < 0) {
			shim_client_fail(s, i, f->id, err.code, err.msg);
			shim_route_del(s, r);
		}
		return;
	case AL_F_STDIN:
	case AL_F_SIGNAL:
	case AL_F_FILE_DATA:
	case AL_F_FILE_END:
		r = shim_route_by_client(s, i, f->id);
		if (r == NULL) {
			shim_client_fail(s, i, f->id, AL_ENOENT,
					 "no such request");
			return;
		}
		if (shim_agent_send(s, f->type, r->agent_id, f->payload, f->len,
				    &err) < 0)
			shim_client_fail(s, i, f->id, err.code, err.msg);
		return;
	default:
		shim_client_fail(
			s, i, f->id, AL_EINVAL,
			"frame type not accepted on the control socket");
		return;
	}
}

static int ends_request(const shim_route *r, uint16_t type)
{
	if (type == AL_F_EXIT || type == AL_F_ERROR)
		return 1;
	if (type == AL_F_RESULT)
		return r->kind != AL_F_STREAM_EXEC;
	return type == AL_F_FILE_END && r->kind == AL_F_FILE_READ;
}

/* A frame from the agent: route it back to the client that asked. Frames
 * for unknown ids are dropped (late, or a hostile guest). */
static void from_agent(shim *s, al_frame *f)
{
	if (f->id == 0) {
		if (f->type == AL_F_ERROR)
			al_warn("sandbox %s: agent reported a session error",
				s->sb.id);
		return;
	}
	if (shim_lifecycle_from_agent(s, f))
		return;
	shim_route *r = shim_route_find(s, f->id);
	if (r == NULL)
		return;
	int live = r->client >= 0 && s->clients[r->client].fd >= 0 &&
		   s->clients[r->client].gen == r->client_gen;
	if (r->kind == AL_F_STREAM_EXEC)
		stream_from_agent(s, r, f, live);
	else if (live)
		shim_client_send(s, r->client, f->type, r->client_id,
				 f->payload, f->len);
	if (ends_request(r, f->type))
		shim_route_del(s, r);
}

int shim_relay_add_client(shim *s, int fd)
{
	for (int i = 0; i < SHIM_MAX_CLIENTS; i++) {
		shim_client *c = &s->clients[i];
		if (c->fd >= 0)
			continue;
		c->fd = fd;
		al_frame_reader_init(&c->in);
		al_buf_init(&c->out, SHIM_CLIENT_QUEUE_MAX);
		return i;
	}
	al_warn("sandbox %s: too many control connections", s->sb.id);
	close(fd);
	return -1;
}

static void accept_clients(shim *s)
{
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		shim_relay_add_client(s, fd);
	}
}

static void read_client(shim *s, int i)
{
	al_err err = {0};
	shim_client *c = &s->clients[i];
	int rc = al_frame_reader_fill(&c->in, c->fd, &err);
	if (rc <= 0) {
		shim_client_drop(s, i);
		return;
	}
	for (;;) {
		al_frame f;
		int n = al_frame_next(&c->in, &f, &err);
		if (n < 0) {
			al_warn("sandbox %s: client %d: %s", s->sb.id, i,
				err.msg);
			shim_client_drop(s, i);
			return;
		}
		if (n == 0)
			return;
		from_client(s, i, &f);
		al_frame_free(&f);
		if (c->fd < 0 || s->stopping)
			return;
	}
}

/* Why the machine ended with wait status: a SIGKILL is looked up in its
 * memory cgroup (still there until the shim stops the driver), which
 * counts the kernel OOM killer's kills. */
static void machine_end(shim *s, int status, char *detail, size_t dlen)
{
	al_cgroup_memory mem;
	const al_cgroup_memory *m = NULL;
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
		al_err err = {0};
		if (al_cgroup_memory_read(s->sb.id, &mem, &err) == 0)
			m = &mem;
		else
			al_warn("sandbox %s: %s", s->sb.id, err.msg);
	}
	al_machine_end_reason(s->driver->init_name, status, m,
			      s->sb.limits.memory_bytes, detail, dlen);
}

/* The channel ended: when the machine itself is gone (a QEMU that died,
 * a jail whose init exited) that is the reason to record, and it usually
 * follows within moments. */
static void machine_exit_reason(shim *s, char *detail, size_t dlen)
{
	for (int i = 0; i < 20 && s->h.init_pid > 0; i++) {
		int status;
		pid_t pid = waitpid(s->h.init_pid, &status, WNOHANG);
		if (pid == s->h.init_pid) {
			machine_end(s, status, detail, dlen);
			return;
		}
		if (pid < 0)
			return;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

/* 0 to go on, 1 when the agent is gone (reason in detail). */
static int read_agent(shim *s, char *detail, size_t dlen)
{
	al_err err = {0};
	int rc = al_frame_reader_fill(&s->agent_in, s->h.agent_fd, &err);
	if (rc < 0) {
		snprintf(detail, dlen, "agent channel failed: %s", err.msg);
		machine_exit_reason(s, detail, dlen);
		return 1;
	}
	if (rc == 0) {
		snprintf(detail, dlen, "agent closed its channel");
		machine_exit_reason(s, detail, dlen);
		return 1;
	}
	for (;;) {
		al_frame f;
		int n = al_frame_next(&s->agent_in, &f, &err);
		if (n < 0) {
			snprintf(detail, dlen, "agent broke the protocol: %s",
				 err.msg);
			return 1;
		}
		if (n == 0)
			return 0;
		from_agent(s, &f);
		al_frame_free(&f);
	}
}

/* 0 to go on, 1 when the shim must end (reason/event filled). */
static int read_signals(shim *s, al_event *ev, char *detail, size_t dlen)
{
	struct signalfd_siginfo si;
	while (read(s->sig_fd, &si, sizeof si) == (ssize_t)sizeof si) {
		if (si.ssi_signo != SIGCHLD) {
			*ev = AL_EV_DELETE;
			snprintf(detail, dlen, "shim stopped by signal %u",
				 si.ssi_signo);
			return 1;
		}
		int status;
		pid_t pid;
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
			if (pid != s->h.init_pid)
				continue;
			*ev = AL_EV_FAIL;
			machine_end(s, status, detail, dlen);
			return 1;
		}
	}
	return 0;
}

static void flush_all(shim *s)
{
	al_err err = {0};
	if (s->h.agent_fd >= 0 && al_buf_pending(&s->agent_out) > 0) {
		if (s->pause.holding)
			al_buf_flush_max(&s->agent_out, s->h.agent_fd,
					 &s->pause.hold_left, &err);
		else
			al_buf_flush(&s->agent_out, s->h.agent_fd, &err);
	}
	for (int i = 0; i < SHIM_MAX_CLIENTS; i++) {
		shim_client *c = &s->clients[i];
		if (c->fd >= 0 && al_buf_pending(&c->out) > 0 &&
		    al_buf_flush(&c->out, c->fd, &err) < 0)
			shim_client_drop(s, i);
	}
	shim_streams_flush(s);
}

static void finish_destroy(shim *s)
{
	int i = s->destroy_client;
	if (i >= 0 && s->clients[i].fd >= 0) {
		al_err err = {0};
		/* Sent directly (al_frame_send waits for the fd) so the reply
		 * is not lost when the process exits right after. */
		al_frame_send(s->clients[i].fd, AL_F_RESULT, s->destroy_id,
			      "{}", 2, &err);
	}
}

/* Flow control: busy[i] = client i has a request in flight on the agent
 * channel (only such a client feeds the agent's queue); the result says
 * whether any client is behind on its queue, which pauses the agent. */
static int mark_busy(const shim *s, unsigned char *busy)
{
	memset(busy, 0, SHIM_MAX_CLIENTS);
	for (const shim_route *r = s->routes; r != NULL; r = r->next)
		if (r->client >= 0 &&
		    r->client_gen == s->clients[r->client].gen)
			busy[r->client] = 1;
	for (int i = 0; i < SHIM_MAX_CLIENTS; i++) {
		const shim_client *c = &s->clients[i];
		if (c->fd >= 0 &&
		    al_buf_pending(&c->out) >= SHIM_CLIENT_QUEUE_HIGH)
			return 1;
	}
	return shim_streams_behind(s);
}

int shim_relay_turn(shim *s, int timeout_ms, al_event *ev, char *detail,
		    size_t dlen)
{
	unsigned char busy[SHIM_MAX_CLIENTS];
	struct pollfd pfd[4 + SHIM_MAX_CLIENTS + SHIM_STREAM_POLL_MAX +
			  SHIM_GWPROC_POLL_MAX];
	int who[4 + SHIM_MAX_CLIENTS + SHIM_STREAM_POLL_MAX +
		SHIM_GWPROC_POLL_MAX];

	flush_all(s);
	int n = 0;
	pfd[n] = (struct pollfd){.fd = s->sig_fd, .events = POLLIN};
	who[n++] = -1;
	pfd[n] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
	who[n++] = -2;
	int agent_behind = al_buf_pending(&s->agent_out) >=
			   SHIM_AGENT_QUEUE_HIGH;
	short aev = mark_busy(s, busy) ? 0 : POLLIN;
	if (al_buf_pending(&s->agent_out) > 0 &&
	    (!s->pause.holding || s->pause.hold_left > 0))
		aev |= POLLOUT;
	pfd[n] = (struct pollfd){.fd = s->h.agent_fd, .events = aev};
	who[n++] = -3;
	for (int i = 0; i < SHIM_MAX_CLIENTS; i++) {
		shim_client *c = &s->clients[i];
		if (c->fd < 0)
			continue;
		short cev = agent_behind && busy[i] ? 0 : POLLIN;
		if (al_buf_pending(&c->out) > 0)
			cev |= POLLOUT;
		pfd[n] = (struct pollfd){.fd = c->fd, .events = cev};
		who[n++] = i;
	}
	n = shim_streams_poll(s, pfd, who, n);
	n = shim_netctl_poll(s, pfd, who, n);
	n = shim_gwproc_poll(&s->gwproc, pfd, who, n);
	int timer = shim_streams_timeout(s, al_now_ms());
	if (timer >= 0 && (timeout_ms < 0 || timer < timeout_ms))
		timeout_ms = timer;
	timer = shim_netctl_timeout(s, al_now_ms());
	if (timer >= 0 && (timeout_ms < 0 || timer < timeout_ms))
		timeout_ms = timer;
	timer = shim_gwproc_timeout(&s->gwproc, al_now_ms());
	if (timer >= 0 && (timeout_ms < 0 || timer < timeout_ms))
		timeout_ms = timer;
	timer = shim_lifecycle_timeout(s, al_now_ms());
	if (timer >= 0 && (timeout_ms < 0 || timer < timeout_ms))
		timeout_ms = timer;
	if (poll(pfd, (nfds_t)n, timeout_ms) < 0) {
		if (errno == EINTR)
			return 0;
		snprintf(detail, dlen, "poll: %s", strerror(errno));
		*ev = AL_EV_FAIL;
		s->stopping = 1;
		return 1;
	}
	for (int k = 0; k < n && !s->stopping; k++) {
		if (pfd[k].revents == 0)
			continue;
		if (who[k] == -1) {
			if (read_signals(s, ev, detail, dlen))
				s->stopping = 1;
		} else if (who[k] == -2) {
			accept_clients(s);
		} else if (who[k] == SHIM_WHO_GW) {
			shim_netctl_event(s, pfd[k].revents);
		} else if (who[k] == SHIM_WHO_GWPROC) {
			int died = 0;
			int fd = shim_gwproc_event(&s->gwproc, pfd[k].revents,
						   &died);
			if (died)
				shim_netctl_detach(s, "the gateway ended");
			shim_netctl_started(s, fd);
		} else if (who[k] == SHIM_WHO_HTTP_LISTEN ||
			   who[k] >= SHIM_WHO_STREAM) {
			shim_streams_event(s, who[k], pfd[k].revents);
		} else if (who[k] == -3) {
			if ((pfd[k].revents & (POLLIN | POLLHUP | POLLERR)) &&
			    read_agent(s, detail, dlen)) {
				*ev = AL_EV_FAIL;
				s->stopping = 1;
			}
		} else {
			int i = who[k];
			if (s->clients[i].fd < 0)
				continue;
			if ((pfd[k].events & POLLIN) == 0 &&
			    (pfd[k].revents & (POLLHUP | POLLERR)))
				/* Gone while paused: what it sent last is
				 * abandoned with it. */
				shim_client_drop(s, i);
			else if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR))
				read_client(s, i);
		}
	}
	shim_streams_tick(s, al_now_ms());
	shim_netctl_tick(s, al_now_ms());
	shim_lifecycle_tick(s, al_now_ms());
	shim_netctl_started(s, shim_gwproc_tick(&s->gwproc, al_now_ms()));
	return s->stopping;
}

void shim_relay_finish(shim *s, al_event ev, const char *detail)
{
	char why[600];
	snprintf(why, sizeof why, "%s", detail);
	if (s->destroy_client >= 0) {
		ev = AL_EV_DELETE;
		snprintf(why, sizeof why, "deleted");
	} else if (s->pause.suspended) {
		ev = AL_EV_SUSPEND;
		snprintf(why, sizeof why, "suspended to snapshot %s",
			 s->pause.snapshot);
	}
	/* Tell every waiting client the sandbox is gone before tearing down. */
	for (shim_route *r = s->routes; r != NULL; r = r->next)
		if (r->client >= 0 && s->clients[r->client].fd >= 0 &&
		    s->clients[r->client].gen == r->client_gen &&
		    r->client != s->destroy_client)
			shim_client_fail(s, r->client, r->client_id, AL_ESTATE,
					 "the sandbox ended");
	shim_streams_finish(s);
	shim_netctl_detach(s, "the sandbox ended");
	flush_all(s);
	shim_teardown(s, ev, why);
	finish_destroy(s);
	while (s->routes != NULL)
		shim_route_del(s, s->routes);
	for (int i = 0; i < SHIM_MAX_CLIENTS; i++)
		shim_client_drop(s, i);
	al_frame_reader_free(&s->agent_in);
	al_buf_free(&s->agent_out);
}

int shim_relay_run(shim *s)
{
	char detail[600] = "";
	al_event ev = AL_EV_DELETE;

	while (shim_relay_turn(s, -1, &ev, detail, sizeof detail) == 0)
		;
	shim_relay_finish(s, ev, detail);
	return 0;
}
