/* credclient: the client side of <state>/run/cred.sock: opening a
 * sandbox's channel (the shim, before it starts the gateway and when the
 * gateway asks for a new one) and CRED_REFRESH (fcgi after a credential
 * create, rotate or delete commits; tests).
 *
 * Connects to <state>/run/cred.sock, sends CRED_REFRESH and waits for
 * CRED_REFRESH_DONE, all within AL_CREDCLIENT_TIMEOUT_MS (the controller
 * itself waits at most 2 s for the gateways' ACKs). A controller that is
 * down is AL_EUNAVAIL: the caller logs it and answers anyway (a gateway
 * gets the new set when its channel is opened again). */
#ifndef AL_CREDCLIENT_H
#define AL_CREDCLIENT_H

#include "base/err.h"
#include "cred/credproto.h"

#define AL_CREDCLIENT_TIMEOUT_MS 3000

/* Connect and say CRED_HELLO for sandbox: the fd (blocking,
 * close-on-exec) to hand to the gateway, whose first frame will be the
 * controller's SET or ERROR. AL_EUNAVAIL when the controller is not
 * there. */
int al_credclient_open(const char *state_dir, const char *sandbox, al_err *err);

/* project NULL: a global credential changed. out may be NULL. */
int al_credclient_refresh(const char *state_dir, const char *project,
			  al_cred_refresh_done *out, al_err *err);

#endif
