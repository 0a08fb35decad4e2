/* reap: release what a sandbox holds on the host when its shim is gone
 * (crashed, killed, or the host restarted): rootfs subvolume, control
 * socket and pid file, cgroup leaves. Idempotent; used by the controller's
 * reconcile pass. */
#ifndef AL_REAP_H
#define AL_REAP_H

#include "config.h"
#include "err.h"

int al_reap_sandbox(const al_config *cfg, const char *id, al_err *err);

/* 1 if the sandbox's shim answers on its control socket, else 0. */
int al_reap_shim_alive(const al_config *cfg, const char *id);

/* Warm pool standbys (run/pool/<template>.<driver>.<slot>.sock). With only_slot
 * NULL: release every standby whose shim is gone and return how many
 * are alive. With a slot: return 1 if that standby is alive, else 0
 * (releasing nothing). */
int al_reap_standbys(const al_config *cfg, const char *only_slot);

#endif
