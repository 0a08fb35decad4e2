/* Layers and temporaries: where a step's cached layer lives, the
 * temporary subvolumes a build makes (deleted when it fails, or by the
 * next build when its builder died), and a layer's install into the
 * cache. */
#include "builder.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "pool/store.h"

int bld_layer_path(const bld *b, const char *key, char *out, size_t outlen,
		   al_err *err)
{
	int n = snprintf(out, outlen, "%s/%s", b->layers, key);
	if (n < 0 || (size_t)n >= outlen)
		return al_err_set(err, AL_EINVAL, 0, "layer path too long");
	return 0;
}

void bld_tmp_add(bld *b, const char *path)
{
	for (int i = 0; i < BLD_MAX_TMP; i++) {
		if (b->tmp[i][0] == '\0') {
			snprintf(b->tmp[i], sizeof b->tmp[i], "%s", path);
			return;
		}
	}
	al_warn("build %s: too many temporary subvolumes; %s is left for "
		"the next build to remove",
		b->id, path);
}

void bld_tmp_forget(bld *b, const char *path)
{
	for (int i = 0; i < BLD_MAX_TMP; i++)
		if (strcmp(b->tmp[i], path) == 0)
			b->tmp[i][0] = '\0';
}

void bld_tmp_cleanup(bld *b)
{
	for (int i = 0; i < BLD_MAX_TMP; i++) {
		if (b->tmp[i][0] == '\0')
			continue;
		al_err tmp_err = {0};
		bld_fsroot_umount_below(b->tmp[i]);
		if (al_store_subvol_delete(b->tmp[i], &tmp_err) < 0)
			al_warn("build %s: %s", b->id, tmp_err.msg);
		b->tmp[i][0] = '\0';
	}
}

int bld_layer_install(bld *b, const char *tmp, const char *final, al_err *err)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final,
			      RENAME_NOREPLACE) == 0) {
			bld_tmp_forget(b, tmp);
			return 0;
		}
		if (errno != EEXIST)
			return al_err_sys(err, AL_ESYS, errno,
					  "rename %s to %s", tmp, final);
		if (!b->no_cache || attempt > 0)
			break;
		/* --no-cache: the new layer replaces the old one. A build
		 * snapshotting the old one right now gets it whole or not
		 * at all (then it fails and can be retried). */
		if (al_store_subvol_delete(final, err) < 0)
			return -1;
	}
	/* A concurrent build of the same step finished first: same key,
	 * same content. Use its layer. */
	al_err tmp_err = {0};
	if (al_store_subvol_delete(tmp, &tmp_err) < 0)
		al_warn("build %s: %s", b->id, tmp_err.msg);
	bld_tmp_forget(b, tmp);
	return 0;
}

/* ".tmp-<anything>-<pid>" whose builder is gone: a crash's leftovers. */
static int tmp_owner_dead(const char *name)
{
	if (strncmp(name, ".tmp-", 5) != 0)
		return 0;
	const char *dash = strrchr(name, '-');
	if (dash == NULL || dash[1] == '\0')
		return 0;
	char *end;
	long pid = strtol(dash + 1, &end, 10);
	if (*end != '\0' || pid <= 0)
		return 1;
	if (pid == (long)getpid())
		return 0;
	char exe[64], target[512];
	snprintf(exe, sizeof exe, "/proc/%ld/exe", pid);
	ssize_t n = readlink(exe, target, sizeof target - 1);
	if (n < 0)
		return 1;
	target[n] = '\0';
	return strstr(target, "airlock-builder") == NULL;
}

void bld_tmp_remove_stale(const char *dir)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (!tmp_owner_dead(de->d_name))
			continue;
		char p[AL_PATH_MAX + 300];
		snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
		al_err tmp_err = {0};
		bld_fsroot_umount_below(p);
		if (al_store_subvol_delete(p, &tmp_err) < 0)
			al_warn("removing %s: %s", p, tmp_err.msg);
		else
			al_info("removed %s, left by an interrupted build", p);
	}
	closedir(d);
}
