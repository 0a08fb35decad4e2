/* machine_end: the reason recorded when a sandbox's machine (a jail's
 * init, a vm's QEMU) ended on its own. An end by SIGKILL while its
 * memory cgroup counts OOM kills is the kernel's OOM killer, and is said
 * so with the limit, rather than as a bare signal. */
#ifndef AL_MACHINE_END_H
#define AL_MACHINE_END_H

#include <stddef.h>
#include <stdint.h>

#include "host/cgroup.h"

/* Into out: why the machine named init_name ("init", "virtual machine
 * (QEMU)") ended with wait status wstatus. mem is its cgroup's memory
 * (NULL when it could not be read); limit_bytes the sandbox's memory
 * limit as its owner set it (0: mem's limit). */
void al_machine_end_reason(const char *init_name, int wstatus,
			   const al_cgroup_memory *mem, uint64_t limit_bytes,
			   char *out, size_t outlen);

#endif
