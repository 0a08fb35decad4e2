/* GET /v1/info: which drivers this host can run now, the default one, and
 * the accelerator vm sandboxes get. Also the driver decision that create
 * shares with it, so both always agree. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "policy.h"
#include "vm/probe.h"

/* The egress policy as this process loads it (the gateways load their
 * own copies the same way): opened at the worker's start
 * (al_api_info_init; again at a /v1/info while it never loaded),
 * reloaded when the file changes. One handle, one thread at a time. */
static pthread_mutex_t policy_lock = PTHREAD_MUTEX_INITIALIZER;
static al_policy *egress_policy;

static json_object *time_json(time_t t)
{
	char buf[32];
	struct tm tm;
	if (t == 0 || gmtime_r(&t, &tm) == NULL)
		return NULL;
	strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_object_new_string(buf);
}

static void egress_policy_path(const al_config *cfg, char *out, size_t len)
{
	snprintf(out, len, "%s/egress.lua", cfg->policies_dir);
}

void al_api_info_init(const al_config *cfg)
{
	char path[AL_PATH_MAX + 16];
	egress_policy_path(cfg, path, sizeof path);
	al_err err = {0};
	pthread_mutex_lock(&policy_lock);
	if (egress_policy == NULL)
		egress_policy = al_policy_open(path, AL_POLICY_EGRESS, NULL,
					       &err);
	pthread_mutex_unlock(&policy_lock);
}

static json_object *egress_policy_status(const al_config *cfg)
{
	char path[AL_PATH_MAX + 16];
	egress_policy_path(cfg, path, sizeof path);
	json_object *o = json_object_new_object();
	pthread_mutex_lock(&policy_lock);
	al_err err = {0};
	if (egress_policy == NULL)
		egress_policy = al_policy_open(path, AL_POLICY_EGRESS, NULL,
					       &err);
	else
		al_policy_reload_if_changed(egress_policy);
	if (egress_policy == NULL) {
		/* Never loaded: every gateway denies everything. */
		json_object_object_add(o, "path", json_object_new_string(path));
		json_object_object_add(o, "loaded", json_object_new_boolean(0));
		json_object_object_add(o, "error",
				       json_object_new_string(err.msg));
		pthread_mutex_unlock(&policy_lock);
		return o;
	}
	al_policy_stat st;
	al_policy_status(egress_policy, &st);
	json_object_object_add(o, "path", json_object_new_string(st.path));
	json_object_object_add(o, "loaded", json_object_new_boolean(1));
	json_object_object_add(o, "loaded_at", time_json(st.loaded_at));
	json_object_object_add(o, "reloads",
			       json_object_new_int64((int64_t)st.reloads));
	json_object_object_add(o, "reload_error",
			       st.reload_error[0] != '\0'
				       ? json_object_new_string(st.reload_error)
				       : NULL);
	json_object_object_add(o, "reload_error_at",
			       st.reload_error[0] != '\0'
				       ? time_json(st.reload_error_at)
				       : NULL);
	pthread_mutex_unlock(&policy_lock);
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
	/* The operator's files and their errors: for admin keys. */
	if (r->who.role == AL_ROLE_ADMIN) {
		json_object *pol = json_object_new_object();
		json_object_object_add(pol, "egress",
				       egress_policy_status(r->cfg));
		json_object_object_add(o, "policies", pol);
	}
	al_http_json(r, 200, o);
	json_object_put(o);
}
