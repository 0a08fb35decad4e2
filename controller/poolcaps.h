/* The controller's part of the pool caps (core/pool/poolcap.h): the cap of all
 * sandboxes follows the pool as templates and builds take or free space,
 * and each project's group follows its quota and that cap. */
#ifndef AL_CTL_POOLCAPS_H
#define AL_CTL_POOLCAPS_H

#include "base/config.h"
#include "model/db.h"

/* Set the cap of all sandboxes from the pool as it is now; with db, also
 * every existing project group's from its project's quota. Failures are
 * logged: the caps set before stay in force. */
void ctl_poolcaps_refresh(const al_config *cfg, al_db *db);

#endif
