/* airlock-shim --id ID [--ready-fd N]
 *
 * Started detached by al_shimctl_spawn(). Brings sandbox ID from
 * "creating" to "running", reports "OK" or "ERR <code> <message>" on the
 * ready fd, then serves the control socket until the sandbox is destroyed,
 * its machine dies or the shim gets SIGTERM.
 * Exit codes: 0 sandbox ended normally, 100 usage, 111 start failed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "shim.h"
#include "store.h"

#define HELLO_TIMEOUT_MS 10000

static void report(int ready_fd, const char *line)
{
	if (ready_fd < 0)
		return;
	size_t len = strlen(line);
	while (len > 0) {
		ssize_t n = write(ready_fd, line, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		line += n;
		len -= (size_t)n;
	}
}

static void report_error(int ready_fd, const al_err *err)
{
	char line[700];
	snprintf(line, sizeof line, "ERR %s %s\n", al_code_name(err->code),
		 err->msg);
	report(ready_fd, line);
}

/* The agent's first frame must be HELLO; anything else means the machine
 * did not come up as built. */
static int wait_hello(shim *s, al_err *err)
{
	al_frame f;
	if (al_frame_recv(s->h.agent_fd, &s->agent_in, &f,
			  al_now_ms() + HELLO_TIMEOUT_MS, err) < 0) {
		al_err_wrap(err, "waiting for the sandbox agent");
		return -1;
	}
	int ok = f.type == AL_F_HELLO && f.id == 0;
	al_frame_free(&f);
	if (!ok)
		return al_err_set(err, AL_EPROTO, 0,
				  "sandbox agent did not say hello");
	return 0;
}

static int listen_control(shim *s, al_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(s->sock_path) >= sizeof sa.sun_path)
		return al_err_set(err, AL_EINVAL, 0, "socket path too long");
	strcpy(sa.sun_path, s->sock_path);
	char dir[AL_PATH_MAX];
	memcpy(dir, s->sock_path, sizeof dir);
	char *slash = strrchr(dir, '/');
	if (slash != NULL)
		*slash = '\0';
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", dir);
	unlink(s->sock_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "socket");
	/* Only root (the fcgi workers, the controller) may drive a shim. */
	mode_t old = umask(0077);
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (rc < 0 || listen(fd, 128) < 0) {
		al_err_sys(err, AL_ESYS, errno, "bind %s", s->sock_path);
		close(fd);
		return -1;
	}
	s->listen_fd = fd;
	return 0;
}

static void write_pid_file(shim *s)
{
	FILE *f = fopen(s->pid_path, "we");
	if (f == NULL)
		return;
	fprintf(f, "%d\n", (int)getpid());
	fclose(f);
}

void shim_teardown(shim *s, al_event ev, const char *detail)
{
	al_err err = {0};
	if (s->listen_fd >= 0) {
		close(s->listen_fd);
		s->listen_fd = -1;
		unlink(s->sock_path);
		unlink(s->pid_path);
	}
	if (s->driver != NULL && s->h.init_pid > 0) {
		if (s->driver->stop(&s->h, &err) < 0)
			al_warn("sandbox %s: stop: %s", s->sb.id, err.msg);
		s->h.init_pid = 0;
		s->h.agent_fd = -1;
	}
	if (s->rootfs[0] != '\0') {
		if (al_store_subvol_delete(s->rootfs, &err) < 0)
			al_warn("sandbox %s: %s", s->sb.id, err.msg);
		s->rootfs[0] = '\0';
	}
	if (s->db != NULL) {
		if (al_sandbox_transition(s->db, s->sb.id, ev, detail, &err) < 0)
			al_warn("sandbox %s: recording %s: %s", s->sb.id,
				al_event_name(ev), err.msg);
	}
	al_info("sandbox %s ended (%s: %s)", s->sb.id, al_event_name(ev),
		detail);
}

static int bring_up(shim *s, al_err *err)
{
	char id[sizeof s->sb.id];
	memcpy(id, s->sb.id, sizeof id);
	if (al_sandbox_get(s->db, id, &s->sb, err) < 0)
		return -1;
	if (s->sb.state != AL_ST_CREATING)
		return al_err_set(err, AL_ESTATE, 0,
				  "sandbox %s is %s, not creating", s->sb.id,
				  al_state_name(s->sb.state));
	s->driver = al_driver_find(s->sb.driver, err);
	if (s->driver == NULL)
		return -1;

	char tmpl[AL_PATH_MAX];
	if (al_config_template_root(&s->cfg, s->sb.template_name, tmpl,
				    sizeof tmpl, err) < 0 ||
	    al_config_sandbox_root(&s->cfg, s->sb.id, s->rootfs,
				   sizeof s->rootfs, err) < 0 ||
	    al_config_shim_socket(&s->cfg, s->sb.id, s->sock_path,
				  sizeof s->sock_path, err) < 0)
		return -1;
	/* run/sbx/<id>.sock -> run/sbx/<id>.pid */
	size_t sl = strlen(s->sock_path);
	if (sl < 5 || strcmp(s->sock_path + sl - 5, ".sock") != 0)
		return al_err_set(err, AL_EINTERNAL, 0, "unexpected socket path");
	memcpy(s->pid_path, s->sock_path, sl - 5);
	memcpy(s->pid_path + sl - 5, ".pid", 5);
	if (al_store_snapshot(tmpl, s->rootfs, err) < 0) {
		s->rootfs[0] = '\0'; /* nothing of ours to delete */
		al_err_wrap(err, "template %s", s->sb.template_name);
		return -1;
	}

	al_sandbox_spec spec = {
		.id = s->sb.id,
		.rootfs = s->rootfs,
		.hostname = s->sb.id,
		.agent = "/sbin/airlock-agent",
		.limits = s->sb.limits,
	};
	if (s->driver->start(&spec, &s->h, err) < 0)
		return -1;
	if (wait_hello(s, err) < 0)
		return -1;
	int fl = fcntl(s->h.agent_fd, F_GETFL);
	if (fl < 0 || fcntl(s->h.agent_fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return al_err_sys(err, AL_ESYS, errno, "fcntl agent");
	if (listen_control(s, err) < 0)
		return -1;
	write_pid_file(s);
	if (al_sandbox_set_shim_pid(s->db, s->sb.id, (int)getpid(), err) < 0 ||
	    al_sandbox_transition(s->db, s->sb.id, AL_EV_READY, "agent ready",
				  err) < 0)
		return -1;
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: airlock-shim --id ID [--ready-fd N]\n");
	return 100;
}

int main(int argc, char **argv)
{
	const char *id = NULL;
	int ready_fd = -1;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--id") == 0 && i + 1 < argc)
			id = argv[++i];
		else if (strcmp(argv[i], "--ready-fd") == 0 && i + 1 < argc)
			ready_fd = atoi(argv[++i]);
		else
			return usage();
	}
	if (id == NULL || !al_id_valid(id))
		return usage();
	if (ready_fd >= 0)
		fcntl(ready_fd, F_SETFD, FD_CLOEXEC);
	al_log_init("airlock-shim", AL_LOG_INFO);

	static shim s;
	s.listen_fd = -1;
	s.sig_fd = -1;
	s.destroy_client = -1;
	s.h.agent_fd = -1;
	s.next_agent_id = 1;
	snprintf(s.sb.id, sizeof s.sb.id, "%s", id);
	for (int i = 0; i < SHIM_MAX_CLIENTS; i++)
		s.clients[i].fd = -1;
	al_frame_reader_init(&s.agent_in);
	al_buf_init(&s.agent_out, SHIM_AGENT_QUEUE_MAX);

	/* Signals arrive through one signalfd in the poll loop. */
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	s.sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

	al_err err = {0};
	if (s.sig_fd < 0) {
		al_err_sys(&err, AL_ESYS, errno, "signalfd");
		report_error(ready_fd, &err);
		return 111;
	}
	if (al_config_load(&s.cfg, &err) < 0) {
		report_error(ready_fd, &err);
		return 111;
	}
	s.db = al_db_open(s.cfg.db_conninfo, &err);
	if (s.db == NULL) {
		report_error(ready_fd, &err);
		return 111;
	}
	if (bring_up(&s, &err) < 0) {
		al_error("sandbox %s failed to start: %s", id, err.msg);
		report_error(ready_fd, &err);
		if (ready_fd >= 0)
			close(ready_fd);
		shim_teardown(&s, AL_EV_FAIL, err.msg);
		al_db_close(s.db);
		return 111;
	}
	report(ready_fd, "OK\n");
	if (ready_fd >= 0)
		close(ready_fd);
	al_info("sandbox %s running (driver %s, init pid %d)", id,
		s.driver->name, (int)s.h.init_pid);
	int rc = shim_relay_run(&s);
	al_sandbox_free_fields(&s.sb);
	al_db_close(s.db);
	return rc;
}
