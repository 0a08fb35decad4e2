#include "sandbox/sandbox_req.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/json.h"
#include "base/path.h"
#include "net/netspec.h"

static const char *const create_fields[] = {
	"template",  "timeout",	   "env",	  "metadata",
	"memory_mb", "pids",	   "cpu_shares",  "driver",
	"disk_mb",   "project",	   "network",	  "cpus",
	"snapshot",  "on_timeout", "auto_resume", NULL,
};

/* The request's "network" (mode required when it is there) as its
 * canonical object, or the default's. */
static int create_network(json_object *o, json_object **out, al_err *err)
{
	json_object *n = NULL;
	al_netspec ns;
	if (json_object_object_get_ex(o, "network", &n) && n != NULL) {
		if (al_netspec_from_json(n, "network", true, &ns, err) < 0)
			return -1;
	} else {
		al_netspec_default(&ns);
	}
	*out = al_netspec_to_json(&ns);
	al_netspec_free(&ns);
	if (*out == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	return 0;
}

int al_create_req_parse(const char *buf, size_t len, uint32_t default_timeout_s,
			uint32_t max_timeout_s, al_create_req *out, al_err *err)
{
	int64_t n;
	int r;

	memset(out, 0, sizeof *out);
	out->root = al_json_parse_object(buf, len, err);
	if (out->root == NULL)
		return -1;
	json_object *o = out->root;
	if (al_json_check_fields(o, create_fields, err) < 0)
		goto fail;

	out->template_name = "minimal";
	if (al_json_get_str(o, "template", 63, &out->template_name, NULL, err) <
	    0)
		goto fail;
	if (out->template_name[0] == '\0') {
		al_err_set(err, AL_EINVAL, 0, "'template' must not be empty");
		goto fail;
	}

	const char *on_timeout = NULL;
	r = al_json_get_str(o, "on_timeout", 15, &on_timeout, NULL, err);
	if (r < 0)
		goto fail;
	if (r > 0 && strcmp(on_timeout, "delete") != 0 &&
	    strcmp(on_timeout, "suspend") != 0) {
		al_err_set(err, AL_EINVAL, 0,
			   "'on_timeout' must be \"delete\" or \"suspend\"");
		goto fail;
	}
	out->on_timeout_suspend = r > 0 && strcmp(on_timeout, "suspend") == 0;
	if (al_json_get_bool(o, "auto_resume", &out->auto_resume, err) < 0)
		goto fail;

	r = al_json_get_str(o, "snapshot", 63, &out->snapshot, NULL, err);
	if (r < 0)
		goto fail;
	if (r > 0 && !al_id_valid(out->snapshot)) {
		al_err_set(err, AL_EINVAL, 0,
			   "'snapshot' is not a snapshot id");
		goto fail;
	}
	if (r > 0 && json_object_object_get_ex(o, "template", NULL)) {
		al_err_set(err, AL_EINVAL, 0,
			   "give 'template' or 'snapshot', not both: a "
			   "sandbox from a snapshot has its template");
		goto fail;
	}

	r = al_json_get_str(o, "driver", 15, &out->driver, NULL, err);
	if (r < 0)
		goto fail;
	if (r > 0 && strcmp(out->driver, "ns") != 0 &&
	    strcmp(out->driver, "vm") != 0) {
		al_err_set(err, AL_EINVAL, 0,
			   "'driver' must be \"ns\" or \"vm\"");
		goto fail;
	}

	r = al_json_get_str(o, "project", 63, &out->project, NULL, err);
	if (r < 0)
		goto fail;
	if (r > 0 && !al_id_valid(out->project)) {
		al_err_set(err, AL_EINVAL, 0,
			   "'project' must be a project name");
		goto fail;
	}

	out->timeout_s = default_timeout_s;
	r = al_json_get_int(o, "timeout", 1, max_timeout_s, &n, err);
	if (r < 0)
		goto fail;
	if (r > 0)
		out->timeout_s = (uint32_t)n;

	if (al_json_get_str_map(o, "env", &al_json_env_limits, &out->env, err) <
	    0)
		goto fail;
	if (al_json_get_str_map(o, "metadata", &al_json_metadata_limits,
				&out->metadata, err) < 0)
		goto fail;

	r = al_json_get_int(o, "memory_mb", 16, 1024 * 1024, &n, err);
	if (r < 0)
		goto fail;
	if (r > 0)
		out->memory_mb = (uint64_t)n;
	r = al_json_get_int(o, "pids", 8, 65536, &n, err);
	if (r < 0)
		goto fail;
	if (r > 0)
		out->pids = (uint32_t)n;
	r = al_json_get_int(o, "cpu_shares", 2, 262144, &n, err);
	if (r < 0)
		goto fail;
	if (r > 0)
		out->cpu_shares = (uint32_t)n;
	r = al_json_get_millis(o, "cpus", AL_CPU_MILLIS_MIN,
			       AL_CPU_MILLIS_LIMIT, &n, err);
	if (r < 0)
		goto fail;
	if (r > 0)
		out->cpu_millis = (uint32_t)n;
	r = al_json_get_int(o, "disk_mb", AL_DISK_MB_MIN, AL_DISK_MB_LIMIT, &n,
			    err);
	if (r < 0)
		goto fail;
	if (r > 0)
		out->disk_mb = (uint32_t)n;
	if (create_network(o, &out->network, err) < 0)
		goto fail;
	return 0;
fail:
	al_create_req_free(out);
	return -1;
}

void al_create_req_free(al_create_req *req)
{
	json_object_put(req->root);
	json_object_put(req->network);
	memset(req, 0, sizeof *req);
}

static const char *const exec_fields[] = {
	"cmd",	"env",	      "cwd",	      "stdin", "timeout",
	"user", "background", "kill_on_exit", NULL,
};

/* USER as the agent takes it: name or uid, optional ":group" or ":gid". */
static int user_valid(const char *u)
{
	size_t n = strlen(u), colons = 0;
	if (n == 0 || n > 64 || u[0] == ':' || u[n - 1] == ':')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = u[i];
		if (c == ':' && ++colons > 1)
			return 0;
		if (c != ':' && c != '.' && c != '_' && c != '-' &&
		    !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') &&
		    !(c >= '0' && c <= '9'))
			return 0;
	}
	return 1;
}

int al_exec_req_parse(const char *buf, size_t len, al_exec_req *out,
		      al_err *err)
{
	int64_t n;
	int r;
	const char *cwd = NULL;

	memset(out, 0, sizeof *out);
	out->root = al_json_parse_object(buf, len, err);
	if (out->root == NULL)
		return -1;
	json_object *o = out->root;
	if (al_json_check_fields(o, exec_fields, err) < 0)
		goto fail;

	r = al_json_get_str_array(o, "cmd", 1, 4096, 256 * 1024, &out->cmd,
				  err);
	if (r < 0)
		goto fail;
	if (r == 0) {
		al_err_set(err, AL_EINVAL, 0,
			   "'cmd' is required (array of strings)");
		goto fail;
	}
	if (json_object_get_string_len(json_object_array_get_idx(out->cmd,
								 0)) == 0) {
		al_err_set(err, AL_EINVAL, 0, "'cmd[0]' must not be empty");
		goto fail;
	}
	if (al_json_get_str_map(o, "env", &al_json_env_limits, &out->env, err) <
	    0)
		goto fail;
	if (al_json_get_str(o, "cwd", AL_API_PATH_MAX, &cwd, NULL, err) < 0)
		goto fail;
	/* No cwd: the template's WORKDIR (the shim fills it in). */
	if (cwd != NULL &&
	    al_path_normalize(cwd, out->cwd, sizeof out->cwd, err) < 0) {
		al_err_wrap(err, "cwd");
		goto fail;
	}
	if (al_json_get_str(o, "user", 64, &out->user, NULL, err) < 0)
		goto fail;
	if (out->user != NULL && !user_valid(out->user)) {
		al_err_set(err, AL_EINVAL, 0,
			   "'user' must be a name or uid, optionally "
			   "with :group");
		goto fail;
	}
	r = al_json_get_str(o, "stdin", AL_JSON_BODY_MAX, &out->stdin_data,
			    &out->stdin_len, err);
	if (r < 0)
		goto fail;
	out->timeout_s = AL_EXEC_TIMEOUT_DEFAULT;
	r = al_json_get_int(o, "timeout", 1, AL_EXEC_TIMEOUT_MAX, &n, err);
	if (r < 0)
		goto fail;
	if (r > 0)
		out->timeout_s = (uint32_t)n;
	if (al_json_get_bool(o, "background", &out->background, err) < 0 ||
	    al_json_get_bool(o, "kill_on_exit", &out->kill_on_exit, err) < 0)
		goto fail;
	return 0;
fail:
	al_exec_req_free(out);
	return -1;
}

void al_exec_req_free(al_exec_req *req)
{
	json_object_put(req->root);
	memset(req, 0, sizeof *req);
}
