/* Pause and resume in the shim (lifecycle.h). */
#include "lifecycle.h"

#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "route.h"

void shim_lifecycle_init(shim *s)
{
	s->pause = (shim_pause){.phase = SHIM_RUNNING, .client = -1};
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
	if (p->phase == SHIM_PAUSING) {
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
	p->phase = SHIM_PAUSING;
	p->client = i;
	p->client_gen = shim_client_gen(s, i);
	p->client_id = id;
	p->deadline_ms = al_now_ms() + SHIM_PAUSE_MS;
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

void shim_lifecycle_request(shim *s, int i, const al_frame *f)
{
	if (f->type == AL_F_PAUSE)
		pause_request(s, i, f->id);
	else
		resume_request(s, i, f->id);
}

/* The agent answered the PAUSE: it is quiet now, so the machine stops. */
static void agent_paused(shim *s, const al_frame *f)
{
	al_err err = {0};
	shim_pause *p = &s->pause;
	if (p->phase != SHIM_PAUSING) {
		/* A pause that timed out: undo it in the agent. */
		if (f->type == AL_F_RESULT)
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
	if (s->pause.phase != SHIM_PAUSING)
		return -1;
	int64_t left = s->pause.deadline_ms - now;
	return left > 0 ? (int)left : 0;
}

void shim_lifecycle_tick(shim *s, int64_t now)
{
	shim_pause *p = &s->pause;
	if (p->phase != SHIM_PAUSING || now < p->deadline_ms)
		return;
	al_warn("sandbox %s: the agent did not answer the pause", s->sb.id);
	p->phase = SHIM_RUNNING;
	answer(s, AL_ETIMEDOUT,
	       "the sandbox's agent did not answer the pause in time (its "
	       "output may be waiting for a slow reader); it keeps running");
}
