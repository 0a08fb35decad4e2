#include "vm/qmp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/log.h"
#include "proto/agentproto.h"

struct al_qmp {
	int fd;
	int broken; /* a call failed midway: replies may be out of step */
	int64_t next_id;
	size_t len; /* bytes held in buf */
	char buf[AL_QMP_LINE_MAX];
};

static int wait_fd(int fd, short events, int64_t deadline_ms, al_err *err)
{
	for (;;) {
		int64_t left = deadline_ms - al_now_ms();
		if (left <= 0)
			return al_err_set(err, AL_ETIMEDOUT, 0,
					  "qmp: QEMU did not answer in time");
		struct pollfd p = {.fd = fd, .events = events};
		int rc = poll(&p, 1, left > 1000 ? 1000 : (int)left);
		if (rc < 0 && errno != EINTR)
			return al_err_sys(err, AL_ESYS, errno, "qmp: poll");
		if (rc > 0)
			return 0;
	}
}

int al_qmp_parse_reply(const char *line, size_t len, json_object **out,
		       int64_t *id, al_err *err)
{
	*out = NULL;
	*id = -1;
	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (len == 0)
		return al_err_set(err, AL_EPROTO, 0, "qmp: empty reply");
	al_err perr;
	json_object *o = al_json_parse_object(line, len, &perr);
	if (o == NULL)
		return al_err_set(err, AL_EPROTO, 0, "qmp: malformed reply: %s",
				  perr.msg);
	int rc = -1;
	json_object *v;
	if (json_object_object_get_ex(o, "id", &v)) {
		if (!json_object_is_type(v, json_type_int)) {
			al_err_set(err, AL_EPROTO, 0, "qmp: reply id not int");
			goto out;
		}
		*id = json_object_get_int64(v);
	}
	if (json_object_object_get_ex(o, "QMP", &v)) {
		rc = json_object_is_type(v, json_type_object)
			     ? AL_QMP_GREETING
			     : al_err_set(err, AL_EPROTO, 0,
					  "qmp: malformed greeting");
	} else if (json_object_object_get_ex(o, "event", &v)) {
		rc = json_object_is_type(v, json_type_string)
			     ? AL_QMP_EVENT
			     : al_err_set(err, AL_EPROTO, 0,
					  "qmp: malformed event");
	} else if (json_object_object_get_ex(o, "return", &v)) {
		/* A JSON null would read as failure to callers. */
		*out = v != NULL ? json_object_get(v)
				 : json_object_new_object();
		rc = *out != NULL ? AL_QMP_RETURN
				  : al_err_set(err, AL_ENOMEM, 0,
					       "qmp: out of memory");
	} else if (json_object_object_get_ex(o, "error", &v) &&
		   json_object_is_type(v, json_type_object)) {
		json_object *cls = NULL, *desc = NULL;
		json_object_object_get_ex(v, "class", &cls);
		json_object_object_get_ex(v, "desc", &desc);
		if (!json_object_is_type(cls, json_type_string) ||
		    !json_object_is_type(desc, json_type_string))
			al_err_set(err, AL_EPROTO, 0, "qmp: malformed error");
		else
			al_err_set(err, AL_EINTERNAL, 0, "qemu: %.64s: %.300s",
				   json_object_get_string(cls),
				   json_object_get_string(desc));
	} else {
		al_err_set(err, AL_EPROTO, 0, "qmp: unknown reply");
	}
out:
	json_object_put(o);
	return rc;
}

/* Next complete line into *line (valid until the next read). */
static int read_line(al_qmp *q, size_t *used, int64_t deadline_ms, al_err *err)
{
	for (;;) {
		char *nl = memchr(q->buf, '\n', q->len);
		if (nl != NULL) {
			*used = (size_t)(nl - q->buf) + 1;
			return 0;
		}
		if (q->len == sizeof q->buf)
			return al_err_set(err, AL_EPROTO, 0,
					  "qmp: reply longer than %u bytes",
					  AL_QMP_LINE_MAX);
		ssize_t n = read(q->fd, q->buf + q->len,
				 sizeof q->buf - q->len);
		if (n > 0) {
			q->len += (size_t)n;
			continue;
		}
		if (n == 0)
			return al_err_set(err, AL_EPROTO, 0,
					  "qmp: QEMU closed the connection");
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return al_err_sys(err, AL_EPROTO, errno, "qmp: read");
		if (wait_fd(q->fd, POLLIN, deadline_ms, err) < 0)
			return -1;
	}
}

static void drop_line(al_qmp *q, size_t used)
{
	memmove(q->buf, q->buf + used, q->len - used);
	q->len -= used;
}

static int send_all(al_qmp *q, const char *s, size_t n, int pass_fd,
		    int64_t deadline_ms, al_err *err)
{
	while (n > 0) {
		ssize_t w;
		if (pass_fd >= 0) {
			union {
				char b[CMSG_SPACE(sizeof(int))];
				struct cmsghdr align;
			} ctl;
			memset(&ctl, 0, sizeof ctl);
			struct iovec iov = {.iov_base = (void *)s,
					    .iov_len = n};
			struct msghdr m = {.msg_iov = &iov,
					   .msg_iovlen = 1,
					   .msg_control = ctl.b,
					   .msg_controllen = sizeof ctl.b};
			struct cmsghdr *c = CMSG_FIRSTHDR(&m);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
			w = sendmsg(q->fd, &m, MSG_NOSIGNAL);
		} else {
			w = send(q->fd, s, n, MSG_NOSIGNAL);
		}
		if (w > 0) {
			/* The fd went with the first byte. */
			pass_fd = -1;
			s += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno != EAGAIN)
			return al_err_sys(err, AL_EPROTO, errno, "qmp: send");
		if (wait_fd(q->fd, POLLOUT, deadline_ms, err) < 0)
			return -1;
	}
	return 0;
}

/* Wait for the answer with the given id (-1: the first non-event line). */
static json_object *await(al_qmp *q, int64_t want_id, int greeting,
			  int64_t deadline_ms, al_err *err)
{
	for (;;) {
		size_t used = 0;
		if (read_line(q, &used, deadline_ms, err) < 0)
			return NULL;
		json_object *ret;
		int64_t id;
		al_err perr;
		int rc = al_qmp_parse_reply(q->buf, used - 1, &ret, &id, &perr);
		drop_line(q, used);
		if (rc == AL_QMP_EVENT)
			continue;
		if (greeting) {
			if (rc == AL_QMP_GREETING)
				return json_object_new_object();
			if (rc < 0)
				*err = perr;
			else
				al_err_set(err, AL_EPROTO, 0,
					   "qmp: expected the greeting");
			json_object_put(ret);
			return NULL;
		}
		if (id != want_id) {
			/* Not ours: QEMU answers in order, so this cannot
			 * happen on a healthy connection. */
			json_object_put(ret);
			al_err_set(err, AL_EPROTO, 0,
				   "qmp: reply for id %lld, expected %lld",
				   (long long)id, (long long)want_id);
			return NULL;
		}
		if (rc == AL_QMP_RETURN)
			return ret;
		if (rc < 0) {
			*err = perr;
			return NULL;
		}
		al_err_set(err, AL_EPROTO, 0, "qmp: unexpected greeting");
		return NULL;
	}
}

json_object *al_qmp_exec(al_qmp *q, const char *cmd, json_object *args, int fd,
			 int64_t deadline_ms, al_err *err)
{
	if (q->broken) {
		al_err_set(err, AL_EPROTO, 0,
			   "qmp: connection unusable after an earlier failure");
		return NULL;
	}
	json_object *m = json_object_new_object();
	if (m == NULL) {
		al_err_set(err, AL_ENOMEM, 0, "qmp: out of memory");
		return NULL;
	}
	int64_t id = q->next_id++;
	json_object_object_add(m, "execute", json_object_new_string(cmd));
	if (args != NULL)
		json_object_object_add(m, "arguments", json_object_get(args));
	json_object_object_add(m, "id", json_object_new_int64(id));
	size_t n = 0;
	const char *s = json_object_to_json_string_length(
		m, JSON_C_TO_STRING_PLAIN, &n);
	json_object *ret = NULL;
	al_err e;
	if (s == NULL) {
		al_err_set(&e, AL_ENOMEM, 0, "qmp: out of memory");
	} else if (send_all(q, s, n, fd, deadline_ms, &e) == 0) {
		ret = await(q, id, 0, deadline_ms, &e);
	}
	json_object_put(m);
	if (ret == NULL) {
		/* A failed command leaves the stream in step; anything else
		 * (timeout, garbage) may not. */
		if (e.code != AL_EINTERNAL)
			q->broken = 1;
		*err = e;
		al_err_wrap(err, "%s", cmd);
	}
	return ret;
}

int al_qmp_run(al_qmp *q, const char *cmd, json_object *args,
	       int64_t deadline_ms, al_err *err)
{
	json_object *r = al_qmp_exec(q, cmd, args, -1, deadline_ms, err);
	if (r == NULL)
		return -1;
	json_object_put(r);
	return 0;
}

al_qmp *al_qmp_connect(const char *path, int64_t deadline_ms, al_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof sa.sun_path) {
		al_err_set(err, AL_EINVAL, 0, "qmp: socket path too long");
		return NULL;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	al_autofd int fd = -1;
	for (;;) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    0);
		if (fd < 0) {
			al_err_sys(err, AL_ESYS, errno, "qmp: socket");
			return NULL;
		}
		if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
			break;
		int e = errno;
		close(fd);
		fd = -1;
		if (e != ENOENT && e != ECONNREFUSED && e != EAGAIN) {
			al_err_sys(err, AL_EUNAVAIL, e, "qmp: connect %s",
				   path);
			return NULL;
		}
		if (al_now_ms() >= deadline_ms) {
			al_err_sys(err, AL_ETIMEDOUT, e, "qmp: connect %s",
				   path);
			return NULL;
		}
		struct timespec ts = {0, 2 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return al_qmp_open_fd(al_steal_fd(&fd), deadline_ms, err);
}

al_qmp *al_qmp_open_fd(int fd, int64_t deadline_ms, al_err *err)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		al_err_sys(err, AL_ESYS, errno, "qmp: O_NONBLOCK");
		close(fd);
		return NULL;
	}
	al_qmp *q = malloc(sizeof *q);
	if (q == NULL) {
		close(fd);
		al_err_set(err, AL_ENOMEM, 0, "qmp: out of memory");
		return NULL;
	}
	q->fd = fd;
	q->broken = 0;
	q->next_id = 1;
	q->len = 0;
	json_object *g = await(q, -1, 1, deadline_ms, err);
	if (g == NULL) {
		al_qmp_close(q);
		return NULL;
	}
	json_object_put(g);
	if (al_qmp_run(q, "qmp_capabilities", NULL, deadline_ms, err) < 0) {
		al_qmp_close(q);
		return NULL;
	}
	return q;
}

void al_qmp_close(al_qmp *q)
{
	if (q == NULL)
		return;
	close(q->fd);
	free(q);
}
