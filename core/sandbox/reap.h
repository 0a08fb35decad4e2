/* reap: release what a sandbox holds on the host when its shim is gone
 * (crashed, killed, or the host restarted): rootfs subvolume, control
 * socket and pid file, cgroup leaves. Idempotent; used by the controller's
 * reconcile pass, and for a dead standby's by core/sandbox/standby.c. */
#ifndef AL_REAP_H
#define AL_REAP_H

#include "base/config.h"
#include "base/err.h"

int al_reap_sandbox(const al_config *cfg, const char *id, al_err *err);

/* 1 if the sandbox's shim answers on its control socket, else 0. */
int al_reap_shim_alive(const al_config *cfg, const char *id);

#endif
