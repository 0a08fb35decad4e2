/* Pause and resume in the shim (lifecycle.h). */
#include "lifecycle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/file.h"
#include "base/log.h"
#include "pool/store.h"
#include "route.h"
#include "sandbox/snapfiles.h"

void shim_lifecycle_init(shim *s)
{
	s->pause = (shim_pause){.phase = SHIM_RUNNING, .client = -1};
}

static void wait_for(shim *s, int i, uint32_t id, shim_phase phase)
{
	shim_pause *p = &s->pause;
	p->phase = phase;
	p->client = i;
	p->client_gen = shim_client_gen(s, i);
	p->client_id = id;
	p->deadline_ms = al_now_ms() + SHIM_PAUSE_MS;
}

const char *shim_lifecycle_state(const shim *s)
{
	return s->pause.phase == SHIM_PAUSED ? "paused" : "running";
}

static void answer(shim *s, al_code code, const char *msg)
{
	shim_pause *p = &s->pause;
	if (p->client < 0)
		return;
	if (code == AL_OK)
		shim_client_reply(s, p->client, p->client_gen, AL_F_RESULT,
				  p->client_id, "{}", 2);
	else
		shim_client_error(s, p->client, p->client_gen, p->client_id,
				  code, msg);
	p->client = -1;
}

static void answer_result(shim *s, const char *txt)
{
	shim_pause *p = &s->pause;
	if (p->client >= 0)
		shim_client_reply(s, p->client, p->client_gen, AL_F_RESULT,
				  p->client_id, txt, strlen(txt));
	p->client = -1;
}

/* Tell the agent to go on; a failure to queue it ends the sandbox the
 * way any broken agent channel does. */
static void agent_resume(shim *s)
{
	al_err err = {0};
	if (shim_agent_send(s, AL_F_RESUME, AL_REQ_ID_RESUME, "{}", 2, &err) <
	    0)
		al_warn("sandbox %s: resuming the agent: %s", s->sb.id,
			err.msg);
}

static void pause_request(shim *s, int i, uint32_t id)
{
	al_err err = {0};
	shim_pause *p = &s->pause;
	if (p->phase == SHIM_PAUSED) {
		shim_client_fail(s, i, id, AL_ESTATE,
				 "the sandbox is paused already");
		return;
	}
	if (p->phase == SHIM_PAUSING || p->phase == SHIM_SUSPENDING) {
		shim_client_fail(s, i, id, AL_ESTATE,
				 "the sandbox is being paused");
		return;
	}
	if (s->driver->pause == NULL) {
		shim_client_fail(s, i, id, AL_ENOTSUP,
				 "this driver cannot pause a sandbox");
		return;
	}
	if (shim_agent_send(s, AL_F_PAUSE, AL_REQ_ID_PAUSE, "{}", 2, &err) <
	    0) {
		shim_client_fail(s, i, id, err.code, err.msg);
		return;
	}
	wait_for(s, i, id, SHIM_PAUSING);
}

static void resume_request(shim *s, int i, uint32_t id)
{
	al_err err = {0};
	if (s->pause.phase != SHIM_PAUSED) {
		shim_client_fail(s, i, id, AL_ESTATE,
				 s->pause.phase == SHIM_PAUSING
					 ? "the sandbox is being paused"
					 : "the sandbox is running already");
		return;
	}
	if (s->driver->resume(&s->h, &err) < 0) {
		al_warn("sandbox %s: resume: %s", s->sb.id, err.msg);
		shim_client_fail(s, i, id, err.code, err.msg);
		return;
	}
	s->pause.phase = SHIM_RUNNING;
	agent_resume(s);
	shim_client_send(s, i, AL_F_RESULT, id, "{}", 2);
}

/* ---- suspend ---- */

/* pool/snapshots/.<id>.tmp and pool/snapshots/<id>. */
static int snapshot_paths(shim *s, char *tmp, char *dir, al_err *err)
{
	if (al_config_snapshot_dir(&s->cfg, s->pause.snapshot, dir, AL_PATH_MAX,
				   err) < 0)
		return -1;
	int n = snprintf(tmp, AL_PATH_MAX, "%s/snapshots/.%s.tmp",
			 s->cfg.pool_dir, s->pause.snapshot);
	if (n < 0 || n >= AL_PATH_MAX)
		return al_err_set(err, AL_EINVAL, 0, "snapshot path too long");
	return 0;
}

/* Remove an unfinished snapshot directory. */
static void remove_tmp(const char *tmp)
{
	al_err err = {0};
	if (al_snapfiles_remove(tmp, &err) < 0)
		al_warn("removing %s: %s", tmp, err.msg);
}

static long long tree_bytes(const char *dir)
{
	char path[AL_PATH_MAX + 16];
	static const char *const files[] = {"meta.json", "vm/mem",
					    "vm/devstate", "vm/pages",
					    "vm/meta"};
	long long sum = 0;
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		struct stat st;
		snprintf(path, sizeof path, "%s/%s", dir, files[i]);
		if (stat(path, &st) == 0)
			sum += (long long)st.st_blocks * 512;
	}
	return sum;
}

static int write_meta(shim *s, const char *tmp, al_err *err)
{
	char path[AL_PATH_MAX + 16], text[1024];
	snprintf(path, sizeof path, "%s/meta.json", tmp);
	int n = snprintf(text, sizeof text,
			 "{\"format\":1,\"snapshot\":\"%s\",\"sandbox\":\"%s\","
			 "\"driver\":\"%s\",\"template\":\"%s\","
			 "\"template_version\":%d,\"memory\":%s,"
			 "\"created_at_ms\":%lld}\n",
			 s->pause.snapshot, s->sb.id, s->driver->name,
			 s->sb.template_name, s->sb.template_version,
			 s->pause.memory ? "true" : "false",
			 (long long)time(NULL) * 1000);
	if (n < 0 || (size_t)n >= sizeof text)
		return al_err_set(err, AL_EINTERNAL, 0, "meta too long");
	return al_file_replace(path, text, (size_t)n, 0600, err);
}

/* Make the committed directory durable: the filesystem (the rootfs
 * snapshot and the files) before the rename, the parent after it. */
static int commit_dir(const char *tmp, const char *dir, al_err *err)
{
	al_autofd int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || syncfs(fd) < 0)
		return al_err_sys(err, AL_ESYS, errno, "sync %s", tmp);
	if (rename(tmp, dir) < 0)
		return al_err_sys(err, AL_ESYS, errno, "rename %s", tmp);
	char parent[AL_PATH_MAX];
	snprintf(parent, sizeof parent, "%s", dir);
	char *slash = strrchr(parent, '/');
	if (slash != NULL)
		*slash = '\0';
	al_autofd int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0 || fsync(pfd) < 0)
		return al_err_sys(err, AL_ESYS, errno, "fsync %s", parent);
	return 0;
}

/* After a snapshot (taken, or failed before its commit) the sandbox
 * goes on as it was: running, or paused when it was. */
static void carry_on(shim *s)
{
	shim_pause *p = &s->pause;
	al_err err = {0};
	p->holding = 0;
	if (p->was_paused) {
		if (s->driver->pause(&s->h, &err) < 0)
			al_warn("sandbox %s: pause again: %s", s->sb.id,
				err.msg);
		p->phase = SHIM_PAUSED;
	} else {
		if (s->driver->resume(&s->h, &err) < 0)
			al_warn("sandbox %s: resume: %s", s->sb.id, err.msg);
		agent_resume(s);
		p->phase = SHIM_RUNNING;
	}
}

static void suspend_failed(shim *s, const al_err *why)
{
	al_warn("sandbox %s: %s failed: %s", s->sb.id,
		s->pause.end ? "suspend" : "snapshot", why->msg);
	carry_on(s);
	answer(s, why->code, why->msg);
}

/* The machine is quiet: stop it, save it into the snapshot's temporary
 * directory, commit that, answer, and end the shim. */
static void take_snapshot(shim *s)
{
	shim_pause *p = &s->pause;
	al_err err = {0};
	char tmp[AL_PATH_MAX], dir[AL_PATH_MAX], path[AL_PATH_MAX + 16];
	al_capture_stats st = {0};
	if (snapshot_paths(s, tmp, dir, &err) < 0 ||
	    s->driver->pause(&s->h, &err) < 0) {
		suspend_failed(s, &err);
		return;
	}
	snprintf(path, sizeof path, "%s/snapshots", s->cfg.pool_dir);
	if ((mkdir(path, 0700) < 0 && errno != EEXIST) ||
	    mkdir(tmp, 0700) < 0) {
		al_err_sys(&err, errno == ENOSPC ? AL_ENOSPACE : AL_ESYS, errno,
			   "mkdir %s", tmp);
		suspend_failed(s, &err);
		return;
	}
	int rc = 0;
	if (p->memory) {
		snprintf(path, sizeof path, "%s/vm", tmp);
		rc = mkdir(path, 0700) < 0
			     ? al_err_sys(&err, AL_ESYS, errno, "mkdir %s",
					  path)
			     : s->driver->capture(&s->h, path, &st, &err);
	}
	snprintf(path, sizeof path, "%s/rootfs", tmp);
	if (rc == 0)
		rc = al_store_snapshot_ro(s->rootfs, path, &err);
	if (rc == 0)
		rc = write_meta(s, tmp, &err);
	if (rc == 0)
		rc = commit_dir(tmp, dir, &err);
	if (rc < 0) {
		remove_tmp(tmp);
		suspend_failed(s, &err);
		return;
	}
	al_suspend_msg m = {.memory = p->memory,
			    .bytes = (uint64_t)tree_bytes(dir)};
	al_info("sandbox %s: %s snapshot %s (%s, %llu bytes, %llu dirty "
		"pages)",
		s->sb.id, p->end ? "suspended to" : "took", p->snapshot,
		p->memory ? "memory" : "files only",
		(unsigned long long)m.bytes,
		(unsigned long long)st.dirty_pages);
	char *txt = al_suspend_result_pack(&m, &err);
	if (!p->end) {
		carry_on(s);
		if (txt != NULL)
			answer_result(s, txt);
		else
			answer(s, err.code, err.msg);
		free(txt);
		return;
	}
	if (p->client >= 0 && shim_client_gen(s, p->client) == p->client_gen &&
	    s->clients[p->client].fd >= 0) {
		/* Sent directly: the shim ends right after. */
		if (txt != NULL)
			al_frame_send(s->clients[p->client].fd, AL_F_RESULT,
				      p->client_id, txt, strlen(txt), &err);
		else
			shim_client_fail(s, p->client, p->client_id, err.code,
					 err.msg);
	}
	free(txt);
	p->client = -1;
	p->suspended = 1;
	/* Recorded by the caller (fcgi), or settled by the controller from
	 * the committed directory if the caller is gone. */
	s->has_row = 0;
	s->stopping = 1;
}

static void suspend_request(shim *s, int i, const al_frame *f)
{
	al_err err = {0};
	shim_pause *p = &s->pause;
	al_suspend_msg m;
	if (al_suspend_unpack(f->payload, f->len, &m, &err) < 0) {
		shim_client_fail(s, i, f->id, err.code, err.msg);
		return;
	}
	if (p->phase == SHIM_PAUSING || p->phase == SHIM_SUSPENDING) {
		shim_client_fail(s, i, f->id, AL_ESTATE,
				 "the sandbox is being paused");
		return;
	}
	if (m.memory && s->driver->capture == NULL) {
		shim_client_fail(s, i, f->id, AL_EMEMORY,
				 "this driver cannot keep a sandbox's memory");
		return;
	}
	if (!m.memory && s->driver->capture != NULL) {
		/* Its files are in the guest's page cache until it syncs. */
		shim_client_fail(s, i, f->id, AL_ENOTSUP,
				 "a vm sandbox is suspended with its memory");
		return;
	}
	snprintf(p->snapshot, sizeof p->snapshot, "%s", m.snapshot);
	p->memory = m.memory;
	p->end = f->type == AL_F_SUSPEND;
	p->was_paused = p->phase == SHIM_PAUSED;
	if (!m.memory) {
		/* Nothing of the agent is kept: no need to quiet it. */
		wait_for(s, i, f->id, p->phase);
		take_snapshot(s);
		return;
	}
	/* A paused machine runs a moment so that its agent can answer the
	 * PAUSE that marks the end of what it was sent. */
	if (p->was_paused && s->driver->resume(&s->h, &err) < 0) {
		shim_client_fail(s, i, f->id, err.code, err.msg);
		return;
	}
	if (shim_agent_send(s, AL_F_PAUSE, AL_REQ_ID_PAUSE, "{}", 2, &err) <
	    0) {
		if (p->was_paused)
			(void)s->driver->pause(&s->h, &err);
		shim_client_fail(s, i, f->id, err.code, err.msg);
		return;
	}
	p->holding = 1;
	p->hold_left = al_buf_pending(&s->agent_out);
	wait_for(s, i, f->id, SHIM_SUSPENDING);
}

void shim_lifecycle_request(shim *s, int i, const al_frame *f)
{
	if (f->type == AL_F_PAUSE)
		pause_request(s, i, f->id);
	else if (f->type == AL_F_RESUME)
		resume_request(s, i, f->id);
	else /* SUSPEND, SNAPSHOT */
		suspend_request(s, i, f);
}

/* The agent answered the PAUSE: it is quiet now, so the machine stops. */
static void agent_paused(shim *s, const al_frame *f)
{
	al_err err = {0};
	shim_pause *p = &s->pause;
	if (p->phase == SHIM_SUSPENDING) {
		if (f->type == AL_F_RESULT) {
			take_snapshot(s);
		} else {
			al_err e = {.code = AL_EPROTO};
			snprintf(e.msg, sizeof e.msg,
				 "the sandbox's agent refused the pause");
			suspend_failed(s, &e);
		}
		return;
	}
	if (p->phase != SHIM_PAUSING) {
		/* A pause that timed out: undo it in the agent. */
		if (f->type == AL_F_RESULT && p->phase == SHIM_RUNNING)
			agent_resume(s);
		return;
	}
	if (f->type != AL_F_RESULT) {
		p->phase = SHIM_RUNNING;
		answer(s, AL_EPROTO, "the sandbox's agent refused the pause");
		return;
	}
	if (s->driver->pause(&s->h, &err) < 0) {
		al_warn("sandbox %s: pause: %s", s->sb.id, err.msg);
		p->phase = SHIM_RUNNING;
		agent_resume(s);
		answer(s, err.code, err.msg);
		return;
	}
	p->phase = SHIM_PAUSED;
	answer(s, AL_OK, NULL);
}

int shim_lifecycle_from_agent(shim *s, const al_frame *f)
{
	if (f->id == AL_REQ_ID_PAUSE) {
		agent_paused(s, f);
		return 1;
	}
	/* RESUME's answer: nothing waits for it (see lifecycle.h). */
	return f->id == AL_REQ_ID_RESUME;
}

int shim_lifecycle_timeout(const shim *s, int64_t now)
{
	if (s->pause.phase != SHIM_PAUSING && s->pause.phase != SHIM_SUSPENDING)
		return -1;
	int64_t left = s->pause.deadline_ms - now;
	return left > 0 ? (int)left : 0;
}

void shim_lifecycle_tick(shim *s, int64_t now)
{
	shim_pause *p = &s->pause;
	if (p->phase == SHIM_SUSPENDING && now >= p->deadline_ms) {
		al_err e = {.code = AL_ETIMEDOUT};
		snprintf(e.msg, sizeof e.msg,
			 "the sandbox's agent did not answer the suspend's "
			 "pause in time; it goes on as it was");
		suspend_failed(s, &e);
		return;
	}
	if (p->phase != SHIM_PAUSING || now < p->deadline_ms)
		return;
	al_warn("sandbox %s: the agent did not answer the pause", s->sb.id);
	p->phase = SHIM_RUNNING;
	answer(s, AL_ETIMEDOUT,
	       "the sandbox's agent did not answer the pause in time (its "
	       "output may be waiting for a slow reader); it keeps running");
}
