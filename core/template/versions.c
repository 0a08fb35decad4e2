/* versions: a template's versions in the pool and in its rows together
 * (versions.h). */
#include "template/versions.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/rmtree.h"
#include "pool/store.h"

/* mkdir that accepts an existing directory. */
static int mkdir_ok(const char *path, mode_t mode, al_err *err)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", path);
	return 0;
}

/* Point pool/templates/<name> at the version the database calls current
 * (or remove it when there is none). Called with name's lock held. A
 * real directory there is the version built before versions existed
 * (scripts/template-minimal.sh): it is moved to its version's place
 * first, since a symlink cannot replace a directory. */
static int link_current(al_db *db, const al_config *cfg, const char *name,
			al_err *err)
{
	char link[AL_PATH_MAX + 96], tmp[AL_PATH_MAX + 128];
	int cur = al_template_current_version(db, name, err);
	if (cur < 0)
		return -1;

	if (al_config_template_root(cfg, name, link, sizeof link, err) < 0)
		return -1;
	struct stat st;
	if (lstat(link, &st) == 0 && S_ISDIR(st.st_mode)) {
		char vdir[AL_PATH_MAX + 96], vroot[AL_PATH_MAX + 128];
		int legacy = al_template_first_version(db, name, err);
		if (legacy < 0)
			return -1;
		if (al_template_version_dir(cfg, name, legacy, vdir,
					    sizeof vdir, err) < 0 ||
		    al_template_version_rootfs(cfg, name, legacy, vroot,
					       sizeof vroot, err) < 0)
			return -1;
		snprintf(tmp, sizeof tmp, "%s/template-versions/%s",
			 cfg->pool_dir, name);
		if (mkdir_ok(tmp, 0700, err) < 0 ||
		    mkdir_ok(vdir, 0700, err) < 0)
			return -1;
		if (renameat2(AT_FDCWD, link, AT_FDCWD, vroot,
			      RENAME_NOREPLACE) < 0) {
			if (errno != EEXIST)
				return al_err_sys(err, AL_ESYS, errno,
						  "moving %s to %s", link,
						  vroot);
			/* Its place is taken: the directory is a stray copy. */
			if (al_store_subvol_delete(link, err) < 0)
				return -1;
		}
		al_info("template %s: version %d moved to %s", name, legacy,
			vroot);
	}
	if (cur <= 0) {
		if (unlink(link) < 0 && errno != ENOENT)
			return al_err_sys(err, AL_ESYS, errno, "unlink %s",
					  link);
		return 0;
	}
	/* Relative, so the state directory can move. */
	char target[256];
	snprintf(target, sizeof target, "../template-versions/%s/%d/rootfs",
		 name, cur);
	int n = snprintf(tmp, sizeof tmp, "%s/templates/.%s.link-%d",
			 cfg->pool_dir, name, (int)getpid());
	if (n < 0 || (size_t)n >= sizeof tmp)
		return al_err_set(err, AL_EINVAL, 0, "path too long");
	char dir[AL_PATH_MAX + 16];
	snprintf(dir, sizeof dir, "%s/templates", cfg->pool_dir);
	if (mkdir_ok(dir, 0700, err) < 0)
		return -1;
	unlink(tmp);
	if (symlink(target, tmp) < 0)
		return al_err_sys(err, AL_ESYS, errno, "symlink %s", tmp);
	/* rename() replaces the old link in one step: a sandbox created
	 * meanwhile snapshots the old version or the new one. */
	if (rename(tmp, link) < 0) {
		int e = errno;
		unlink(tmp);
		return al_err_sys(err, AL_ESYS, e, "rename %s", link);
	}
	return 0;
}

int al_versions_publish(al_db *db, const al_config *cfg,
			const al_template_version *tv, const char *build_id,
			const char *airlockfile, const char *rootfs_tmp,
			int *version_out, al_err *err)
{
	char vdir[AL_PATH_MAX + 96], vroot[AL_PATH_MAX + 128];
	char parent[AL_PATH_MAX + 96];
	int moved = 0;

	if (tv == NULL || !al_id_valid(tv->name))
		return al_err_set(err, AL_EINVAL, 0, "invalid template name");
	if (rootfs_tmp == NULL || al_store_is_subvol(rootfs_tmp, err) != 1)
		return al_err_set(err, AL_EINVAL, 0,
				  "publish: %s is not a subvolume",
				  rootfs_tmp != NULL ? rootfs_tmp : "(null)");
	const char *name = tv->name;
	snprintf(parent, sizeof parent, "%s/template-versions", cfg->pool_dir);
	if (mkdir_ok(parent, 0700, err) < 0)
		return -1;
	snprintf(parent, sizeof parent, "%s/template-versions/%s",
		 cfg->pool_dir, name);
	if (mkdir_ok(parent, 0700, err) < 0)
		return -1;

	if (al_template_lock(db, name, err) < 0)
		return -1;
	int version = al_template_next_version(db, name, err);
	if (version < 0)
		goto fail;
	if (al_template_version_dir(cfg, name, version, vdir, sizeof vdir,
				    err) < 0 ||
	    al_template_version_rootfs(cfg, name, version, vroot, sizeof vroot,
				       err) < 0)
		goto fail;
	/* Left over from a publish whose transaction did not commit. */
	if (al_store_subvol_delete(vroot, err) < 0)
		goto fail;
	if (mkdir_ok(vdir, 0700, err) < 0)
		goto fail;
	/* In its place before its row commits (a sandbox may snapshot a
	 * version as soon as the row says it exists), and under the lock,
	 * so no other publisher takes the same place. */
	if (renameat2(AT_FDCWD, rootfs_tmp, AT_FDCWD, vroot, RENAME_NOREPLACE) <
	    0) {
		al_err_sys(err, AL_ESYS, errno, "moving %s to %s", rootfs_tmp,
			   vroot);
		goto fail;
	}
	moved = 1;
	if (al_template_insert_version(db, cfg, tv, version, build_id,
				       airlockfile, err) < 0)
		goto fail;
	if (al_db_commit(db, err) < 0) {
		/* Whether it committed is unknown only if the connection
		 * broke; the version row then decides on the next publish,
		 * which deletes a rootfs without a row at this place. */
		goto fail_nolock;
	}

	/* The link follows the database, under the lock again: a slower
	 * publisher of an older version cannot point it backwards. */
	if (al_template_lock(db, name, err) < 0)
		goto published;
	if (link_current(db, cfg, name, err) < 0) {
		al_db_rollback(db);
		goto published;
	}
	if (al_db_commit(db, err) < 0)
		goto published;
	*version_out = version;
	return 0;

published:
	/* The version exists; only the link is stale until the next
	 * publish. Not a failure of the build. */
	al_warn("template %s version %d: switching pool/templates link: %s",
		name, version, err != NULL ? err->msg : "");
	*version_out = version;
	return 0;

fail:
	al_db_rollback(db);
fail_nolock:
	if (moved && rename(vroot, rootfs_tmp) < 0)
		al_warn("template %s: moving %s back: %s", name, vroot,
			strerror(errno));
	if (moved)
		rmdir(vdir);
	return -1;
}

/* Remove every version directory of name from the pool. The rows are
 * gone already: a crash here leaves directories without rows, which a
 * later publish of the name overwrites. */
static void remove_versions(const al_config *cfg, const char *name)
{
	char dir[AL_PATH_MAX + 64];
	snprintf(dir, sizeof dir, "%s/template-versions/%s", cfg->pool_dir,
		 name);
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		char v[AL_PATH_MAX + 400];
		al_err tmp_err = {0};
		snprintf(v, sizeof v, "%s/%s/rootfs", dir, de->d_name);
		if (al_store_subvol_delete(v, &tmp_err) < 0)
			al_warn("template %s: %s", name, tmp_err.msg);
		/* vm/ and the version directory itself. */
		snprintf(v, sizeof v, "%s/%s", dir, de->d_name);
		if (al_rmtree(v, &tmp_err) < 0)
			al_warn("template %s: %s", name, tmp_err.msg);
	}
	closedir(d);
	rmdir(dir);
}

int al_versions_delete(al_db *db, const al_config *cfg, const char *name,
		       al_err *err)
{
	if (name == NULL || !al_id_valid(name))
		return al_err_set(err, AL_ENOENT, 0, "no template '%s'",
				  name != NULL ? name : "");
	if (al_template_lock(db, name, err) < 0)
		return -1;
	if (al_template_delete_rows(db, name, err) < 0)
		goto fail;
	/* The link goes first (still under the lock), so no new sandbox
	 * snapshots a version being deleted. */
	char link[AL_PATH_MAX + 96];
	if (al_config_template_root(cfg, name, link, sizeof link, err) < 0)
		goto fail;
	struct stat st;
	if (lstat(link, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			if (al_store_subvol_delete(link, err) < 0)
				goto fail;
		} else if (unlink(link) < 0 && errno != ENOENT) {
			al_err_sys(err, AL_ESYS, errno, "unlink %s", link);
			goto fail;
		}
	}
	if (al_db_commit(db, err) < 0)
		return -1;
	remove_versions(cfg, name);
	return 0;
fail:
	al_db_rollback(db);
	return -1;
}
