/* shimspec: the two messages of starting a shim (core/sandbox/shimctl.h
 * starts and claims shims; shim/ is the other end).
 *
 * The spec is what a shim is told to run: the sandbox (id, template and
 * version, driver, limits, env) and what the template's version asks of
 * the machine (boot: env, workdir, user, START, READY). It is the shim's
 * stdin when started cold (id set) or as a standby (id "", no limits or
 * env) and the CLAIM frame's payload to a standby (no boot: the standby
 * has it). The shim holds no database connection: this is all it
 * knows of its sandbox. Never holds secrets in argv, so it is not argv.
 *
 *   {"id":"...","template":"minimal","template_version":3,"driver":"ns",
 *    "limits":{"memory_bytes":N,"pids":N,"cpu_shares":N,"cpu_millis":N,
 *              "disk_bytes":N},
 *    "env":{"K":"V"},"network":{NETSPEC (core/net/netspec.h)},
 *    "boot":{"env":{},"workdir":"/","user":"root","start":[..],
 *            "ready":[..]},
 *    "resume":"<snapshot id>"}
 *
 * "resume" (a suspended sandbox's start): its files and, where the
 * snapshot holds it, its machine come from that snapshot
 * (al_config_snapshot_dir) instead of the template.
 *
 * The ready report is what a shim says once its sandbox runs. */
#ifndef AL_SHIMSPEC_H
#define AL_SHIMSPEC_H

#include <stddef.h>

#include "base/err.h"
#include "model/sandbox.h"
#include "model/template.h"

/* Pack: tv NULL leaves boot out. Unpack checks every field (ids, names,
 * limits in range, env and argv shapes); sb gets the sandbox fields (the
 * caller frees them with al_sandbox_free_fields), tv the boot (freed
 * with al_template_version_free) and *has_boot whether there was one. */
char *al_shim_spec_pack(const al_sandbox *sb, const al_template_version *tv,
			al_err *err);
int al_shim_spec_unpack(const void *payload, size_t len, al_sandbox *sb,
			al_template_version *tv, int *has_boot, al_err *err);

/* The ready report (the ready fd's "OK <json>" line of a cold start, the
 * RESULT of a CLAIM): {"pid":N,"accel":"..."}, the shim's pid and the
 * accelerator ("kvm", "tcg", "" for none). */
typedef struct al_shim_ready {
	int pid;
	char accel[8];
	/* A resume that could not bring the memory back (ns, or a vm
	 * snapshot this host cannot load): "resumed_cold":true. */
	int cold;
} al_shim_ready;
char *al_shim_ready_pack(const al_shim_ready *r, al_err *err);
int al_shim_ready_unpack(const void *payload, size_t len, al_shim_ready *out,
			 al_err *err);

#endif
