/* expiry: sandboxes past their expires_at are destroyed, through their
 * shim, or (no shim answers) released here and recorded deleted. */
#ifndef AL_CTL_EXPIRY_H
#define AL_CTL_EXPIRY_H

#include "ctl.h"

void ctl_expire(ctl *c);

#endif
