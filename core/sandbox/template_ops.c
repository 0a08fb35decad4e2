/* template_ops: see template_ops.h. */
#include "sandbox/template_ops.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "base/log.h"
#include "base/rmtree.h"
#include "base/spawn.h"
#include "model/build.h"
#include "model/project.h"
#include "model/sandbox.h"
#include "model/template.h"
#include "pool/store.h"
#include "sandbox/standby.h"
#include "template/airlockfile.h"
#include "template/builddir.h"
#include "template/versions.h"

/* A name the router would read as something else. */
static int name_reserved(const char *name)
{
	return strcmp(name, "builds") == 0;
}

/* Remove a build directory that never got its row. */
void al_template_ops_build_abandon(const char *dir)
{
	al_err err = {0};
	if (al_rmtree(dir, &err) < 0)
		al_warn("removing %s: %s", dir, err.msg);
}

/* The Airlockfile must parse, and a FROM <template> must exist: both are
 * the client's mistake (400, naming the line). */
static int check_airlockfile(al_db *db, const al_identity *who,
			     const char *text, size_t len, al_err *err)
{
	int line = 0;
	al_airlockfile *af = al_airlockfile_parse(text, len, &line, err);
	if (af == NULL)
		return -1;
	int rc = 0;
	if (af->from->base == AL_AF_BASE_TEMPLATE) {
		al_template_version tv = {0};
		al_err e = {0};
		if (al_template_access(db, af->from->template_name, who, 0,
				       &e) < 0 ||
		    al_template_get_version(db, af->from->template_name, 0, &tv,
					    &e) < 0)
			rc = al_err_set(err,
					e.code == AL_ENOENT ? AL_EINVAL
							    : e.code,
					0, "line %d: %s", af->steps[0].line,
					e.code == AL_ENOENT
						? "FROM names an unknown "
						  "template"
						: e.msg);
		al_template_version_free(&tv);
	}
	al_airlockfile_free(af);
	return rc;
}

/* A name who may build: new, or a template it may change. Names are
 * unique across projects. */
static int check_name(al_db *db, const al_identity *who, const char *name,
		      al_err *err)
{
	al_template_owner o;
	al_err e = {0};
	if (al_template_owner_get(db, name, &o, &e) < 0) {
		if (e.code == AL_ENOENT)
			return 0;
		*err = e;
		return -1;
	}
	if (al_template_may(&o, who, 1))
		return 0;
	return al_err_set(err, AL_EEXIST, 0,
			  o.public ? "template name '%s' is taken by a public "
				     "template"
				   : "template name '%s' is taken",
			  name);
}

static int start_builder(const al_config *cfg, const char *id, al_err *err)
{
	char prog[AL_PATH_MAX + 32], logpath[AL_PATH_MAX + 32];
	if ((size_t)snprintf(prog, sizeof prog, "%s/airlock-builder",
			     cfg->libexec_dir) >= sizeof prog ||
	    (size_t)snprintf(logpath, sizeof logpath, "%s/log/builder.log",
			     cfg->state_dir) >= sizeof logpath)
		return al_err_set(err, AL_EINVAL, 0, "path too long");
	char *const argv[] = {prog, "--build", (char *)id, NULL};
	return al_spawn_detached(prog, argv, logpath, NULL, err);
}

int al_template_ops_build_dir(const al_config *cfg, char *id, char *dir,
			      size_t dirlen, al_err *err)
{
	char parent[AL_PATH_MAX + 16];
	/* A build writes a new template version into the pool. */
	if (al_store_room(cfg->pool_dir, cfg->pool_full_pct, err) < 0 ||
	    al_sandbox_new_id(id, err) < 0 ||
	    al_builddir_path(cfg, id, dir, dirlen, err) < 0)
		return -1;
	snprintf(parent, sizeof parent, "%s/builds", cfg->state_dir);
	if ((mkdir(parent, 0700) < 0 && errno != EEXIST) ||
	    mkdir(dir, 0700) < 0)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", dir);
	return 0;
}

int al_template_ops_build(const al_config *cfg, al_db *db,
			  const al_identity *who, const char *id,
			  const char *dir, const char *name,
			  const char *airlockfile, size_t len, int no_cache,
			  al_err *err)
{
	int rc = 0;
	if (!al_id_valid(name) || name_reserved(name))
		rc = al_err_set(err, AL_EINVAL, 0,
				"name must be 1-63 characters of [a-z0-9-], "
				"not starting with '-', and not 'builds'");
	if (rc == 0)
		rc = check_name(db, who, name, err);
	if (rc == 0)
		rc = check_airlockfile(db, who, airlockfile, len, err);
	char path[AL_PATH_MAX + 16];
	if (rc == 0 && (size_t)snprintf(path, sizeof path, "%s/Airlockfile",
					dir) >= sizeof path)
		rc = al_err_set(err, AL_EINVAL, 0, "build dir path too long");
	if (rc == 0)
		rc = al_file_replace(path, airlockfile, len, 0600, err);
	if (rc == 0)
		rc = al_project_begin_build(db, cfg, who->project, err);
	if (rc == 0 &&
	    (al_build_insert(db, id, name, who->project,
			     who->role == AL_ROLE_ADMIN, no_cache, err) < 0 ||
	     al_db_commit(db, err) < 0)) {
		al_db_rollback(db);
		rc = -1;
	}
	if (rc < 0) {
		al_template_ops_build_abandon(dir);
		return -1;
	}
	if (start_builder(cfg, id, err) < 0) {
		al_err tmp = {0};
		al_build_update(db, id, AL_BUILD_FAILED, 0, 0, 0,
				"could not start the builder", &tmp);
		return -1;
	}
	al_info("template %s: build %s started", name, id);
	return 0;
}

int al_template_ops_delete(const al_config *cfg, al_db *db,
			   const al_identity *who, const char *name,
			   al_err *err)
{
	if (!al_id_valid(name))
		return al_err_set(err, AL_ENOENT, 0, "no such template");
	if (al_template_access(db, name, who, 1, err) < 0 ||
	    al_versions_delete(db, cfg, name, err) < 0)
		return -1;
	/* Its standbys can never be claimed now: out of the pool at once,
	 * and the controller ends them. */
	al_standby_retire_all(cfg, name, NULL);
	al_info("template %s deleted", name);
	return 0;
}
