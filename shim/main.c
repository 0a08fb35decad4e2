/* airlock-shim --id ID --ready-fd N
 * airlock-shim --standby TEMPLATE --ready-fd N
 *
 * Started detached by al_shimctl_spawn() with its spec (al_shim_spec_pack:
 * the sandbox, its template version's boot) as one START frame on stdin:
 * the shim holds no database connection, this is all it knows. With --id
 * it brings sandbox ID up under the spec's driver. With --standby it
 * boots a machine of TEMPLATE for the warm pool, with no sandbox, and
 * waits on run/pool/<template>.<driver>.<slot>.sock for one CLAIM that
 * gives it a sandbox of the same template and driver (see shim_claim).
 * Either way it reports "OK {"pid":N,"accel":"..."}" or
 * "ERR <code> <message>" on the ready fd (whoever started it records the
 * sandbox running), then serves its control socket until the sandbox is
 * destroyed, its machine dies or the shim gets SIGTERM. How it ended is
 * spooled (core/sandbox/spool.h) for the controller to record.
 * Exit codes: 0 sandbox ended normally, 100 usage, 111 start failed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "base/capacity.h"
#include "base/cleanup.h"
#include "base/log.h"
#include "life.h"
#include "model/sandbox_state.h"
#include "relay.h"
#include "sandbox/shimspec.h"

/* The spec is in a memfd written before the shim was started. */
#define SPEC_TIMEOUT_MS 5000

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

/* The START frame on stdin: the spec of what to run, checked against
 * argv (the sandbox id, or the template of a standby). */
static int read_spec(const char *id, const char *standby, al_sandbox *sb,
		     al_template_version *tv, int *has_boot, al_err *err)
{
	al_frame_reader r;
	al_frame f;
	al_frame_reader_init(&r);
	int rc = al_frame_recv(0, &r, &f, al_now_ms() + SPEC_TIMEOUT_MS, err);
	al_frame_reader_free(&r);
	if (rc < 0) {
		al_err_wrap(err, "reading the spec on stdin");
		return -1;
	}
	/* The memfd is read: stdin holds nothing more for anyone. */
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		close(null);
	}
	rc = f.type == AL_F_START ? al_shim_spec_unpack(f.payload, f.len, sb,
							tv, has_boot, err)
				  : al_err_set(err, AL_EINVAL, 0,
					       "stdin holds no START frame");
	al_frame_free(&f);
	if (rc < 0)
		return -1;
	if (id != NULL ? strcmp(sb->id, id) != 0
		       : sb->id[0] != '\0' ||
				 strcmp(sb->template_name, standby) != 0) {
		al_sandbox_free_fields(sb);
		al_template_version_free(tv);
		return al_err_set(err, AL_EINVAL, 0, "the spec is not for %s",
				  id != NULL ? id : standby);
	}
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: airlock-shim --id ID | --standby TEMPLATE "
			"[--ready-fd N] <spec\n");
	return 100;
}

int main(int argc, char **argv)
{
	const char *id = NULL, *standby = NULL;
	int ready_fd = -1;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--id") == 0 && i + 1 < argc)
			id = argv[++i];
		else if (strcmp(argv[i], "--standby") == 0 && i + 1 < argc)
			standby = argv[++i];
		else if (strcmp(argv[i], "--ready-fd") == 0 && i + 1 < argc)
			ready_fd = atoi(argv[++i]);
		else
			return usage();
	}
	if ((id == NULL) == (standby == NULL))
		return usage();
	if (id != NULL ? !al_id_valid(id) : !al_id_valid(standby))
		return usage();
	if (ready_fd >= 0)
		fcntl(ready_fd, F_SETFD, FD_CLOEXEC);
	al_log_init("airlock-shim", AL_LOG_INFO);
	al_log_limit(AL_LOG_SANDBOX_BURST, AL_LOG_SANDBOX_PER_SEC);

	static shim s;
	shim_init(&s, id != NULL ? id : standby);

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
	int64_t t0 = al_now_ms();
	if (s.sig_fd < 0) {
		al_err_sys(&err, AL_ESYS, errno, "signalfd");
		report_error(ready_fd, &err);
		return 111;
	}
	if (al_config_load(&s.cfg, &err) < 0) {
		report_error(ready_fd, &err);
		return 111;
	}
	al_sandbox spec;
	al_template_version tv;
	int has_boot = 0;
	char *ready = NULL;
	int up = read_spec(id, standby, &spec, &tv, &has_boot, &err);
	if (up == 0)
		up = shim_bring_up(&s, standby != NULL, &spec, &tv, has_boot,
				   t0, &ready, &err);
	if (up < 0) {
		al_error("sandbox %s failed to start: %s", s.sb.id, err.msg);
		/* The host out of room: the errno does not cross the ready
		 * line, the code does (al_sandbox_start_failed). */
		int refused = al_capacity_exhausted(&err);
		if (refused)
			err.code = AL_EUNAVAIL;
		report_error(ready_fd, &err);
		if (ready_fd >= 0)
			close(ready_fd);
		shim_teardown(&s, refused ? AL_EV_DELETE : AL_EV_FAIL, err.msg);
		al_sandbox_free_fields(&s.sb);
		al_template_version_free(&s.tv);
		al_log_flush();
		return 111;
	}
	report(ready_fd, "OK ");
	report(ready_fd, ready);
	report(ready_fd, "\n");
	free(ready);
	if (ready_fd >= 0)
		close(ready_fd);
	shim_log_running(&s);
	int rc = shim_relay_run(&s);
	al_sandbox_free_fields(&s.sb);
	al_template_version_free(&s.tv);
	al_log_flush();
	return rc;
}
