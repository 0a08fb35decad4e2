/* What a sandbox's template asks for once its machine runs: the START
 * command (left running in the background), the READY check (repeated
 * until it passes, before the sandbox counts as running), and the
 * defaults every exec gets (ENV, WORKDIR, USER of the Airlockfile).
 * Everything here talks to the agent synchronously, before the relay
 * loop starts (or, for a standby, before it is put in the pool). */
#include "boot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"

#define READY_DEADLINE_MS 60000
#define READY_RETRY_MS 100
#define WARM_UP_TIMEOUT_MS 5000

void shim_template_set(shim *s, al_template_version *tv)
{
	al_template_version_free(&s->tv);
	if (tv != NULL) {
		s->tv = *tv;
		memset(tv, 0, sizeof *tv);
		return;
	}
	/* A template without a version row (built before versions existed)
	 * has no START/READY and runs with the defaults. */
	memset(&s->tv, 0, sizeof s->tv);
	snprintf(s->tv.name, sizeof s->tv.name, "%s", s->sb.template_name);
	snprintf(s->tv.workdir, sizeof s->tv.workdir, "/");
	snprintf(s->tv.user, sizeof s->tv.user, "root");
}

int shim_template_rootfs(shim *s, char *out, size_t outlen, al_err *err)
{
	struct stat st;
	if (s->tv.version > 0 &&
	    al_template_version_rootfs(&s->cfg, s->tv.name, s->tv.version, out,
				       outlen, err) == 0 &&
	    stat(out, &st) == 0)
		return 0;
	/* No versioned rootfs: the template's current one. */
	return al_config_template_root(&s->cfg, s->tv.name, out, outlen, err);
}

/* Lay src's members over dst (both objects); values are shared. */
static void overlay(json_object *dst, json_object *src)
{
	if (src == NULL || !json_object_is_type(src, json_type_object))
		return;
	json_object_object_foreach(src, k, v)
		json_object_object_add(dst, k, json_object_get(v));
}

char *shim_exec_defaults(const shim *s, const al_exec_msg *req, al_err *err)
{
	al_exec_msg m = *req;
	/* The template's ENV, under the sandbox's, under the request's. */
	json_object *merged = json_object_new_object();
	if (merged == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		return NULL;
	}
	overlay(merged, s->tv.env);
	overlay(merged, s->sb.env);
	overlay(merged, req->env);
	m.env = merged;
	if (m.cwd == NULL && s->tv.workdir[0] != '\0')
		m.cwd = s->tv.workdir;
	if (m.user == NULL && s->tv.user[0] != '\0' &&
	    strcmp(s->tv.user, "root") != 0)
		m.user = s->tv.user;
	char *out = al_exec_pack(&m, err);
	json_object_put(merged);
	return out;
}

/* Send an exec with the template's defaults. */
static int send_exec(shim *s, uint32_t id, json_object *argv, al_err *err)
{
	al_exec_msg m = {.cmd = argv};
	char *req = shim_exec_defaults(s, &m, err);
	if (req == NULL)
		return -1;
	int rc = al_frame_send(s->h.agent_fd, AL_F_EXEC, id, req, strlen(req),
			       err);
	free(req);
	return rc;
}

/* Wait for the end of exec id: its exit code, or -1 (err) when the agent
 * refused it or the deadline passed. Frames of other ids (the START
 * command's output) are dropped. */
static int wait_exit(shim *s, uint32_t id, int64_t deadline, int *code,
		     al_err *err)
{
	for (;;) {
		al_frame f;
		if (al_frame_recv(s->h.agent_fd, &s->agent_in, &f, deadline,
				  err) < 0)
			return -1;
		if (f.id != id ||
		    (f.type != AL_F_EXIT && f.type != AL_F_ERROR)) {
			al_frame_free(&f);
			continue;
		}
		*code = -1;
		if (f.type == AL_F_ERROR) {
			al_err why, perr;
			if (al_error_unpack(f.payload, f.len, &why, &perr) < 0)
				snprintf(why.msg, sizeof why.msg,
					 "the agent refused the command");
			al_frame_free(&f);
			return al_err_set(err, AL_EINVAL, 0, "%s", why.msg);
		}
		al_exit_msg m;
		al_err perr;
		if (al_exit_unpack(f.payload, f.len, &m, &perr) == 0 &&
		    m.exit_code >= 0)
			*code = m.exit_code;
		al_frame_free(&f);
		return 0;
	}
}

int shim_template_start(shim *s, al_err *err)
{
	if (s->tv.start != NULL) {
		/* Left running: its output and exit are nobody's request and
		 * are dropped by the relay. */
		if (send_exec(s, AL_REQ_ID_BOOT_START, s->tv.start, err) < 0) {
			al_err_wrap(err, "START");
			return -1;
		}
	}
	if (s->tv.ready == NULL)
		return 0;
	int64_t deadline = al_now_ms() + READY_DEADLINE_MS;
	for (;;) {
		int code = -1;
		if (send_exec(s, AL_REQ_ID_BOOT_READY, s->tv.ready, err) < 0 ||
		    wait_exit(s, AL_REQ_ID_BOOT_READY, deadline, &code, err) <
			    0) {
			al_err_wrap(err, "READY");
			return -1;
		}
		if (code == 0)
			return 0;
		if (al_now_ms() + READY_RETRY_MS >= deadline)
			return al_err_set(
				err, AL_ETIMEDOUT, 0,
				"READY check of template %s did not "
				"pass within %d s (last exit code %d)",
				s->tv.name, READY_DEADLINE_MS / 1000, code);
		usleep(READY_RETRY_MS * 1000);
	}
}

void shim_warm_up(shim *s)
{
	al_err err = {0};
	int64_t t0 = al_now_ms();
	int code;
	json_object *argv = json_object_new_array();
	if (argv != NULL)
		json_object_array_add(argv, json_object_new_string("true"));
	al_exec_msg m = {.cmd = argv};
	char *req = al_exec_pack(&m, &err);
	json_object_put(argv);
	int rc = req != NULL ? al_frame_send(s->h.agent_fd, AL_F_EXEC,
					     AL_REQ_ID_BOOT_WARM_UP, req,
					     strlen(req), &err)
			     : -1;
	free(req);
	if (rc < 0 || wait_exit(s, AL_REQ_ID_BOOT_WARM_UP,
				t0 + WARM_UP_TIMEOUT_MS, &code, &err) < 0) {
		al_warn("standby %s: warm-up exec: %s", s->slot, err.msg);
		return;
	}
	al_info("standby %s: warm-up exec took %lld ms", s->slot,
		(long long)(al_now_ms() - t0));
}
