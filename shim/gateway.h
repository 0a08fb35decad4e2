/* shim gateway: the sandbox's egress gateway, launched and supervised.
 *
 * Once the sandbox is live (a start, or a claim: a standby has no
 * sandbox to configure its gateway for), the shim takes a gateway uid
 * (al_uidrange_gw, held for the sandbox's life) and starts
 * airlock-gateway on the sandbox's slot (core/net/gwlaunch.h); its first
 * frame on the control fd is GW_CONFIG (core/netspec.h). The gateway is
 * watched through its pidfd: when it dies it is started again, after
 * 200 ms, then twice as long each time up to 30 s (the delay is reset
 * once one has run for a minute): bounded restarts. While none runs,
 * nothing listens on the gateway's sockets, so the slot's rules drop
 * every packet of the guest: no egress, fail closed. At the end it is
 * killed and reaped before the slot is released. */
#ifndef AL_SHIM_GATEWAY_H
#define AL_SHIM_GATEWAY_H

#include <poll.h>
#include <stdint.h>
#include <sys/types.h>

#include "agentproto.h"
#include "config.h"
#include "err.h"
#include "net/gwlaunch.h"
#include "netspec.h"
#include "sandbox.h"
#include "uidrange.h"

/* The program, for tests and operators: default <libexec>/airlock-gateway. */
#define SHIM_GW_PROG_ENV "AIRLOCK_GATEWAY"
#define SHIM_GW_BACKOFF_MIN_MS 200
#define SHIM_GW_BACKOFF_MAX_MS 30000
#define SHIM_GW_STABLE_MS 60000
/* The poll loop's part (relay.c). */
#define SHIM_WHO_GW (-5)
#define SHIM_WHO_GW_CTL (-6)
#define SHIM_GW_POLL_MAX 2

typedef struct shim_gw {
	int on; /* the sandbox has a gateway (begun, not ended) */
	const al_netslot *slot;
	char sandbox[64];
	char prog[AL_PATH_MAX];
	char run_dir[AL_PATH_MAX];
	char *config; /* packed GW_CONFIG, sent to every start */
	al_uidrange uid;
	al_gateway_proc proc; /* pid 0: none runs */
	al_frame_reader in;
	uint32_t next_id;
	int64_t started_ms, next_start_ms;
	int backoff_ms;
	unsigned starts;
} shim_gw;

void shim_gw_init(shim_gw *g);
/* Sandbox sb's gateway on slot: the uid taken, GW_CONFIG packed with
 * network ns, the first start tried (a failed start is logged and
 * retried, as a death is). -1 when the uid or the config cannot be had
 * (the start fails: no sandbox runs with no way to get a gateway). */
int shim_gw_begin(shim_gw *g, const al_config *cfg, const al_netslot *slot,
		  const al_sandbox *sb, const al_netspec *ns, al_err *err);
int shim_gw_poll(shim_gw *g, struct pollfd *pfd, int *who, int n);
void shim_gw_event(shim_gw *g, int who, short revents);
/* ms until the next restart is due, or -1. */
int shim_gw_timeout(const shim_gw *g, int64_t now);
void shim_gw_tick(shim_gw *g, int64_t now);
/* The pid of the running gateway, 0 when none runs. */
pid_t shim_gw_pid(const shim_gw *g);
/* Kill and reap it, drop the uid. Idempotent. */
void shim_gw_end(shim_gw *g);

#endif
