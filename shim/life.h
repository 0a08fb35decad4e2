/* shim life: the sandbox brought up, claimed (a standby turned into a
 * sandbox) and brought down. */
#ifndef AL_SHIM_LIFE_H
#define AL_SHIM_LIFE_H

#include <stdint.h>

#include "base/err.h"
#include "model/sandbox.h"
#include "model/sandbox_state.h"
#include "model/template.h"
#include "sandbox/shimspec.h"
#include "shim.h"

/* A shim with nothing yet, for sandbox (or standby slot) name. */
void shim_init(shim *s, const char *name);

/* Bring the sandbox of spec up (standby: a warm-pool machine of its
 * template, waiting for a CLAIM), the spec and the version's boot taken
 * over; *ready is what to report (al_shim_ready_pack, malloc'ed). t0:
 * when the shim started, for the log's step times. A failure is the
 * caller's to shim_teardown. */
int shim_bring_up(shim *s, int standby, al_sandbox *spec,
		  al_template_version *tv, int has_boot, int64_t t0,
		  char **ready, al_err *err);
/* The "running" line with each start step's time; unpins the network
 * slot's mount (after the answer: an unmount waits for RCU). */
void shim_log_running(shim *s);

/* Release everything the sandbox holds (agent, machine, rootfs, socket)
 * and spool the final event (core/sandbox/spool.h). Safe to call more than
 * once. */
void shim_teardown(shim *s, al_event ev, const char *detail);

/* Turn this standby shim into the shim of the sandbox of the CLAIM's
 * payload (al_shim_spec_unpack, no boot): rename its resources, give the
 * machine the sandbox's identity (driver adopt: limits and hostname; a
 * vm also fresh entropy and clock), move the control socket; *result
 * is the RESULT to answer (al_shim_ready_pack, malloc'ed): the claimer
 * records the sandbox running. adopt is called only here, while a
 * standby has no request in flight on the agent channel: the vm driver
 * speaks to the agent synchronously on it. AL_DECLINED (err filled): a
 * spec that is malformed, for another template, version or driver, or
 * asks for a smaller disk than this standby's grown one; nothing
 * changed and the standby waits on. -1: the standby is half-turned and
 * the caller must end this shim (its end is spooled for the sandbox;
 * the claimer falls back to a cold start). */
int shim_claim(shim *s, const void *payload, size_t len, char **result,
	       al_err *err);

#endif
