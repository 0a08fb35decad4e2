/* template_ops: the operations on a template that the API calls, decided
 * here once, as sandbox_ops.h does for sandboxes: a handler parses its
 * request (a build's form is streamed to disk by fcgi), calls one of
 * these and answers.
 *
 * A build is queued in three steps: al_template_ops_build_dir gives it an
 * id and its directory (state/builds/<id>), where the caller puts the
 * context it received (context.tar); al_template_ops_build checks the
 * request, charges the project, writes the row and starts
 * airlock-builder; a request refused before that is
 * al_template_ops_build_abandon'ed. "who" is the caller's key. */
#ifndef AL_TEMPLATE_OPS_H
#define AL_TEMPLATE_OPS_H

#include <stddef.h>

#include "base/config.h"
#include "base/err.h"
#include "model/auth.h"
#include "model/db.h"

/* A new build's id (21 bytes) and its directory, made; AL_ENOSPACE when
 * the pool has no room for a new template version. */
int al_template_ops_build_dir(const al_config *cfg, char *id, char *dir,
			      size_t dirlen, al_err *err);
/* Remove the directory of a build that got no row. */
void al_template_ops_build_abandon(const char *dir);
/* Queue build id of template name from the Airlockfile text (len bytes):
 * the name must be one who may build (new, or a template it may change),
 * the Airlockfile must parse and its FROM template exist (AL_EINVAL
 * naming the line), the project's build quota must allow it. On failure
 * before the row the directory is removed; a builder that cannot start
 * leaves the build failed. */
int al_template_ops_build(const al_config *cfg, al_db *db,
			  const al_identity *who, const char *id,
			  const char *dir, const char *name,
			  const char *airlockfile, size_t len, int no_cache,
			  al_err *err);

/* Delete template name, every version (AL_ESTATE while a sandbox uses
 * it; AL_ENOENT unknown or not who's to change). Its warm-pool standbys
 * leave the pool at once, so no create claims one; the controller ends
 * them. */
int al_template_ops_delete(const al_config *cfg, al_db *db,
			   const al_identity *who, const char *name,
			   al_err *err);

#endif
