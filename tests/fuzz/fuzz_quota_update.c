/* Fuzz the settings bodies (al_json_settings_parse): PUT
 * /v1/projects/{name}/quota and PUT /v1/templates/{name}/warm_pool. Any
 * bytes give an update naming at least one known field with values in
 * range, or a clean AL_EINVAL / AL_ETOOBIG. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "model/project.h"
#include "sandbox/poolbounds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void pool_bounds(const uint8_t *data, size_t size)
{
	al_json_setting u[AL_POOL_NBOUNDS];
	al_err err;
	if (al_poolbounds_parse((const char *)data, size, u, &err) < 0) {
		if (err.code != AL_EINVAL && err.code != AL_ETOOBIG)
			abort();
		return;
	}
	int any = 0;
	for (int k = 0; k < AL_POOL_NBOUNDS; k++) {
		if (u[k].is_null && !u[k].set)
			abort();
		if (u[k].set && !u[k].is_null &&
		    (u[k].value < 0 || u[k].value > AL_POOLBOUNDS_MAX))
			abort();
		any |= u[k].set;
	}
	if (!any)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pool_bounds(data, size);

	al_quota_update u;
	al_err err;
	if (al_quota_update_parse((const char *)data, size, &u, &err) < 0) {
		if (err.code != AL_EINVAL && err.code != AL_ETOOBIG)
			abort();
		return 0;
	}
	int any = 0;
	for (size_t i = 0; i < AL_QUOTA_NFIELDS; i++) {
		if (u.is_null[i] && !u.set[i])
			abort();
		if (u.set[i] && !u.is_null[i] &&
		    al_quota_value(&u.value, i) > (UINT64_C(1) << 62))
			abort();
		any |= u.set[i];
	}
	if (!any)
		abort();
	return 0;
}
