/* GET /v1/info: which drivers this host can run now, the default one, and
 * the accelerator vm sandboxes get. Also the driver decision that create
 * shares with it, so both always agree. */
#include <stdio.h>
#include <string.h>

#include "http.h"
#include "policypub.h"
#include "vm/probe.h"

/* The controller's view, one for every worker (core/policypub.h). */
static json_object *policies_status(const al_config *cfg)
{
	al_err err = {0};
	json_object *o = al_policypub_read(cfg->run_dir, &err);
	if (o != NULL)
		return o;
	o = json_object_new_object();
	json_object_object_add(
		o, "error",
		json_object_new_string(err.code == AL_ENOENT
					       ? "no status published:"
						 " airlock-controller is not"
						 " running"
					       : err.msg));
	return o;
}

void al_api_driver_status(const al_config *cfg, al_driver_status *st)
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
	st->accel = al_vm_accel_load(cfg->state_dir);
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
							 st->accel == AL_VM_KVM)
					     ? "vm"
					     : "ns";
}

void al_api_info(al_req *r)
{
	al_driver_status st;
	al_api_driver_status(r->cfg, &st);
	json_object *o = json_object_new_object();
	json_object *drivers = json_object_new_array();
	if (st.ns_enabled)
		json_object_array_add(drivers, json_object_new_string("ns"));
	if (st.vm_usable)
		json_object_array_add(drivers, json_object_new_string("vm"));
	json_object_object_add(o, "drivers", drivers);
	json_object_object_add(o, "default_driver",
			       json_object_new_string(st.default_driver));
	if (st.vm_usable)
		json_object_object_add(
			o, "vm_accel",
			json_object_new_string(al_vm_accel_name(st.accel)));
	else
		json_object_object_add(o, "vm_unavailable_reason",
				       json_object_new_string(st.vm_why));
	/* The operator's files and their errors, as the controller loaded
	 * them: for admin keys. */
	if (r->who.role == AL_ROLE_ADMIN)
		json_object_object_add(o, "policies", policies_status(r->cfg));
	al_http_json(r, 200, o);
	json_object_put(o);
}
