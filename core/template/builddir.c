/* builddir: a build's directory (layout in builddir.h). */
#include "template/builddir.h"

#include <stdio.h>

int al_builddir_path(const al_config *cfg, const char *id, char *out,
		     size_t outlen, al_err *err)
{
	if (id == NULL || !al_id_valid(id))
		return al_err_set(err, AL_EINVAL, 0, "invalid build id");
	int n = snprintf(out, outlen, "%s/builds/%s", cfg->state_dir, id);
	if (n < 0 || (size_t)n >= outlen)
		return al_err_set(err, AL_EINVAL, 0,
				  "path of build %s too long", id);
	return 0;
}
