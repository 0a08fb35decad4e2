#include "driver.h"

#include <stdio.h>
#include <string.h>

#include "vm/probe.h"

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

void al_driver_status_read(const al_config *cfg, al_driver_status *st)
{
	memset(st, 0, sizeof *st);
	st->ns_enabled = al_config_driver_enabled(cfg, "ns");
	if (al_config_driver_enabled(cfg, "vm"))
		st->vm_usable = al_vm_usable(cfg->state_dir, st->vm_why,
					     sizeof st->vm_why);
	else
		snprintf(st->vm_why, sizeof st->vm_why,
			 "disabled by AIRLOCK_DRIVERS=%s",
			 cfg->drivers_setting);
	al_vm_accel accel = al_vm_accel_load(cfg->state_dir);
	st->vm_accel = al_vm_accel_name(accel);
	if (cfg->default_driver[0] != '\0')
		/* The operator's choice stands even when vm cannot run
		 * right now: creates then fail with the reason instead of
		 * silently getting the weaker ns isolation. */
		st->default_driver = strcmp(cfg->default_driver, "vm") == 0
					     ? "vm"
					     : "ns";
	else
		/* Under TCG a vm is slower than a jail by orders of
		 * magnitude at everything but isolation; it is the default
		 * only where KVM runs guests. */
		st->default_driver = !st->ns_enabled || (st->vm_usable &&
							 accel == AL_VM_KVM)
					     ? "vm"
					     : "ns";
}
