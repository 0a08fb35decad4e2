/* Snapshot directories (snapfiles.h). */
#include "sandbox/snapfiles.h"

#include <stdio.h>
#include <sys/stat.h>

#include "base/rmtree.h"
#include "pool/store.h"

int al_snapfiles_remove(const char *dir, al_err *err)
{
	char root[AL_PATH_MAX + 16];
	int n = snprintf(root, sizeof root, "%s/rootfs", dir);
	if (n < 0 || (size_t)n >= sizeof root)
		return al_err_set(err, AL_EINVAL, 0, "snapshot path too long");
	if (al_store_subvol_delete(root, err) < 0)
		return -1;
	return al_rmtree(dir, err);
}

int al_snapfiles_committed(const al_config *cfg, const char *id)
{
	char dir[AL_PATH_MAX], meta[AL_PATH_MAX + 16];
	al_err err;
	struct stat st;
	if (al_config_snapshot_dir(cfg, id, dir, sizeof dir, &err) < 0)
		return 0;
	snprintf(meta, sizeof meta, "%s/meta.json", dir);
	return stat(meta, &st) == 0;
}
