#include "sandbox/reap.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "host/cgroup.h"
#include "pool/store.h"
#include "sandbox/shimctl.h"
#include "vm/machine.h"

/* A vm sandbox's QEMU run directory (its QEMU died with the shim, by
 * PR_SET_PDEATHSIG): only a directory of the name the driver makes, and
 * only the files it puts there. */
static void reap_vm_rundir(const char *root)
{
	char link[AL_PATH_MAX + 32], dir[128];
	snprintf(link, sizeof link, "%s/" AL_VM_RUNLINK, root);
	ssize_t n = readlink(link, dir, sizeof dir - 1);
	if (n <= 0)
		return;
	dir[n] = '\0';
	al_vm_rundir_remove(dir);
}

int al_reap_sandbox(const al_config *cfg, const char *id, al_err *err)
{
	char path[AL_PATH_MAX];
	if (al_config_sandbox_root(cfg, id, path, sizeof path, err) < 0)
		return -1;
	reap_vm_rundir(path);
	/* A jail whose shim died ends by itself (its agent sees EOF), but
	 * its cgroup leaves stay until someone removes them. */
	if (al_cgroup_destroy(id, err) < 0)
		return -1;
	if (al_store_subvol_delete(path, err) < 0)
		return -1;
	if (al_config_shim_socket(cfg, id, path, sizeof path, err) < 0)
		return -1;
	unlink(path);
	size_t n = strlen(path);
	if (n > 5 && strcmp(path + n - 5, ".sock") == 0) {
		memcpy(path + n - 5, ".pid", 5);
		unlink(path);
	}
	return 0;
}

int al_reap_shim_alive(const al_config *cfg, const char *id)
{
	al_err err = {0};
	int fd = al_shimctl_connect(cfg, id, &err);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}
