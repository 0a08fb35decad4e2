#include "driver.h"

#include <string.h>

static const al_driver *const drivers[] = {
	&al_driver_ns,
	&al_driver_vm,
};

const al_driver *al_driver_find(const char *name, al_err *err)
{
	if (name == NULL)
		return al_err_set(err, AL_EINVAL, 0, "no driver named"), NULL;
	for (size_t i = 0; i < sizeof drivers / sizeof drivers[0]; i++) {
		if (strcmp(drivers[i]->name, name) == 0)
			return drivers[i];
	}
	al_err_set(err, AL_EINVAL, 0, "unknown driver \"%.32s\"", name);
	return NULL;
}
