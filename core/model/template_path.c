/* template: where a version lives in the pool, and freeing a version's
 * fields; apart from template.c's SQL so that the shim, which holds no
 * database connection, links without libpq. */
#include "model/template.h"

#include <stdio.h>

void al_template_version_free(al_template_version *tv)
{
	if (tv == NULL)
		return;
	if (tv->env != NULL)
		json_object_put(tv->env);
	if (tv->start != NULL)
		json_object_put(tv->start);
	if (tv->ready != NULL)
		json_object_put(tv->ready);
	tv->env = tv->start = tv->ready = NULL;
}

int al_template_version_dir(const al_config *cfg, const char *name, int version,
			    char *out, size_t outlen, al_err *err)
{
	if (name == NULL || !al_id_valid(name))
		return al_err_set(err, AL_EINVAL, 0, "invalid template name");
	if (version <= 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "invalid template version %d", version);
	int n = snprintf(out, outlen, "%s/template-versions/%s/%d",
			 cfg->pool_dir, name, version);
	if (n < 0 || (size_t)n >= outlen)
		return al_err_set(err, AL_EINVAL, 0,
				  "path of template %s too long", name);
	return 0;
}

int al_template_version_rootfs(const al_config *cfg, const char *name,
			       int version, char *out, size_t outlen,
			       al_err *err)
{
	char dir[AL_PATH_MAX + 96];
	if (al_template_version_dir(cfg, name, version, dir, sizeof dir, err) <
	    0)
		return -1;
	int n = snprintf(out, outlen, "%s/rootfs", dir);
	if (n < 0 || (size_t)n >= outlen)
		return al_err_set(err, AL_EINVAL, 0,
				  "path of template %s too long", name);
	return 0;
}
