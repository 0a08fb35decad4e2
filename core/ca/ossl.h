/* gw/ossl: OpenSSL's error queue into the one error envelope. */
#ifndef AL_GW_OSSL_H
#define AL_GW_OSSL_H

#include "base/err.h"

/* Fill err with code, "what: <OpenSSL's first queued error>", clear the
 * queue (so that a later failure is not blamed on this one); -1. */
int al_gw_ossl_err(al_err *err, al_code code, const char *what);

#endif
