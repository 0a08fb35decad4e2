/* credclient: the one client of CRED_REFRESH (fcgi after a credential
 * create, rotate or delete commits; tests).
 *
 * Connects to <state>/run/cred.sock, sends CRED_REFRESH and waits for
 * CRED_REFRESH_DONE, all within AL_CREDCLIENT_TIMEOUT_MS (the controller
 * itself waits at most 2 s for the gateways' ACKs). A controller that is
 * down is AL_EUNAVAIL: the caller logs it and answers anyway (a gateway
 * gets the new set when its channel is opened again). */
#ifndef AL_CREDCLIENT_H
#define AL_CREDCLIENT_H

#include "credproto.h"
#include "err.h"

#define AL_CREDCLIENT_TIMEOUT_MS 3000

/* project NULL: a global credential changed. out may be NULL. */
int al_credclient_refresh(const char *state_dir, const char *project,
			  al_cred_refresh_done *out, al_err *err);

#endif
