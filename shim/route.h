/* shim route: who asked what. The clients on the control socket, the
 * agent channel, and the routes between them: each request relayed to
 * the agent gets an agent-side id, and every frame from the agent goes
 * back to its client by that id (relay.c) or is dropped. */
#ifndef AL_SHIM_ROUTE_H
#define AL_SHIM_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "shim.h"

/* A new route for request client_id of client i, opened by a frame of
 * type kind, with the next agent-side id; NULL on OOM. */
shim_route *shim_route_add(shim *s, uint16_t kind, int client,
			   uint32_t client_id);
/* The route of agent-side id agent_id, or of a client's request. */
shim_route *shim_route_find(shim *s, uint32_t agent_id);
shim_route *shim_route_by_client(shim *s, int client, uint32_t client_id);
void shim_route_del(shim *s, shim_route *dead);

/* Queue a frame toward the agent. */
int shim_agent_send(shim *s, uint16_t type, uint32_t id, const void *p,
		    size_t n, al_err *err);
/* SIGKILL to the process of agent-side request agent_id. */
void shim_agent_kill(shim *s, uint32_t agent_id);

/* Queue a frame, or an ERROR, toward client i; a client whose queue
 * cannot take it is dropped. */
void shim_client_send(shim *s, int i, uint16_t type, uint32_t id, const void *p,
		      size_t n);
void shim_client_fail(shim *s, int i, uint32_t id, al_code code,
		      const char *msg);
/* Client i went away: a process only it could read or stop is killed,
 * a file transfer aborted, other routes kept for their streams. */
void shim_client_drop(shim *s, int i);

/* For answers that come later (netctl.c): answer request id of client
 * i if it is still the client of generation gen. */
void shim_client_reply(shim *s, int i, uint32_t gen, uint16_t type, uint32_t id,
		       const void *p, size_t n);
void shim_client_error(shim *s, int i, uint32_t gen, uint32_t id, al_code code,
		       const char *msg);
uint32_t shim_client_gen(const shim *s, int i);

#endif
