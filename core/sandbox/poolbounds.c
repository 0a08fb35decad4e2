/* poolbounds: a template's warm pool bounds, parsed and in effect
 * (poolbounds.h). */
#include "sandbox/poolbounds.h"

#include <string.h>

const char *const al_poolbounds_names[AL_POOL_NBOUNDS] = {"ns_min", "ns_max",
							  "vm_min", "vm_max"};

int al_poolbounds_parse(const char *buf, size_t len,
			al_json_setting out[AL_POOL_NBOUNDS], al_err *err)
{
	return al_json_settings_parse(buf, len, al_poolbounds_names,
				      AL_POOL_NBOUNDS, AL_POOLBOUNDS_MAX, out,
				      err);
}

void al_poolbounds_in_effect(const al_config *cfg, const int *own,
			     const char *driver, uint32_t *min, uint32_t *max)
{
	int vm = strcmp(driver, "vm") == 0;
	int kmin = vm ? AL_POOL_VM_MIN : AL_POOL_NS_MIN;
	int kmax = vm ? AL_POOL_VM_MAX : AL_POOL_NS_MAX;
	*min = own[kmin] >= 0 ? (uint32_t)own[kmin]
			      : (vm ? cfg->warm_pool_vm : cfg->warm_pool);
	if (own[kmax] >= 0)
		*max = (uint32_t)own[kmax];
	else if (*min == 0)
		*max = 0; /* a pool switched off stays off */
	else
		*max = vm ? cfg->warm_pool_vm_max : cfg->warm_pool_max;
	if (*max < *min)
		*max = *min;
	if (!al_config_driver_enabled(cfg, driver))
		*min = *max = 0;
}

json_object *al_poolbounds_json(const al_config *cfg, const int *own)
{
	json_object *o = json_object_new_object();
	json_object *defaults = json_object_new_array();
	static const char *const drivers[] = {"ns", "vm"};
	for (int d = 0; d < 2; d++) {
		uint32_t min, max;
		al_poolbounds_in_effect(cfg, own, drivers[d], &min, &max);
		json_object_object_add(o, al_poolbounds_names[2 * d],
				       json_object_new_int64(min));
		json_object_object_add(o, al_poolbounds_names[2 * d + 1],
				       json_object_new_int64(max));
	}
	for (int k = 0; k < AL_POOL_NBOUNDS; k++)
		if (own[k] < 0)
			json_object_array_add(
				defaults,
				json_object_new_string(al_poolbounds_names[k]));
	json_object_object_add(o, "defaults", defaults);
	return o;
}
