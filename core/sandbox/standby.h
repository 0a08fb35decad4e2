/* standby: the warm pool's standbys, everything about them but their
 * number (core/sandbox/warmpool.h) and the launch of their shims
 * (al_shimctl_spawn_standbys).
 *
 * A standby is an airlock-shim started by the controller with
 * --standby TEMPLATE: the machine of one template version, booted with
 * the default limits and no sandbox row, waiting for a create to claim
 * it. It is named by its slot, "standby-v<version>-<12 random>"
 * (al_standby_slot): its rootfs is pool/sandboxes/<slot>, its cgroups
 * are named after the slot, and it listens on
 * run/pool/<template>.<driver>.<slot>.sock (al_standby_socket). Its life:
 *
 *   waiting -- claimed by a create (al_standby_claim) --> a sandbox: the
 *              shim unlinks its socket (no second claimer can reach it),
 *              takes the sandbox's id, limits and run/sbx/<id>.sock;
 *   waiting -- retired (al_standby_retire_*) --> retired: its socket is
 *              moved to run/pool/retired/, where no claim looks, because
 *              its template was deleted or rebuilt or its pool shrinks;
 *   retired -- ended by the controller (al_standby_end_retired);
 *   either  -- its shim died --> what it left is released by the
 *              controller's reconcile (al_standby_reap).
 *
 * Every look at standbys is one scan of run/pool and run/pool/retired
 * (standby.c): the layout of their names lives there only. */
#ifndef AL_STANDBY_H
#define AL_STANDBY_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "base/err.h"
#include "model/db.h"
#include "model/sandbox.h"
#include "sandbox/shimspec.h"

/* A new slot name for a standby of template version version. */
int al_standby_slot(int version, char *out, size_t outlen, al_err *err);
/* run/pool/<tmpl>.<driver>.<slot>.sock: where a waiting standby
 * listens. */
int al_standby_socket(const al_config *cfg, const char *tmpl,
		      const char *driver, const char *slot, char *out,
		      size_t outlen, al_err *err);
/* Remove the socket of a standby from where it is now (run/pool, or
 * run/pool/retired once retired). Its shim calls this before it closes
 * the listener: a socket that is there but refuses is a dead shim's. */
void al_standby_unlink(const al_config *cfg, const char *tmpl,
		       const char *driver, const char *slot);

/* Standbys of (tmpl, driver) waiting that hold template version version
 * (0: any version). */
int al_standby_count(const al_config *cfg, const char *tmpl, const char *driver,
		     int version);

/* Claim one waiting standby of sb's template and driver for sb (its row
 * in state creating): 0 when one now runs as the sandbox (ready gets its
 * pid and accelerator), AL_DECLINED when none could be had. */
int al_standby_claim(const al_config *cfg, const al_sandbox *sb,
		     int64_t deadline_ms, al_shim_ready *ready);
/* Bring sandbox sb (row in state creating) to running: claim a standby
 * where sb's driver is enabled (milliseconds), else start its shim cold
 * (al_shimctl_spawn); ready gets the shim's pid and accelerator for the
 * caller to record. */
int al_standby_claim_or_spawn(const al_config *cfg, al_db *db,
			      const al_sandbox *sb, int64_t deadline_ms,
			      al_shim_ready *ready, al_err *err);

/* Retiring takes a standby out of the pool at once (no claim finds it
 * after); the controller ends it (al_standby_end_retired). Each returns
 * how many it retired. */
/* Every standby of tmpl under driver (NULL: every driver): the template
 * was deleted, or its pool switched off. */
int al_standby_retire_all(const al_config *cfg, const char *tmpl,
			  const char *driver);
/* n of the standbys of (tmpl, driver), whichever (the pool shrinks). */
int al_standby_retire_some(const al_config *cfg, const char *tmpl,
			   const char *driver, int n);
/* Every standby keep() refuses, given its template, driver and version
 * (a template deleted or rebuilt since it was started). */
int al_standby_retire_unless(const al_config *cfg,
			     int (*keep)(const char *tmpl, const char *driver,
					 int version, void *arg),
			     void *arg);
/* The controller: end every retired standby through its shim (releasing
 * what a dead one left); how many ended. */
int al_standby_end_retired(const al_config *cfg);

/* The controller's reconcile: release what every standby whose shim
 * died left (socket, rootfs, cgroups); how many are alive. */
int al_standby_reap(const al_config *cfg);
/* 1 if the standby of slot (waiting or retired) has a live shim. */
int al_standby_alive(const al_config *cfg, const char *slot);

#endif
