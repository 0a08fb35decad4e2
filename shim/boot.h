/* shim boot: the template's part in a sandbox's life. */
#ifndef AL_SHIM_BOOT_H
#define AL_SHIM_BOOT_H

#include <stddef.h>

#include "model/template.h"
#include "proto/agentproto.h"
#include "shim.h"

/* boot.c: the template's part in a sandbox's life. */
/* What the template's version asks (the spec's boot, taken over: *tv
 * is left empty) into s->tv; NULL: the defaults of a template without
 * version rows (/, root, no START/READY). */
void shim_template_set(shim *s, al_template_version *tv);
/* The rootfs to snapshot: s->tv's version, else the template's link. */
int shim_template_rootfs(shim *s, char *out, size_t outlen, al_err *err);
/* Start the template's START command and wait for its READY check. */
int shim_template_start(shim *s, al_err *err);
/* One `true` through the agent (a vm standby pays its first-exec cost). */
void shim_warm_up(shim *s);
/* req with the template's ENV under the sandbox's env under the
 * request's, and the template's WORKDIR and USER unless the request
 * names its own; packed, NULL on OOM (err). */
char *shim_exec_defaults(const shim *s, const al_exec_msg *req, al_err *err);

#endif
