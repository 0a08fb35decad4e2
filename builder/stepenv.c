/* What a step runs with: the environment, working directory and user
 * in force at step idx (the base template's, then what ENV, WORKDIR and
 * USER of the Airlockfile set before it). RUN steps run with them and
 * the published template keeps the last step's. */
#include "builder.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Whether any step of kind in steps[1..idx] exists. */
static int set_in_file(const bld *b, size_t idx, al_af_kind kind)
{
	for (size_t i = 1; i <= idx && i < b->af->nsteps; i++)
		if (b->af->steps[i].kind == kind)
			return 1;
	return 0;
}

json_object *bld_step_env(const bld *b, size_t nenv, al_err *err)
{
	json_object *env = json_object_new_object();
	if (env == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		return NULL;
	}
	/* The base template's environment, then the file's (which wins). */
	if (b->has_base && b->base.env != NULL) {
		json_object_object_foreach(b->base.env, k, v)
		{
			if (json_object_is_type(v, json_type_string))
				json_object_object_add(
					env, k,
					json_object_new_string(
						json_object_get_string(v)));
		}
	}
	char **envp = al_airlockfile_envp(b->af, nenv, err);
	if (envp == NULL) {
		json_object_put(env);
		return NULL;
	}
	for (size_t i = 0; envp[i] != NULL; i++) {
		char *eq = strchr(envp[i], '=');
		if (eq == NULL)
			continue;
		*eq = '\0';
		json_object_object_add(env, envp[i],
				       json_object_new_string(eq + 1));
	}
	free(envp);
	return env;
}

const char *bld_step_workdir(const bld *b, size_t idx)
{
	if (set_in_file(b, idx, AL_AF_WORKDIR))
		return b->af->steps[idx].workdir;
	if (b->has_base && b->base.workdir[0] == '/')
		return b->base.workdir;
	return "/";
}

void bld_step_user(const bld *b, size_t idx, char *out, size_t outlen)
{
	const al_af_step *st = &b->af->steps[idx];
	out[0] = '\0';
	if (set_in_file(b, idx, AL_AF_USER)) {
		if (st->group != NULL)
			snprintf(out, outlen, "%s:%s", st->user, st->group);
		else
			snprintf(out, outlen, "%s", st->user);
	} else if (b->has_base) {
		snprintf(out, outlen, "%s", b->base.user);
	}
	if (strcmp(out, "root") == 0)
		out[0] = '\0';
}

/* Copy the agent into the layer at BUILD_AGENT. The directory must not
 * exist: a layer is made by user commands, and a planted symlink there
 * must not redirect the write. */
