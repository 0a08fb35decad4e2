/* policypub: the operator's policies as airlock-controller loaded them,
 * published for GET /v1/info in <run>/policies.json. The controller is the
 * one loader whose view the API shows (every fcgi worker answering from
 * its own copy disagreed with the others after a change); it rewrites the
 * file on each (re)load, beside it and renamed, so a reader sees one whole
 * version (mode 0600: airlock-fcgi runs as root like the controller).
 * The gateways load their own copies the same way: a file that fails in
 * the controller fails there.
 *
 * The file: {"<name>": {"path", "loaded": true, "loaded_at", "reloads",
 * "reload_error", "reload_error_at"}} or, for a policy that never loaded,
 * {"<name>": {"path", "loaded": false, "error"}}; times in RFC 3339. */
#ifndef AL_POLICYPUB_H
#define AL_POLICYPUB_H

#include <json-c/json.h>

#include "base/err.h"
#include "policy/policy.h"

#define AL_POLICYPUB_FILE "policies.json"
/* More than the file can hold, with every message at its longest. */
#define AL_POLICYPUB_MAX (64u << 10)

typedef struct al_policypub {
	const char *name;   /* "egress" */
	const char *path;   /* the file */
	const al_policy *p; /* NULL: it never loaded */
	const char *error;  /* why, when p is NULL */
} al_policypub;

/* Write the n policies' status to <run_dir>/policies.json (mode 0600). */
int al_policypub_write(const char *run_dir, const al_policypub *v, int n,
		       al_err *err);
/* The published object (caller puts it). AL_ENOENT when nothing is
 * published: the controller has not loaded the policies since it
 * started. */
json_object *al_policypub_read(const char *run_dir, al_err *err);
/* Remove the file: a controller that stops no longer vouches for it. */
void al_policypub_withdraw(const char *run_dir);

#endif
