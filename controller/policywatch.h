/* policywatch: the controller's thread that loads the operator's policies
 * (core/policy) from the policies directory, reloads them when a file
 * changes (inotify on the directory, and a look every second for what a
 * watch misses) and publishes their status for the API on each (re)load
 * (core/policy/policypub.h). */
#ifndef AL_CONTROLLER_POLICYWATCH_H
#define AL_CONTROLLER_POLICYWATCH_H

#include "base/config.h"
#include "policy/policy.h"

/* Load and publish once, then start the thread. cfg must outlive it. */
int ctl_policywatch_start(const al_config *cfg);
/* The lifecycle policy, locked for the calling thread until
 * ctl_policywatch_release (no reload meanwhile); NULL, nothing locked,
 * when it never loaded (or the watch is not started: --once). */
al_policy *ctl_policywatch_lifecycle(void);
void ctl_policywatch_release(void);
/* Stop the thread, close the policies and withdraw their status. */
void ctl_policywatch_stop(void);

#endif
