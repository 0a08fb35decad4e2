/* sysfilter_internal: the compiled programs, defined in the build's
 * gen/sysfilter_bpf.c (written by sysfilter-gen, core/host/sysfilter_gen.c). */
#ifndef AL_SYSFILTER_INTERNAL_H
#define AL_SYSFILTER_INTERNAL_H

#include <linux/filter.h>

extern const struct sock_fprog al_sysfilter_jail;
extern const struct sock_fprog al_sysfilter_qemu;
extern const struct sock_fprog al_sysfilter_gateway;

#endif
