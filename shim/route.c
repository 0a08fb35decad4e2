/* shim route: see route.h. */
#include "route.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"

shim_route *shim_route_add(shim *s, uint16_t kind, int client,
			   uint32_t client_id)
{
	shim_route *r = calloc(1, sizeof *r);
	if (r == NULL)
		return NULL;
	/* Skip 0 (the session id) on wrap-around. */
	if (s->next_agent_id == 0)
		s->next_agent_id = 1;
	r->agent_id = s->next_agent_id++;
	r->client = client;
	r->client_gen = s->clients[client].gen;
	r->client_id = client_id;
	r->kind = kind;
	r->stream = -1;
	r->next = s->routes;
	s->routes = r;
	return r;
}

shim_route *shim_route_find(shim *s, uint32_t agent_id)
{
	for (shim_route *r = s->routes; r != NULL; r = r->next)
		if (r->agent_id == agent_id)
			return r;
	return NULL;
}

shim_route *shim_route_by_client(shim *s, int client, uint32_t client_id)
{
	for (shim_route *r = s->routes; r != NULL; r = r->next)
		if (r->client == client &&
		    r->client_gen == s->clients[client].gen &&
		    r->client_id == client_id)
			return r;
	return NULL;
}

void shim_route_del(shim *s, shim_route *dead)
{
	for (shim_route **p = &s->routes; *p != NULL; p = &(*p)->next)
		if (*p == dead) {
			*p = dead->next;
			free(dead);
			return;
		}
}

int shim_agent_send(shim *s, uint16_t type, uint32_t id, const void *p,
		    size_t n, al_err *err)
{
	return al_frame_encode(&s->agent_out, type, id, p, n, err);
}

void shim_agent_kill(shim *s, uint32_t agent_id)
{
	static const char kill_req[] = "{\"signal\":9}";
	shim_agent_send(s, AL_F_SIGNAL, agent_id, kill_req, sizeof kill_req - 1,
			NULL);
}

void shim_client_send(shim *s, int i, uint16_t type, uint32_t id, const void *p,
		      size_t n)
{
	al_err err = {0};
	if (al_frame_encode(&s->clients[i].out, type, id, p, n, &err) < 0) {
		al_warn("sandbox %s: client %d dropped: %s", s->sb.id, i,
			err.msg);
		shim_client_drop(s, i);
	}
}

void shim_client_fail(shim *s, int i, uint32_t id, al_code code,
		      const char *msg)
{
	al_err err = {0};
	char *txt = al_error_pack(code, msg, &err);
	if (txt == NULL) {
		al_warn("sandbox %s: client %d dropped: %s", s->sb.id, i,
			err.msg);
		shim_client_drop(s, i);
		return;
	}
	shim_client_send(s, i, AL_F_ERROR, id, txt, strlen(txt));
	free(txt);
}

void shim_client_drop(shim *s, int i)
{
	shim_client *c = &s->clients[i];
	if (c->fd < 0)
		return;
	/* A process whose client went away is killed: nobody could read
	 * its output or stop it any more. One that runs for a stream
	 * belongs to the stream now. */
	char *abort_req = NULL;
	shim_route *next;
	for (shim_route *r = s->routes; r != NULL; r = next) {
		next = r->next;
		if (r->client != i || r->client_gen != c->gen)
			continue;
		if (r->kind == AL_F_EXEC ||
		    (r->kind == AL_F_STREAM_EXEC && r->stream < 0)) {
			shim_agent_kill(s, r->agent_id);
		} else if (r->kind == AL_F_FILE_WRITE ||
			   r->kind == AL_F_FILE_READ) {
			/* A half-sent file must not appear in the sandbox,
			 * and a download nobody reads must not go on; the
			 * agent answers an abort with nothing. */
			if (abort_req == NULL)
				abort_req = al_error_pack(AL_ESTATE,
							  "client went away",
							  NULL);
			if (abort_req != NULL)
				shim_agent_send(s, AL_F_ERROR, r->agent_id,
						abort_req, strlen(abort_req),
						NULL);
			shim_route_del(s, r);
			continue;
		}
		r->client = -1;
	}
	free(abort_req);
	close(c->fd);
	c->fd = -1;
	c->gen++;
	al_frame_reader_free(&c->in);
	al_buf_free(&c->out);
	if (s->destroy_client == i)
		s->destroy_client = -1;
}

uint32_t shim_client_gen(const shim *s, int i)
{
	return s->clients[i].gen;
}

void shim_client_reply(shim *s, int i, uint32_t gen, uint16_t type, uint32_t id,
		       const void *p, size_t n)
{
	if (i >= 0 && i < SHIM_MAX_CLIENTS && s->clients[i].fd >= 0 &&
	    s->clients[i].gen == gen)
		shim_client_send(s, i, type, id, p, n);
}

void shim_client_error(shim *s, int i, uint32_t gen, uint32_t id, al_code code,
		       const char *msg)
{
	if (i >= 0 && i < SHIM_MAX_CLIENTS && s->clients[i].fd >= 0 &&
	    s->clients[i].gen == gen)
		shim_client_fail(s, i, id, code, msg);
}
