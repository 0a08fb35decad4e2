#include "reap.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"
#include "shimctl.h"
#include "store.h"
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

/* Is a standby's shim listening at path? 1 yes; 0 no, its shim died;
 * -1 the path is gone: its shim removed it (claimed, or ending), and
 * what it leaves is its own to release. A shim unlinks the path before it
 * closes the listener, so a path that is there but refuses is dead. */
static int socket_alive(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof sa.sun_path)
		return 0;
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 1; /* cannot tell: leave it */
	int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
	int e = errno;
	close(fd);
	if (ok)
		return 1;
	return e == ENOENT ? -1 : 0;
}

int al_reap_standbys(const al_config *cfg, const char *only_slot)
{
	char dir[AL_PATH_MAX + 8], path[AL_PATH_MAX + 300];
	snprintf(dir, sizeof dir, "%s/pool", cfg->run_dir);
	DIR *d = opendir(dir);
	if (d == NULL)
		return 0;
	int alive = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		/* <template>.<driver>.<slot>.sock: the slot is the last
		 * dot-separated part before ".sock" (ids hold no dots). */
		size_t nl = strlen(de->d_name);
		if (nl < 6 || strcmp(de->d_name + nl - 5, ".sock") != 0)
			continue;
		char slot[64];
		size_t end = nl - 5, from = end;
		while (from > 0 && de->d_name[from - 1] != '.')
			from--;
		size_t sl = end - from;
		if (from == 0 || sl == 0 || sl >= sizeof slot)
			continue;
		memcpy(slot, de->d_name + from, sl);
		slot[sl] = '\0';
		if (only_slot != NULL && strcmp(slot, only_slot) != 0)
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		int st = socket_alive(path);
		if (st > 0) {
			alive++;
			continue;
		}
		/* Gone since readdir: claimed just now, not dead. */
		if (st < 0 || only_slot != NULL)
			continue;
		/* Its shim died: release the standby's machine leftovers. */
		unlink(path);
		al_err err = {0};
		if (al_id_valid(slot) && al_reap_sandbox(cfg, slot, &err) < 0)
			al_warn("standby %s: %s", slot, err.msg);
	}
	closedir(d);
	return alive;
}
