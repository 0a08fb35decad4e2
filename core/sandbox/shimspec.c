/* The shim's spec and ready report (shimspec.h). */
#include "sandbox/shimspec.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/json.h"
#include "model/sandbox_state.h"
#include "net/netspec.h"

/* A template's ENV comes from its Airlockfile (core/template/airlockfile.h): any
 * name, up to AL_AF_MAX_ENV of them. */
static const al_json_map_limits boot_env_limits = {
	.max_entries = 4096,
	.max_key = 4096,
	.max_value = AL_JSON_BODY_MAX,
	.env_names = 0,
};
#define SPEC_ARGS_MAX 4096
#define SPEC_ARG_MAX (256 * 1024)
/* Beyond any host's memory or pid space: limits in range, never 0. */
#define SPEC_BYTES_MAX ((int64_t)1 << 50)
#define SPEC_PIDS_MAX ((int64_t)1 << 22)
#define SPEC_SHARES_MAX ((int64_t)1 << 18)
/* A qgroup number has 48 bits (core/pool/store.h). */
#define SPEC_GROUP_MAX ((int64_t)1 << 47)

static void add_str(json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, json_object_new_string(v));
}

static json_object *boot_to_json(const al_template_version *tv)
{
	json_object *b = json_object_new_object();
	if (b == NULL)
		return NULL;
	json_object_object_add(b, "env",
			       tv->env != NULL ? json_object_get(tv->env)
					       : json_object_new_object());
	add_str(b, "workdir", tv->workdir);
	add_str(b, "user", tv->user);
	if (tv->start != NULL)
		json_object_object_add(b, "start", json_object_get(tv->start));
	if (tv->ready != NULL)
		json_object_object_add(b, "ready", json_object_get(tv->ready));
	return b;
}

char *al_shim_spec_pack(const al_sandbox *sb, const al_template_version *tv,
			al_err *err)
{
	json_object *o = json_object_new_object();
	if (o == NULL)
		goto oom;
	if (sb->id[0] != '\0')
		add_str(o, "id", sb->id);
	add_str(o, "template", sb->template_name);
	json_object_object_add(o, "template_version",
			       json_object_new_int(sb->template_version));
	add_str(o, "driver", sb->driver);
	if (sb->limits.disk_bytes != 0) {
		json_object *l = json_object_new_object();
		json_object_object_add(
			l, "memory_bytes",
			json_object_new_int64((int64_t)
						      sb->limits.memory_bytes));
		json_object_object_add(
			l, "pids", json_object_new_int64(sb->limits.pids_max));
		json_object_object_add(
			l, "cpu_shares",
			json_object_new_int64(sb->limits.cpu_shares));
		json_object_object_add(
			l, "cpu_millis",
			json_object_new_int64(sb->limits.cpu_millis));
		json_object_object_add(
			l, "disk_bytes",
			json_object_new_int64((int64_t)sb->limits.disk_bytes));
		if (sb->limits.pool_group > 0) {
			json_object_object_add(
				l, "pool_group",
				json_object_new_int64(sb->limits.pool_group));
			json_object_object_add(
				l, "pool_group_bytes",
				json_object_new_int64(
					(int64_t)sb->limits.pool_group_bytes));
		}
		json_object_object_add(o, "limits", l);
	}
	if (sb->env != NULL)
		json_object_object_add(o, "env", json_object_get(sb->env));
	if (sb->network != NULL)
		json_object_object_add(o, "network",
				       json_object_get(sb->network));
	/* What the gateway's policy is told of the sandbox (GW_CONFIG). */
	if (sb->project[0] != '\0')
		add_str(o, "project", sb->project);
	if (sb->metadata != NULL)
		json_object_object_add(o, "metadata",
				       json_object_get(sb->metadata));
	if (tv != NULL)
		json_object_object_add(o, "boot", boot_to_json(tv));
	/* A suspended sandbox's start resumes it from its snapshot, a new
	 * one from a snapshot starts there. */
	if ((sb->state == AL_ST_SUSPENDED || sb->state == AL_ST_CREATING) &&
	    sb->resume_snapshot[0] != '\0')
		add_str(o, "resume", sb->resume_snapshot);
	const char *t = json_object_to_json_string_ext(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	char *out = t != NULL ? strdup(t) : NULL;
	json_object_put(o);
	if (out != NULL)
		return out;
oom:
	al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory packing a spec");
	return NULL;
}

/* The spec's "network" (absent: NULL, the default), checked and
 * canonical. */
static int spec_network(json_object *o, json_object **out, al_err *err)
{
	json_object *n = NULL;
	*out = NULL;
	if (!json_object_object_get_ex(o, "network", &n) || n == NULL)
		return 0;
	al_netspec ns;
	if (al_netspec_from_json(n, "network", true, &ns, err) < 0)
		return -1;
	*out = al_netspec_to_json(&ns);
	al_netspec_free(&ns);
	if (*out == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	return 0;
}

/* An id-like name (al_id_valid) of field key into out; required or not. */
static int spec_name(json_object *o, const char *key, int required, char *out,
		     size_t outlen, al_err *err)
{
	const char *v = NULL;
	int r = al_json_get_str(o, key, outlen - 1, &v, NULL, err);
	if (r < 0)
		return -1;
	if (r == 0 && required)
		return al_err_set(err, AL_EINVAL, 0, "'%s' is required", key);
	if (r == 0) {
		out[0] = '\0';
		return 0;
	}
	if (!al_id_valid(v))
		return al_err_set(err, AL_EINVAL, 0, "'%s' is not a valid name",
				  key);
	snprintf(out, outlen, "%s", v);
	return 0;
}

static int spec_limits(json_object *o, al_limits *l, al_err *err)
{
	static const char *const fields[] = {"memory_bytes",	 "pids",
					     "cpu_shares",	 "cpu_millis",
					     "disk_bytes",	 "pool_group",
					     "pool_group_bytes", NULL};
	json_object *v = NULL;
	if (!json_object_object_get_ex(o, "limits", &v) || v == NULL)
		return 0;
	if (!json_object_is_type(v, json_type_object))
		return al_err_set(err, AL_EINVAL, 0,
				  "'limits' must be an object");
	if (al_json_check_fields(v, fields, err) < 0)
		return -1;
	int64_t mem = 0, pids = 0, shares = 0, millis = 0, disk = 0;
	al_err e = {0};
	if (al_json_get_int(v, "memory_bytes", 1, SPEC_BYTES_MAX, &mem, &e) !=
		    1 ||
	    al_json_get_int(v, "pids", 1, SPEC_PIDS_MAX, &pids, &e) != 1 ||
	    al_json_get_int(v, "cpu_shares", 1, SPEC_SHARES_MAX, &shares, &e) !=
		    1 ||
	    al_json_get_int(v, "cpu_millis", AL_CPU_MILLIS_MIN,
			    AL_CPU_MILLIS_LIMIT, &millis, &e) != 1 ||
	    al_json_get_int(v, "disk_bytes", 1, SPEC_BYTES_MAX, &disk, &e) !=
		    1) {
		if (e.code == AL_OK)
			al_err_set(&e, AL_EINVAL, 0,
				   "'limits' needs memory_bytes, pids, "
				   "cpu_shares, cpu_millis and disk_bytes");
		if (err != NULL)
			*err = e;
		return -1;
	}
	/* The pool group comes with its cap, or neither does. */
	int64_t group = 0, group_bytes = 0;
	int has_group = al_json_get_int(v, "pool_group", 1, SPEC_GROUP_MAX,
					&group, err);
	int has_bytes = al_json_get_int(v, "pool_group_bytes", 1,
					SPEC_BYTES_MAX, &group_bytes, err);
	if (has_group < 0 || has_bytes < 0)
		return -1;
	if (has_group != has_bytes)
		return al_err_set(err, AL_EINVAL, 0,
				  "'limits' needs pool_group and "
				  "pool_group_bytes together");
	l->memory_bytes = (uint64_t)mem;
	l->pids_max = (uint32_t)pids;
	l->cpu_shares = (uint32_t)shares;
	l->cpu_millis = (uint32_t)millis;
	l->disk_bytes = (uint64_t)disk;
	l->pool_group = group;
	l->pool_group_bytes = (uint64_t)group_bytes;
	return 0;
}

static int spec_boot(json_object *o, al_template_version *tv, int *has_boot,
		     al_err *err)
{
	static const char *const fields[] = {"env",   "workdir", "user",
					     "start", "ready",	 NULL};
	json_object *b = NULL, *env = NULL, *start = NULL, *ready = NULL;
	*has_boot = json_object_object_get_ex(o, "boot", &b) && b != NULL;
	if (!*has_boot)
		return 0;
	if (!json_object_is_type(b, json_type_object))
		return al_err_set(err, AL_EINVAL, 0,
				  "'boot' must be an object");
	const char *workdir = "/", *user = "root";
	if (al_json_check_fields(b, fields, err) < 0 ||
	    al_json_get_str_map(b, "env", &boot_env_limits, &env, err) < 0 ||
	    al_json_get_str(b, "workdir", sizeof tv->workdir - 1, &workdir,
			    NULL, err) < 0 ||
	    al_json_get_str(b, "user", sizeof tv->user - 1, &user, NULL, err) <
		    0 ||
	    al_json_get_str_array(b, "start", 1, SPEC_ARGS_MAX, SPEC_ARG_MAX,
				  &start, err) < 0 ||
	    al_json_get_str_array(b, "ready", 1, SPEC_ARGS_MAX, SPEC_ARG_MAX,
				  &ready, err) < 0)
		return -1;
	if (workdir[0] != '/')
		return al_err_set(err, AL_EINVAL, 0,
				  "'workdir' must be absolute");
	snprintf(tv->workdir, sizeof tv->workdir, "%s", workdir);
	snprintf(tv->user, sizeof tv->user, "%s", user);
	tv->env = env != NULL ? json_object_get(env) : json_object_new_object();
	tv->start = start != NULL ? json_object_get(start) : NULL;
	tv->ready = ready != NULL ? json_object_get(ready) : NULL;
	return 0;
}

int al_shim_spec_unpack(const void *payload, size_t len, al_sandbox *sb,
			al_template_version *tv, int *has_boot, al_err *err)
{
	static const char *const fields[] = {
		"id",	  "template", "template_version", "driver",  "limits",
		"env",	  "boot",     "network",	  "project", "metadata",
		"resume", NULL};
	memset(sb, 0, sizeof *sb);
	memset(tv, 0, sizeof *tv);
	*has_boot = 0;
	json_object *o = al_json_parse_object(payload, len, err);
	if (o == NULL)
		return -1;
	int64_t version = 0;
	json_object *env = NULL, *meta = NULL;
	if (al_json_check_fields(o, fields, err) < 0 ||
	    spec_name(o, "id", 0, sb->id, sizeof sb->id, err) < 0 ||
	    spec_name(o, "project", 0, sb->project, sizeof sb->project, err) <
		    0 ||
	    spec_name(o, "resume", 0, sb->resume_snapshot,
		      sizeof sb->resume_snapshot, err) < 0 ||
	    al_json_get_str_map(o, "metadata", &al_json_metadata_limits, &meta,
				err) < 0 ||
	    spec_name(o, "template", 1, sb->template_name,
		      sizeof sb->template_name, err) < 0 ||
	    spec_name(o, "driver", 1, sb->driver, sizeof sb->driver, err) < 0 ||
	    al_json_get_int(o, "template_version", 0, INT32_MAX, &version,
			    err) < 0 ||
	    spec_limits(o, &sb->limits, err) < 0 ||
	    al_json_get_str_map(o, "env", &al_json_env_limits, &env, err) < 0 ||
	    spec_boot(o, tv, has_boot, err) < 0 ||
	    spec_network(o, &sb->network, err) < 0) {
		json_object_put(o);
		al_template_version_free(tv);
		memset(sb, 0, sizeof *sb);
		*has_boot = 0;
		return -1;
	}
	sb->template_version = (int)version;
	sb->state = AL_ST_CREATING;
	sb->env = env != NULL ? json_object_get(env) : json_object_new_object();
	sb->metadata = meta != NULL ? json_object_get(meta) : NULL;
	snprintf(tv->name, sizeof tv->name, "%s", sb->template_name);
	tv->version = sb->template_version;
	json_object_put(o);
	return 0;
}

char *al_shim_ready_pack(const al_shim_ready *r, al_err *err)
{
	json_object *o = json_object_new_object();
	char *out = NULL;
	if (o != NULL) {
		json_object_object_add(o, "pid", json_object_new_int(r->pid));
		add_str(o, "accel", r->accel);
		if (r->cold)
			json_object_object_add(o, "resumed_cold",
					       json_object_new_boolean(1));
		const char *t = json_object_to_json_string_ext(
			o, JSON_C_TO_STRING_PLAIN);
		out = t != NULL ? strdup(t) : NULL;
		json_object_put(o);
	}
	if (out == NULL)
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	return out;
}

int al_shim_ready_unpack(const void *payload, size_t len, al_shim_ready *out,
			 al_err *err)
{
	static const char *const fields[] = {"pid", "accel", "resumed_cold",
					     NULL};
	memset(out, 0, sizeof *out);
	al_err e = {0};
	json_object *o = al_json_parse_object(payload, len, &e);
	int64_t pid = 0;
	const char *accel = NULL;
	if (o != NULL &&
	    (al_json_check_fields(o, fields, &e) < 0 ||
	     al_json_get_int(o, "pid", 1, INT32_MAX, &pid, &e) != 1 ||
	     al_json_get_str(o, "accel", sizeof out->accel - 1, &accel, NULL,
			     &e) != 1 ||
	     (accel[0] != '\0' && strcmp(accel, "kvm") != 0 &&
	      strcmp(accel, "tcg") != 0) ||
	     al_json_get_bool(o, "resumed_cold", &out->cold, &e) < 0)) {
		if (e.code == AL_OK)
			al_err_set(&e, AL_EPROTO, 0,
				   "the shim's ready report is malformed");
	}
	if (o != NULL && e.code == AL_OK) {
		out->pid = (int)pid;
		snprintf(out->accel, sizeof out->accel, "%s", accel);
	}
	json_object_put(o);
	if (e.code != AL_OK) {
		if (err != NULL)
			al_err_set(err, AL_EPROTO, 0, "shim ready report: %s",
				   e.msg);
		return -1;
	}
	return 0;
}
