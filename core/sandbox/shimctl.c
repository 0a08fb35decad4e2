#include "sandbox/shimctl.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/spawn.h"

int al_shimctl_connect(const al_config *cfg, const char *id, al_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (al_config_shim_socket(cfg, id, sa.sun_path, sizeof sa.sun_path,
				  err) < 0)
		return -1;
	al_autofd int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		if (errno == ENOENT || errno == ECONNREFUSED)
			return al_err_set(err, AL_EUNAVAIL, errno,
					  "sandbox %s: its shim is not running",
					  id);
		return al_err_sys(err, AL_ESYS, errno, "connect %s",
				  sa.sun_path);
	}
	return al_steal_fd(&fd);
}

int al_shimctl_call(int fd, uint16_t type, uint32_t id, json_object *req,
		    int64_t deadline_ms, json_object **result, al_err *err)
{
	const char *body = req != NULL ? json_object_to_json_string_ext(
						 req, JSON_C_TO_STRING_PLAIN)
				       : "{}";
	return al_shimctl_call_raw(fd, type, id, body, deadline_ms, result,
				   err);
}

/* Frames from fd until the RESULT (0, *f filled: the caller frees it) or
 * the ERROR (-1, err as the shim sent it) of request id; frames of other
 * requests are dropped. */
static int await_answer(int fd, uint32_t id, int64_t deadline_ms, al_frame *f,
			al_err *err)
{
	al_frame_reader r;
	al_frame_reader_init(&r);
	int rc;
	for (;;) {
		rc = al_frame_recv(fd, &r, f, deadline_ms, err);
		if (rc < 0)
			break;
		if (f->id == id && f->type == AL_F_RESULT)
			break;
		if (f->id == id && f->type == AL_F_ERROR) {
			al_err perr;
			if (al_error_unpack(f->payload, f->len, err, &perr) < 0)
				al_err_set(err, AL_EPROTO, 0,
					   "shim sent a malformed answer");
			al_frame_free(f);
			rc = -1;
			break;
		}
		al_frame_free(f);
	}
	al_frame_reader_free(&r);
	return rc;
}

int al_shimctl_call_raw(int fd, uint16_t type, uint32_t id, const char *body,
			int64_t deadline_ms, json_object **result, al_err *err)
{
	al_frame f;
	if (al_frame_send(fd, type, id, body, strlen(body), err) < 0 ||
	    await_answer(fd, id, deadline_ms, &f, err) < 0)
		return -1;
	json_object *obj = json_tokener_parse((const char *)f.payload);
	al_frame_free(&f);
	if (obj == NULL || !json_object_is_type(obj, json_type_object)) {
		json_object_put(obj);
		return al_err_set(err, AL_EPROTO, 0,
				  "shim sent a malformed answer");
	}
	if (result != NULL)
		*result = obj;
	else
		json_object_put(obj);
	return 0;
}

void al_shimctl_relay_error(al_err *e)
{
	/* The message comes from inside the sandbox: keep it printable
	 * ASCII so it cannot break the JSON or the log line. */
	for (char *p = e->msg; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = '?';
	switch (e->code) {
	case AL_EINVAL:
	case AL_ENOENT:
	case AL_ESTATE:
	case AL_EEXIST:
	case AL_ETOOBIG:
	case AL_EPATH:
	case AL_EPERM:
	case AL_ETIMEDOUT:
	case AL_EUNAVAIL:
	case AL_ENOSPACE:
	case AL_ESYS:
	case AL_ENOMEM:
	case AL_EPROTO:
	case AL_ENOTSUP:
	case AL_EMEMORY:
		break;
	case AL_EAUTH:
		/* The caller is authenticated; the sandbox refused. */
		e->code = AL_EPERM;
		break;
	case AL_OK:
	case AL_EDB:
	case AL_EINTERNAL:
	case AL_EQUOTA:
	case AL_EDISABLED:
	case AL_CODE_MAX:
	default:
		e->code = AL_EPROTO;
		break;
	}
}

void al_shimctl_error_frame(const al_frame *f, al_err *err)
{
	al_err perr;
	if (al_error_unpack(f->payload, f->len, err, &perr) < 0) {
		al_err_set(err, AL_EPROTO, 0, "sandbox sent a malformed error");
		return;
	}
	al_shimctl_relay_error(err);
}

int al_shimctl_request(const al_config *cfg, const char *sandbox, uint16_t type,
		       const char *payload, int64_t deadline_ms,
		       al_frame *result, al_err *err)
{
	al_autofd int fd = al_shimctl_connect(cfg, sandbox, err);
	if (fd < 0)
		return -1;
	if (al_frame_send_until(fd, type, AL_REQ_ID_CLIENT, payload,
				strlen(payload), deadline_ms, err) < 0 ||
	    await_answer(fd, AL_REQ_ID_CLIENT, deadline_ms, result, err) < 0) {
		al_shimctl_relay_error(err);
		return -1;
	}
	return 0;
}

int al_shimctl_destroy(const al_config *cfg, const char *id, al_err *err)
{
	al_autofd int fd = al_shimctl_connect(cfg, id, err);
	if (fd < 0)
		return -1;
	if (al_shimctl_call(fd, AL_F_DESTROY, AL_REQ_ID_CLIENT, NULL,
			    al_now_ms() + 30000, NULL, err) < 0) {
		al_err_wrap(err, "destroying sandbox %s", id);
		return -1;
	}
	return 0;
}

/* Read the shim's one-line start report: "OK <al_shim_ready_pack>" or
 * "ERR <code> <message>"; ready (may be NULL) gets the first. */
static int read_ready(int fd, int64_t deadline_ms, const char *id,
		      al_shim_ready *ready, al_err *err)
{
	char line[600];
	size_t len = 0;
	while (len < sizeof line - 1) {
		int64_t left = deadline_ms - al_now_ms();
		if (left <= 0)
			return al_err_set(err, AL_ETIMEDOUT, 0,
					  "sandbox %s did not start in time",
					  id);
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int pr = poll(&p, 1, (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0)
			return al_err_sys(err, AL_ESYS, errno, "poll");
		if (pr == 0)
			continue;
		ssize_t n = read(fd, line + len, sizeof line - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return al_err_sys(err, AL_ESYS, errno, "read");
		if (n == 0)
			break;
		len += (size_t)n;
		if (memchr(line, '\n', len) != NULL)
			break;
	}
	line[len] = '\0';
	char *nl = strchr(line, '\n');
	if (nl != NULL)
		*nl = '\0';
	if (strncmp(line, "OK ", 3) == 0) {
		al_shim_ready r;
		if (al_shim_ready_unpack(line + 3, strlen(line + 3), &r, err) <
		    0)
			return -1;
		if (ready != NULL)
			*ready = r;
		return 0;
	}
	if (strncmp(line, "ERR ", 4) == 0) {
		char *code = line + 4;
		char *msg = strchr(code, ' ');
		if (msg != NULL)
			*msg++ = '\0';
		return al_err_set(err, al_code_from_name(code), 0, "%s",
				  msg != NULL ? msg
					      : "sandbox failed to start");
	}
	return al_err_set(err, AL_EINTERNAL, 0,
			  "the shim of sandbox %s exited while starting", id);
}

/* A sealed memfd holding one START frame with sb's spec (and tv's boot;
 * NULL: the template's defaults): the shim's stdin. */
static int spec_fd(const al_sandbox *sb, const al_template_version *tv,
		   al_err *err)
{
	char *spec = al_shim_spec_pack(sb, tv, err);
	if (spec == NULL)
		return -1;
	al_autofd int fd = memfd_create("airlock-spec",
					MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int rc = fd < 0 ? al_err_sys(err, AL_ESYS, errno, "memfd_create")
			: al_frame_send(fd, AL_F_START, 0, spec, strlen(spec),
					err);
	free(spec);
	if (rc < 0)
		return -1;
	if (lseek(fd, 0, SEEK_SET) < 0 ||
	    fcntl(fd, F_ADD_SEALS,
		  F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
		return al_err_sys(err, AL_ESYS, errno, "sealing the spec");
	return al_steal_fd(&fd);
}

/* Start airlock-shim detached with mode ("--id" or "--standby") and arg
 * (the sandbox id or the template: what ps shows), its spec on stdin;
 * *rd is where its start report comes (read_ready). */
static int launch_shim(const al_config *cfg, const char *mode, const char *arg,
		       const al_sandbox *sb, const al_template_version *tv,
		       int *rd, al_err *err)
{
	if (!al_id_valid(arg))
		return al_err_set(err, AL_EINVAL, 0, "invalid id");
	if (!al_driver_name_valid(sb->driver))
		return al_err_set(err, AL_EINVAL, 0, "invalid driver name");
	char shim[AL_PATH_MAX + 16], logpath[AL_PATH_MAX + 32];
	if ((size_t)snprintf(shim, sizeof shim, "%s/airlock-shim",
			     cfg->libexec_dir) >= sizeof shim ||
	    (size_t)snprintf(logpath, sizeof logpath, "%s/log/shim.log",
			     cfg->state_dir) >= sizeof logpath)
		return al_err_set(err, AL_EINVAL, 0, "path too long");
	al_autofd int in = spec_fd(sb, tv, err);
	if (in < 0)
		return -1;
	char *const argv[] = {shim,	    (char *)mode, (char *)arg,
			      "--ready-fd", "3",	  NULL};
	/* Detached (own session, not a child of this worker), so the shim
	 * survives restarts of whoever started it. */
	return al_spawn_detached_in(shim, argv, logpath, in, rd, err);
}

/* What version `version` of tmpl asks of its machines into tv; 1 when
 * it has such a row, 0 for a template without version rows (the shim
 * runs it with the defaults), -1 (err). */
static int load_boot(al_db *db, const char *tmpl, int version,
		     al_template_version *tv, al_err *err)
{
	al_err e = {0};
	if (al_template_get_version(db, tmpl, version, tv, &e) == 0)
		return 1;
	if (e.code == AL_ENOENT)
		return 0;
	if (err != NULL)
		*err = e;
	return -1;
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) * 1e3 +
	       (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

int al_shimctl_spawn(const al_config *cfg, al_db *db, const al_sandbox *sb,
		     int64_t deadline_ms, al_shim_ready *ready, al_err *err)
{
	al_template_version tv;
	int have = load_boot(db, sb->template_name, sb->template_version, &tv,
			     err);
	if (have < 0)
		return -1;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	al_autofd int rd = -1;
	int rc = launch_shim(cfg, "--id", sb->id, sb, have ? &tv : NULL, &rd,
			     err);
	al_template_version_free(&tv);
	if (rc < 0)
		return -1;
	double launched = ms_since(&t0);
	if (read_ready(rd, deadline_ms, sb->id, ready, err) < 0) {
		al_err_wrap(err, "starting sandbox %s", sb->id);
		return -1;
	}
	/* Beside the shim's own "running ... in N ms" line: what is left
	 * of the report's wait is its exec, libraries and config load. */
	al_info("sandbox %s: shim spawned in %.2f ms (fork, setsid, fork), "
		"its ready report %.2f ms after",
		sb->id, launched, ms_since(&t0) - launched);
	return 0;
}

int al_shimctl_spawn_standbys(const al_config *cfg, al_db *db, const char *tmpl,
			      int version, const char *driver, int n,
			      int64_t deadline_ms, al_err *err)
{
	enum { MAX = 16 };
	int rd[MAX], launched = 0, ready = 0;
	if (!al_driver_name_valid(driver) || !al_id_valid(tmpl))
		return al_err_set(err, AL_EINVAL, 0,
				  "invalid template or driver name");
	if (n > MAX)
		n = MAX;
	al_template_version tv;
	int have = load_boot(db, tmpl, version, &tv, err);
	if (have < 0)
		return -1;
	/* A standby: the template's machine, no sandbox yet (no id, no
	 * limits: the shim applies the defaults). */
	al_sandbox sb = {.template_version = version};
	snprintf(sb.template_name, sizeof sb.template_name, "%s", tmpl);
	snprintf(sb.driver, sizeof sb.driver, "%s", driver);
	/* All boot at once; then each report is read in turn. */
	while (launched < n &&
	       launch_shim(cfg, "--standby", tmpl, &sb, have ? &tv : NULL,
			   &rd[launched], err) == 0)
		launched++;
	al_template_version_free(&tv);
	int failed = launched < n;
	for (int i = 0; i < launched; i++) {
		al_err e = {0};
		if (read_ready(rd[i], deadline_ms, tmpl, NULL, &e) == 0) {
			ready++;
		} else if (!failed++) {
			*err = e;
			al_err_wrap(err, "starting a standby of %s", tmpl);
		}
		close(rd[i]);
	}
	if (ready == 0 && n > 0)
		return -1;
	return ready;
}
