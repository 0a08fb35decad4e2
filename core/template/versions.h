/* versions: publishing a template's version and deleting a template,
 * in the pool (layout: core/model/template.h) and in its rows
 * (core/model/template.h's al_template_lock and the statements it
 * guards) together, in the order that keeps them in step: a version's
 * rootfs is in its place before its row commits, and the
 * pool/templates/<name> link is switched or removed only under the
 * name's lock. */
#ifndef AL_VERSIONS_H
#define AL_VERSIONS_H

#include "base/config.h"
#include "base/err.h"
#include "model/db.h"
#include "model/template.h"

/* Publish a built rootfs as the next version of tv->name: rootfs_tmp
 * (a subvolume in the pool) is moved to the version's place, the rows
 * are written in one transaction (al_template_insert_version), and the
 * pool/templates/<name> link is switched atomically. *version_out gets
 * the new version number. A link that cannot be switched is logged, not
 * a failure: the version exists and the next publish fixes the link. */
int al_versions_publish(al_db *db, const al_config *cfg,
			const al_template_version *tv, const char *build_id,
			const char *airlockfile, const char *rootfs_tmp,
			int *version_out, al_err *err);

/* Delete every version of name (rows and pool), AL_ESTATE (409) while a
 * sandbox uses it, AL_ENOENT if unknown. */
int al_versions_delete(al_db *db, const al_config *cfg, const char *name,
		       al_err *err);

#endif
