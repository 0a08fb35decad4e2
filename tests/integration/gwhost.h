/* gwhost: what the controller and the shim do for one sandbox's gateway,
 * standing alone, shared by netslot-tool's gateway command and
 * bench/gwrun.c: an ns slot leased from a pool (prepared if none is
 * ready), the host CA (<state>/keys) and its mint service (the
 * controller's controller/mint.c, linked in), a gateway uid, the launch
 * (core/net/gwlaunch), then GW_CONFIG frames and their GW_ACKs. */
#ifndef AL_TESTS_GWHOST_H
#define AL_TESTS_GWHOST_H

#include <arpa/inet.h>
#include <stdint.h>

#include "ca/ca.h"
#include "host/uidrange.h"
#include "mint.h"
#include "net/gwlaunch.h"
#include "net/netspec.h"
#include "net/pool.h"
#include "proto/agentproto.h"

/* How long a GW_ACK (or a CRED_SET_ACK) may take. */
#define GWHOST_ACK_TIMEOUT_MS 10000

typedef struct gwhost {
	al_netpool *pool;
	al_netlease lease;
	al_ca *ca;
	al_mintd *mint;
	al_uidrange uid;
	al_gateway_proc proc; /* its control_fd made blocking */
	const char *sandbox;
	char run_dir[AL_PATH_MAX];
	char gateway[INET_ADDRSTRLEN]; /* the slot's gateway address */
	int64_t launch_ms;	       /* al_gateway_launch's own time */
} gwhost;

/* The configuration of our environment (al_config_load) with state as
 * AIRLOCK_STATE: what a shim of that state directory would have. */
int gwhost_config(al_config *cfg, const char *state, al_err *err);
/* Start prog as sandbox's gateway on a slot of pool, whose state
 * directory is cfg->state_dir, with the environment a shim gives it
 * (al_gateway_env_fill of cfg) and cred_fd (> 0) as its credential
 * channel (fd 7; the caller keeps its copy). On failure what was taken
 * is released. */
int gwhost_start(gwhost *h, al_netpool *pool, const al_config *cfg,
		 const char *prog, const char *sandbox, int cred_fd,
		 al_err *err);
/* Send c (its sandbox and gateway filled in here) as GW_CONFIG with id and
 * wait up to 10 s for the gateway's answer: a GW_ACK of that id in *ack
 * (the caller frees it with al_frame_free). */
int gwhost_configure(gwhost *h, al_gw_config *c, uint32_t id, al_frame *ack,
		     al_err *err);
/* Send sig (0: none; the end of the control channel stops it too), reap
 * the gateway and release everything. The gateway's waitid status: 0
 * when it exited with 0. */
int gwhost_stop(gwhost *h, int sig);

#endif
