/* ctl: what the controller's parts (expiry.c, spool_drain.c,
 * reconcile.c, refill.c) share with its loop in main.c. */
#ifndef AL_CTL_CTL_H
#define AL_CTL_CTL_H

#include <signal.h>

#include "base/config.h"
#include "model/db.h"
#include "net/pool.h"

typedef struct ctl {
	const al_config *cfg;
	al_db *db;
	/* The ready network slots; NULL without them (the shims prepare
	 * their own). */
	al_netpool *net;
	/* Set by SIGTERM or SIGINT: long passes stop early. */
	volatile sig_atomic_t stop;
} ctl;

#endif
