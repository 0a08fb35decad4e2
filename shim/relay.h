/* shim relay: the event loop between fcgi clients, the agent, the
 * gateway, nginx's streams and signals. */
#ifndef AL_SHIM_RELAY_H
#define AL_SHIM_RELAY_H

#include "model/sandbox_state.h"
#include "shim.h"

/* Run until the sandbox ends. Returns the process exit code. */
int shim_relay_run(shim *s);
/* Its parts, for driving the relay without the process (the fuzz
 * target): serve control connection fd (non-blocking; owned from now,
 * closed when the table is full: the slot or -1); one turn of the loop,
 * polling up to timeout_ms, 1 when the shim must end (*ev and detail
 * say why); and the end: tell the clients, tear down, free. */
int shim_relay_add_client(shim *s, int fd);
int shim_relay_turn(shim *s, int timeout_ms, al_event *ev, char *detail,
		    size_t dlen);
void shim_relay_finish(shim *s, al_event ev, const char *detail);

#endif
