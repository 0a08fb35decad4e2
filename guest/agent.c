/* airlock-agent: runs processes and moves files inside a sandbox for the
 * host, over one framed channel (core/proto/agentproto.h).
 *
 *   airlock-agent [--fd N | --port /dev/vport0p1]
 *
 * The channel is an already-connected stream socket on fd N (default 3,
 * the jail) or a virtio-serial character device (the VM). The agent may
 * be PID 1 of a pid namespace: it reaps every child, orphans included,
 * and ignores the signals a process inside the sandbox could use to take
 * it down. It is not the security boundary (the jail or VM is), but no
 * input may crash it.
 *
 * Exit codes: 0 the host closed the channel, 100 usage or the host broke
 * the framing, 111 a system call needed to run failed. */
#include "agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/random.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/hex.h"
#include "base/log.h"
#include "nic.h"

static void die(int code, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 2, 3)));

static void die(int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	al_error("%s", msg);
	exit(code);
}

/* ---- outgoing frames ---- */

void agent_send(agent *a, uint16_t type, uint32_t id, const void *p, size_t len)
{
	al_err err;
	if (al_frame_encode(&a->out, type, id, p, len, &err) < 0)
		die(111, "queueing %s frame for the host: %s",
		    al_frame_type_name(type), err.msg);
}

void agent_send_json(agent *a, uint16_t type, uint32_t id, json_object *o)
{
	size_t len = 0;
	const char *s = json_object_to_json_string_length(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE,
		&len);
	if (s == NULL)
		die(111, "out of memory serializing a %s frame",
		    al_frame_type_name(type));
	agent_send(a, type, id, s, len);
}

static void send_error_msg(agent *a, uint32_t id, al_code code, const char *msg)
{
	al_err err;
	char *s = al_error_pack(code, msg, &err);
	if (s == NULL)
		die(111, "%s", err.msg);
	agent_send(a, AL_F_ERROR, id, s, strlen(s));
	free(s);
}

void agent_send_error(agent *a, uint32_t id, al_code code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	send_error_msg(a, id, code, msg);
}

void agent_send_err(agent *a, uint32_t id, const al_err *err)
{
	send_error_msg(a, id, err->code, err->msg);
}

bool agent_out_full(const agent *a)
{
	return al_buf_pending(&a->out) >= AGENT_OUT_HIGH;
}

/* ---- requests ---- */

agent_req *agent_req_find(agent *a, uint32_t id)
{
	for (agent_req *r = a->reqs; r != NULL; r = r->next)
		if (r->id == id)
			return r;
	return NULL;
}

agent_req *agent_req_new(agent *a, uint32_t id, enum agent_req_kind kind,
			 al_err *err)
{
	if (id == 0) {
		al_err_set(err, AL_EINVAL, 0, "request id 0 is reserved");
		return NULL;
	}
	if (agent_req_find(a, id) != NULL) {
		al_err_set(err, AL_EEXIST, 0, "request id %u is already live",
			   id);
		return NULL;
	}
	if (a->nreqs >= AGENT_MAX_REQS) {
		al_err_set(err, AL_ESTATE, 0,
			   "too many live requests (%d at most)",
			   AGENT_MAX_REQS);
		return NULL;
	}
	agent_req *r = calloc(1, sizeof *r);
	if (r == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		return NULL;
	}
	r->kind = kind;
	r->id = id;
	r->out_fd = r->err_fd = r->in_fd = r->fd = -1;
	r->pid = -1;
	al_buf_init(&r->inq, AGENT_STDIN_HIGH + AL_FRAME_MAX_PAYLOAD);
	r->next = a->reqs;
	a->reqs = r;
	a->nreqs++;
	return r;
}

void agent_req_remove(agent *a, agent_req *r)
{
	for (agent_req **pp = &a->reqs; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			a->nreqs--;
			break;
		}
	}
	if (r->kind == REQ_PROC)
		agent_exec_free(r);
	else
		agent_file_free(r);
	al_buf_free(&r->inq);
	free(r);
}

/* ---- request payloads ---- */

json_object *agent_parse_obj(const al_frame *f, al_err *err)
{
	/* Depth 16 is plenty for every request and keeps a hostile nesting
	 * from costing stack or memory. */
	struct json_tokener *tok = json_tokener_new_ex(16);
	if (tok == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		return NULL;
	}
	json_object *o = json_tokener_parse_ex(tok, (const char *)f->payload,
					       (int)f->len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (o == NULL || jerr != json_tokener_success) {
		json_object_put(o);
		al_err_set(err, AL_EINVAL, 0, "%s payload is not valid JSON",
			   al_frame_type_name(f->type));
		return NULL;
	}
	for (; end < f->len; end++) {
		char c = (char)f->payload[end];
		if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
			json_object_put(o);
			al_err_set(err, AL_EINVAL, 0,
				   "%s payload has trailing bytes",
				   al_frame_type_name(f->type));
			return NULL;
		}
	}
	if (!json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		al_err_set(err, AL_EINVAL, 0, "%s payload is not a JSON object",
			   al_frame_type_name(f->type));
		return NULL;
	}
	return o;
}

int agent_get_str(json_object *o, const char *key, bool required,
		  const char **out, al_err *err)
{
	json_object *v;
	*out = NULL;
	if (!json_object_object_get_ex(o, key, &v) || v == NULL) {
		if (required)
			return al_err_set(err, AL_EINVAL, 0,
					  "field \"%s\" is required", key);
		return 0;
	}
	if (!json_object_is_type(v, json_type_string))
		return al_err_set(err, AL_EINVAL, 0,
				  "field \"%s\" must be a string", key);
	const char *s = json_object_get_string(v);
	if (strlen(s) != (size_t)json_object_get_string_len(v))
		return al_err_set(err, AL_EINVAL, 0,
				  "field \"%s\" contains a NUL byte", key);
	*out = s;
	return 0;
}

int agent_check_path(const char *path, al_err *err)
{
	if (path[0] != '/')
		return al_err_set(err, AL_EPATH, 0, "path must be absolute");
	if (strlen(path) >= PATH_MAX)
		return al_err_set(err, AL_EPATH, 0, "path is too long");
	return 0;
}

al_code agent_code_from_errno(int e)
{
	switch (e) {
	case ENOENT:
		return AL_ENOENT;
	case ENOTDIR:
	case EISDIR:
	case ENAMETOOLONG:
	case ELOOP:
	case EINVAL:
		return AL_EPATH;
	case EACCES:
	case EPERM:
	case EROFS:
		return AL_EPERM;
	case EEXIST:
		return AL_EEXIST;
	case ENOMEM:
		return AL_ENOMEM;
	default:
		return AL_ESYS;
	}
}

/* ---- identity (vm restore) ---- */

/* IDENTITY: a machine restored from a template snapshot, a warm
 * standby being claimed, or a machine resumed from a capture (each fork
 * child of one), takes the sandbox's hostname, fresh entropy (the RNG
 * reseeded from it at once),
 * the host's clock and, when "mac" is given (the vm driver always sends
 * it; the ns driver never does), its NIC's MAC, and then, when "net" is
 * given, the NIC's network again (the MAC change took the link down,
 * which dropped its default route). Everything is validated before
 * anything is applied; the first privileged call that fails ends it
 * with ERROR (forbidden in a jail, where none of this is allowed). */
static void identity(agent *a, const al_frame *f)
{
	al_err err;
	if (agent_req_find(a, f->id) != NULL) {
		al_warn("ignoring IDENTITY for live request %u", f->id);
		return;
	}
	al_vm_identity id;
	uint8_t seed[32], mac[6];
	al_nic_net net = {0};
	if (al_vm_identity_unpack(f->payload, f->len, &id, &err) < 0) {
		agent_send_err(a, f->id, &err);
		return;
	}
	if (id.mac[0] != '\0' && !agent_nic_mac_parse(id.mac, mac)) {
		al_err_set(
			&err, AL_EINVAL, 0,
			"mac must be a unicast xx:xx:xx:xx:xx:xx, lowercase");
		goto bad;
	}
	if (id.net[0] != '\0' && !agent_nic_net_parse(id.net, &net)) {
		al_err_set(&err, AL_EINVAL, 0,
			   "net must be \"a.b.c.d/len,gateway\" or \"none\"");
		goto bad;
	}
	const char *host = id.hostname;
	size_t hl = strlen(host);
	bool host_ok = hl >= 1 && hl <= 63 && host[0] != '-';
	for (size_t i = 0; host_ok && i < hl; i++)
		host_ok = (host[i] >= 'a' && host[i] <= 'z') ||
			  (host[i] >= '0' && host[i] <= '9') || host[i] == '-';
	if (!host_ok) {
		al_err_set(&err, AL_EINVAL, 0,
			   "hostname must be 1-63 of [a-z0-9-]");
		goto bad;
	}
	if (strlen(id.entropy) != 2 * sizeof seed ||
	    al_hex_decode_lower(id.entropy, sizeof seed, seed) < 0) {
		al_err_set(&err, AL_EINVAL, 0,
			   "entropy must be 64 lowercase hex digits");
		goto bad;
	}

	struct timespec ts = {.tv_sec = id.time_ms / 1000,
			      .tv_nsec = (id.time_ms % 1000) * 1000000L};
	/* The MAC first: it is the one change that can fail for want of a
	 * device rather than of privilege, and then nothing else changed. */
	const char *what = "setting the MAC";
	int rc = 0;
	char nic[IF_NAMESIZE];
	if (id.mac[0] != '\0' || net.on) {
		if (!agent_nic_find(nic)) {
			errno = ENODEV;
			rc = -1;
		}
	}
	const char *step;
	if (rc == 0 && id.mac[0] != '\0')
		rc = agent_nic_set_mac(nic, mac, &step);
	if (rc == 0 && net.on) {
		what = "configuring the network";
		rc = agent_nic_net_apply(nic, &net, &step);
	}
	if (rc == 0) {
		what = "clock_settime";
		rc = clock_settime(CLOCK_REALTIME, &ts);
	}
	if (rc == 0) {
		struct {
			int entropy_count;
			int buf_size;
			uint8_t buf[32];
		} req = {.entropy_count = 8 * 32, .buf_size = 32};
		memcpy(req.buf, seed, sizeof seed);
		what = "reseeding the kernel RNG";
		int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
		rc = fd < 0 ? -1 : ioctl(fd, RNDADDENTROPY, &req);
		/* Mixed in is not used yet: a kernel whose RNG is ready
		 * reseeds on its own schedule (up to a minute), and until
		 * then machines resumed from one capture (a fork) would draw
		 * the same stream. Reseed now. */
		if (rc == 0)
			rc = ioctl(fd, RNDRESEEDCRNG);
		int e = errno;
		if (fd >= 0)
			close(fd);
		explicit_bzero(&req, sizeof req);
		errno = e;
	}
	if (rc == 0) {
		what = "sethostname";
		rc = sethostname(host, hl);
	}
	explicit_bzero(seed, sizeof seed);
	explicit_bzero(&id, sizeof id);
	if (rc < 0) {
		int e = errno;
		agent_send_error(a, f->id, agent_code_from_errno(e), "%s: %s",
				 what, strerror(e));
		return;
	}
	agent_send(a, AL_F_RESULT, f->id, "{}", 2);
	return;
bad:
	explicit_bzero(seed, sizeof seed);
	explicit_bzero(&id, sizeof id);
	agent_send_err(a, f->id, &err);
}

/* PAUSE: answer, then generate nothing (the loop reads no pipe, sends
 * no exit or file chunk, fires no deadline) until RESUME, so that the
 * channel stays quiet while the machine is stopped or saved. */
static void pause_agent(agent *a, const al_frame *f)
{
	if (a->paused_at == 0)
		a->paused_at = al_now_ms();
	agent_send(a, AL_F_RESULT, f->id, "{}", 2);
}

/* RESUME: deadlines move by the time paused on this clock (a vm guest's
 * stood still while it was stopped, so there it moves them by ~0). */
static void resume_agent(agent *a, const al_frame *f)
{
	if (a->paused_at != 0) {
		int64_t paused = al_now_ms() - a->paused_at;
		if (paused > 0)
			agent_exec_shift_deadlines(a, paused);
		a->paused_at = 0;
	}
	agent_send(a, AL_F_RESULT, f->id, "{}", 2);
}

/* ---- the loop ---- */

static void dispatch(agent *a, const al_frame *f)
{
	switch ((enum al_frame_type)f->type) {
	case AL_F_IDENTITY:
		identity(a, f);
		return;
	case AL_F_PAUSE:
		pause_agent(a, f);
		return;
	case AL_F_RESUME:
		resume_agent(a, f);
		return;
	case AL_F_DISK_GROW:
		agent_disk_grow(a, f);
		return;
	case AL_F_EXEC:
		agent_exec_start(a, f);
		return;
	case AL_F_STDIN:
		agent_exec_stdin(a, f);
		return;
	case AL_F_SIGNAL:
		agent_exec_signal(a, f);
		return;
	case AL_F_FILE_READ:
		agent_file_read(a, f);
		return;
	case AL_F_FILE_WRITE:
		agent_file_write(a, f);
		return;
	case AL_F_FILE_DATA:
		agent_file_data(a, f);
		return;
	case AL_F_FILE_END:
		agent_file_end(a, f);
		return;
	case AL_F_FILE_LIST:
		agent_file_list(a, f);
		return;
	case AL_F_ERROR:
		if (agent_file_abort(a, f))
			return;
		break;
	case AL_F_HELLO:
	case AL_F_STARTED:
	case AL_F_STDOUT:
	case AL_F_STDERR:
	case AL_F_EXIT:
	case AL_F_RESULT:
	case AL_F_STATUS:
	case AL_F_DESTROY:
	case AL_F_CLAIM:
	case AL_F_START:
	case AL_F_NETWORK:
	case AL_F_SUSPEND:
	case AL_F_SNAPSHOT:
	case AL_F_STREAM_EXEC:
	case AL_F_STREAMS:
	case AL_F_GW_CONFIG:
	case AL_F_GW_ACK:
	case AL_F_GW_CREDCHAN_REQ:
	case AL_F_GW_CREDCHAN:
	case AL_F_CRED_HELLO:
	case AL_F_CRED_GRANT:
	case AL_F_CRED_TAKE:
	case AL_F_CRED_USE:
	case AL_F_CRED_SET:
	case AL_F_CRED_SET_ACK:
	case AL_F_CRED_REFRESH:
	case AL_F_CRED_REFRESH_DONE:
	case AL_F_TYPE_MAX:
	default:
		/* The host's own frames: never a request to the agent. */
		break;
	}
	/* Answering with ERROR would end a live request of that id in the
	 * host's eyes; only answer ids that are not in use. */
	if (agent_req_find(a, f->id) != NULL) {
		al_warn("ignoring %s frame for live request %u",
			al_frame_type_name(f->type), f->id);
		return;
	}
	agent_send_error(a, f->id, AL_EINVAL, "%s is not a request",
			 al_frame_type_name(f->type));
}

static void protocol_violation(agent *a, const al_err *err)
{
	al_error("host broke the framing: %s", err->msg);
	/* The stream cannot be resynchronized: deliver what is queued, say
	 * why, then leave. */
	agent_send_error(a, 0, AL_EPROTO, "protocol violation: %s", err->msg);
	int64_t deadline = al_now_ms() + 1000;
	while (al_buf_pending(&a->out) > 0 && al_now_ms() < deadline) {
		int rc = al_buf_flush(&a->out, a->chan, NULL);
		if (rc != AL_AGAIN)
			break;
		struct pollfd p = {.fd = a->chan, .events = POLLOUT};
		(void)poll(&p, 1, 100);
	}
	agent_exec_kill_all(a);
	exit(100);
}

static void shutdown_agent(agent *a, const char *why)
{
	al_info("%s: stopping all processes", why);
	agent_exec_kill_all(a);
	while (a->reqs != NULL)
		agent_req_remove(a, a->reqs);
	exit(0);
}

/* Handle complete frames already received while the host queue and the
 * stdin queues have room; the rest waits in the reader. */
static void take_frames(agent *a)
{
	while (!agent_out_full(a) && !agent_exec_stdin_backlog(a)) {
		al_frame f;
		al_err err;
		int rc = al_frame_next(&a->rd, &f, &err);
		if (rc < 0) {
			if (err.code == AL_ENOMEM)
				die(111, "%s", err.msg);
			protocol_violation(a, &err);
		}
		if (rc == 0)
			return;
		dispatch(a, &f);
		al_frame_free(&f);
	}
}

enum slot_kind { SLOT_CHAN, SLOT_SIG, SLOT_OUT, SLOT_ERR, SLOT_IN };

struct slot {
	enum slot_kind kind;
	agent_req *req;
};

/* Poll set, rebuilt every round; file scope so it stays reachable (and
 * leak checkers quiet) when the agent exits from inside the loop. */
static struct pollfd *pfd;
static struct slot *slots;
static size_t room;

static void loop(agent *a)
{
	for (;;) {
		take_frames(a);
		bool paused = a->paused_at != 0;
		bool more_files = !paused && agent_file_pump(a);
		if (!paused)
			agent_exec_finish(a);

		int rc = al_buf_flush(&a->out, a->chan, NULL);
		if (rc < 0)
			shutdown_agent(a, "host channel write failed");

		size_t need = 2 + 3 * (size_t)a->nreqs;
		if (need > room) {
			struct pollfd *np = realloc(pfd, need * sizeof *np);
			if (np == NULL)
				die(111, "out of memory");
			pfd = np;
			struct slot *ns = realloc(slots, need * sizeof *ns);
			if (ns == NULL)
				die(111, "out of memory");
			slots = ns;
			room = need;
		}

		bool full = agent_out_full(a);
		nfds_t n = 0;
		pfd[n] = (struct pollfd){.fd = a->chan};
		if (!full && !agent_exec_stdin_backlog(a))
			pfd[n].events |= POLLIN;
		if (al_buf_pending(&a->out) > 0)
			pfd[n].events |= POLLOUT;
		slots[n++] = (struct slot){SLOT_CHAN, NULL};
		pfd[n] = (struct pollfd){.fd = a->sigfd, .events = POLLIN};
		slots[n++] = (struct slot){SLOT_SIG, NULL};
		for (agent_req *r = a->reqs; r != NULL; r = r->next) {
			if (r->kind != REQ_PROC || paused)
				continue;
			if (!full && r->out_fd >= 0) {
				pfd[n] = (struct pollfd){r->out_fd, POLLIN, 0};
				slots[n++] = (struct slot){SLOT_OUT, r};
			}
			if (!full && r->err_fd >= 0) {
				pfd[n] = (struct pollfd){r->err_fd, POLLIN, 0};
				slots[n++] = (struct slot){SLOT_ERR, r};
			}
			if (r->in_fd >= 0 && al_buf_pending(&r->inq) > 0) {
				pfd[n] = (struct pollfd){r->in_fd, POLLOUT, 0};
				slots[n++] = (struct slot){SLOT_IN, r};
			}
		}

		int timeout = paused ? -1 : agent_exec_timeouts(a);
		if (more_files && !full)
			timeout = 0;
		if (poll(pfd, n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			die(111, "poll: %s", strerror(errno));
		}

		for (nfds_t i = 0; i < n; i++) {
			if (pfd[i].revents == 0)
				continue;
			switch (slots[i].kind) {
			case SLOT_CHAN:
				break;
			case SLOT_SIG:
				agent_exec_reap(a);
				break;
			case SLOT_OUT:
				agent_exec_pipe_ready(a, slots[i].req, 1);
				break;
			case SLOT_ERR:
				agent_exec_pipe_ready(a, slots[i].req, 2);
				break;
			case SLOT_IN:
				agent_exec_stdin_ready(a, slots[i].req);
				break;
			default:
				break;
			}
		}
		/* The channel last: reading it may start requests, and the
		 * slots above must still point at live requests. */
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			al_err err;
			if ((pfd[0].events & POLLIN) == 0) {
				/* Peer hung up while we were not reading:
				 * writes fail next round and end the agent. */
				continue;
			}
			rc = al_frame_reader_fill(&a->rd, a->chan, &err);
			if (rc < 0)
				shutdown_agent(a, err.msg);
			if (rc == 0)
				shutdown_agent(a, "host closed the channel");
		}
	}
}

static void usage(void)
{
	fprintf(stderr,
		"usage: airlock-agent [--fd N | --port /dev/vportNpM]\n");
	exit(100);
}

/* Signals a process in the sandbox (or a terminal) could send to stop
 * the agent. SIGKILL and SIGSTOP cannot be ignored; to PID 1 of a
 * namespace they are not delivered from inside it anyway. */
static const int ignored_signals[] = {
	SIGPIPE, SIGHUP,    SIGINT,  SIGQUIT, SIGTERM,
	SIGUSR1, SIGUSR2,   SIGTSTP, SIGTTIN, SIGTTOU,
	SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ,
};

static void setup_signals(agent *a)
{
	for (size_t i = 0; i < sizeof ignored_signals / sizeof *ignored_signals;
	     i++)
		signal(ignored_signals[i], SIG_IGN);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		die(111, "sigprocmask: %s", strerror(errno));
	a->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (a->sigfd < 0)
		die(111, "signalfd: %s", strerror(errno));
}

/* Children get fds 0-2 by dup2; if the agent started with one of them
 * closed, a pipe could land there and lose its close-on-exec flag. */
static void ensure_stdio(void)
{
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) >= 0)
			continue;
		int n = open("/dev/null", O_RDWR);
		if (n < 0)
			die(111, "open /dev/null: %s", strerror(errno));
		if (n != fd)
			die(111, "fd %d closed but /dev/null opened as %d", fd,
			    n);
	}
}

int main(int argc, char **argv)
{
	agent a = {.chan = 3, .sigfd = -1};
	const char *port = NULL;

	al_log_init("airlock-agent", AL_LOG_INFO);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--fd") == 0 && i + 1 < argc) {
			char *end;
			errno = 0;
			long v = strtol(argv[++i], &end, 10);
			if (errno != 0 || *end != '\0' || v < 0 || v > INT_MAX)
				usage();
			a.chan = (int)v;
		} else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
			port = argv[++i];
		} else {
			usage();
		}
	}
	if (port == NULL && a.chan < 3)
		die(100, "--fd must be 3 or above (0-2 are stdio)");
	ensure_stdio();
	if (port != NULL) {
		a.chan = open(port, O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (a.chan < 0)
			die(111, "open %s: %s", port, strerror(errno));
	}
	int fl = fcntl(a.chan, F_GETFL);
	if (fl < 0)
		die(100, "channel fd %d: %s", a.chan, strerror(errno));
	if (fcntl(a.chan, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    fcntl(a.chan, F_SETFD, FD_CLOEXEC) < 0)
		die(111, "channel fd %d: %s", a.chan, strerror(errno));

	/* The agent holds the channel to the shim: nothing in the sandbox
	 * may ptrace it or read its memory. Root of an ns sandbox lacks
	 * CAP_SYS_PTRACE, and without it a non-dumpable process is out of
	 * reach; what it starts is dumpable again after exec. */
	if (prctl(PR_SET_DUMPABLE, 0) < 0)
		die(111, "PR_SET_DUMPABLE: %s", strerror(errno));
	setup_signals(&a);
	/* Outside a pid namespace (tests, a VM init that is not us), become
	 * the reaper of orphans anyway, so every descendant is ours. */
	if (getpid() != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		al_warn("cannot become child subreaper: %s", strerror(errno));
	al_frame_reader_init(&a.rd);
	al_buf_init(&a.out, AGENT_OUT_MAX);

	json_object *hello = json_object_new_object();
	if (hello == NULL)
		die(111, "out of memory");
	json_object_object_add(hello, "version", json_object_new_int(1));
	json_object_object_add(hello, "pid", json_object_new_int(getpid()));
	agent_send_json(&a, AL_F_HELLO, 0, hello);
	json_object_put(hello);

	loop(&a);
	return 0;
}
