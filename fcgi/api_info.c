/* GET /v1/info: which drivers this host can run now, the default one, and
 * the accelerator vm sandboxes get (core/driver.h: the decision creates
 * read too, so both always agree). */
#include "driver.h"
#include "http.h"
#include "policy/policypub.h"

/* The controller's view, one for every worker (core/policy/policypub.h). */
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

void fcgi_api_info(al_req *r)
{
	al_driver_status st;
	al_driver_status_read(r->cfg, &st);
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
		json_object_object_add(o, "vm_accel",
				       json_object_new_string(st.vm_accel));
	else
		json_object_object_add(o, "vm_unavailable_reason",
				       json_object_new_string(st.vm_why));
	/* The operator's files and their errors, as the controller loaded
	 * them: for admin keys. */
	if (r->who.role == AL_ROLE_ADMIN)
		json_object_object_add(o, "policies", policies_status(r->cfg));
	fcgi_http_json(r, 200, o);
	json_object_put(o);
}
