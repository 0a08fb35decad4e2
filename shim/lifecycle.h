/* shim lifecycle: pause and resume of the running sandbox, resident
 * (nothing is released). A client's PAUSE first reaches the agent,
 * which answers and then goes quiet with its deadlines held
 * (core/proto/agentproto.h); only then the driver stops the machine (vm
 * QMP stop, ns freezer), and the client is answered. RESUME runs the
 * machine again and tells the agent, and is answered at once: the agent
 * takes frames in order, so whatever follows reaches it resumed. Streams
 * stay open throughout; their output waits. */
#ifndef AL_SHIM_LIFECYCLE_H
#define AL_SHIM_LIFECYCLE_H

#include <stdint.h>

#include "proto/agentproto.h"
#include "shim.h"

void shim_lifecycle_init(shim *s);
/* A PAUSE or RESUME from client i. */
void shim_lifecycle_request(shim *s, int client, const al_frame *f);
/* 1 if f from the agent was the answer to the shim's PAUSE or RESUME
 * (taken), 0 for anyone else's. */
int shim_lifecycle_from_agent(shim *s, const al_frame *f);
/* "running" or "paused", for STATUS. */
const char *shim_lifecycle_state(const shim *s);
/* ms until a pause times out, or -1. */
int shim_lifecycle_timeout(const shim *s, int64_t now);
void shim_lifecycle_tick(shim *s, int64_t now);

#endif
