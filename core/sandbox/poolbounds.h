/* poolbounds: a template's own warm pool bounds (stored as the four
 * AL_POOL_* columns of its row, core/model/template.h), as an admin
 * sets them (PUT /v1/templates/{name}/warm_pool), as the API shows them
 * and as the controller keeps the pool within them (with
 * core/sandbox/warmpool.h). Where the template sets none, a bound
 * follows the operator's default (AIRLOCK_WARM_POOL, _MAX, _VM, _VM_MAX).
 * Pure functions: no SQL, no files. */
#ifndef AL_POOLBOUNDS_H
#define AL_POOLBOUNDS_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "base/config.h"
#include "base/err.h"
#include "base/json.h"
#include "model/template.h"

/* The most a template's bound may be (the columns' CHECK says so too). */
#define AL_POOLBOUNDS_MAX 64
/* "ns_min", "ns_max", "vm_min", "vm_max", by AL_POOL_* index. */
extern const char *const al_poolbounds_names[AL_POOL_NBOUNDS];

/* A PUT /v1/templates/{name}/warm_pool body: {"ns_min":N,"ns_max":N,
 * "vm_min":N,"vm_max":N}, each optional, 0..AL_POOLBOUNDS_MAX or null
 * (back to the default), at least one. */
int al_poolbounds_parse(const char *buf, size_t len,
			al_json_setting out[AL_POOL_NBOUNDS], al_err *err);
/* The bounds the warm pool of a template with own bounds `own` follows
 * for driver ("ns" or "vm"): the template's where set, else cfg's. */
void al_poolbounds_in_effect(const al_config *cfg, const int *own,
			     const char *driver, uint32_t *min, uint32_t *max);
/* {"ns_min":..,"ns_max":..,"vm_min":..,"vm_max":..} in effect, and
 * "defaults": the bounds that follow the operator's. */
json_object *al_poolbounds_json(const al_config *cfg, const int *own);

#endif
