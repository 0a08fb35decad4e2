/* A sandbox's row without the database: freeing its fields, its JSON for
 * the API, a fresh id (sandbox.h). Apart from sandbox.c's SQL so that a
 * program with no database connection (the shim, which frees the rows
 * its spec unpacks into) does not link the sandbox's SQL. */
#include "model/sandbox.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

#include "base/json.h"
#include "model/sandbox_state.h"
#include "net/netspec.h"

void al_sandbox_free_fields(al_sandbox *sb)
{
	json_object_put(sb->metadata);
	json_object_put(sb->env);
	json_object_put(sb->network);
	sb->metadata = NULL;
	sb->env = NULL;
	sb->network = NULL;
}

json_object *al_sandbox_to_json(const al_sandbox *sb)
{
	json_object *o = json_object_new_object();
	if (o == NULL)
		return NULL;
	json_object *meta = sb->metadata != NULL ? json_object_get(sb->metadata)
						 : json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(sb->id));
	if (sb->project[0] != '\0')
		json_object_object_add(o, "project",
				       json_object_new_string(sb->project));
	json_object_object_add(
		o, "state", json_object_new_string(al_state_name(sb->state)));
	json_object_object_add(o, "operation",
			       sb->op[0] != '\0'
				       ? json_object_new_string(sb->op)
				       : NULL);
	json_object_object_add(o, "template",
			       json_object_new_string(sb->template_name));
	json_object_object_add(o, "driver", json_object_new_string(sb->driver));
	if (sb->template_version > 0)
		json_object_object_add(
			o, "template_version",
			json_object_new_int(sb->template_version));
	/* Only a vm has an accelerator; it is known once the shim ran it. */
	if (strcmp(sb->driver, "vm") == 0 && sb->accel[0] != '\0')
		json_object_object_add(o, "accel",
				       json_object_new_string(sb->accel));
	json_object_object_add(o, "created_at",
			       json_object_new_string(sb->created_at));
	json_object_object_add(o, "expires_at",
			       json_object_new_string(sb->expires_at));
	if (sb->last_activity_at[0] != '\0')
		json_object_object_add(
			o, "last_activity_at",
			json_object_new_string(sb->last_activity_at));
	json_object_object_add(o, "metadata", meta);
	json_object_object_add(
		o, "memory_mb",
		json_object_new_int64((int64_t)(sb->limits.memory_bytes >>
						20)));
	json_object_object_add(o, "pids",
			       json_object_new_int64(sb->limits.pids_max));
	json_object_object_add(o, "cpu_shares",
			       json_object_new_int64(sb->limits.cpu_shares));
	json_object_object_add(o, "cpus",
			       al_json_new_millis(sb->limits.cpu_millis));
	json_object_object_add(
		o, "disk_mb",
		json_object_new_int64((int64_t)(sb->limits.disk_bytes >> 20)));
	json_object_object_add(o, "network", al_sandbox_network_json(sb));
	json_object_object_add(o, "on_timeout",
			       json_object_new_string(sb->on_timeout_suspend
							      ? "suspend"
							      : "delete"));
	json_object_object_add(o, "auto_resume",
			       json_object_new_boolean(sb->auto_resume));
	if (sb->recovered_from[0] != '\0')
		json_object_object_add(
			o, "recovered_from",
			json_object_new_string(sb->recovered_from));
	if (sb->state == AL_ST_ERROR && sb->error[0] != '\0')
		json_object_object_add(o, "error",
				       json_object_new_string(sb->error));
	return o;
}

json_object *al_sandbox_network_json(const al_sandbox *sb)
{
	if (sb->network != NULL)
		return json_object_get(sb->network);
	al_netspec ns;
	al_netspec_default(&ns);
	return al_netspec_to_json(&ns);
}

int al_sandbox_new_id(char out[21], al_err *err)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char buf[64];
	size_t k = 0;

	while (k < 20) {
		ssize_t n = getrandom(buf, sizeof buf, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return al_err_sys(err, AL_ESYS, errno, "getrandom");
		}
		/* Reject bytes >= 252 so each of the 36 symbols is equally
		 * likely. */
		for (ssize_t i = 0; i < n && k < 20; i++)
			if (buf[i] < 252)
				out[k++] = alphabet[buf[i] % 36];
	}
	out[20] = '\0';
	return 0;
}
