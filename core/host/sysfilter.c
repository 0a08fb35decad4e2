#include "host/sysfilter.h"

#include <errno.h>
#include <stddef.h>
#include <sys/prctl.h>

#include <linux/seccomp.h>

#include "host/sysfilter_internal.h"

const struct sock_fprog *al_sysfilter_jail_prog(al_err *err)
{
	(void)err;
	return &al_sysfilter_jail;
}

const struct sock_fprog *al_sysfilter_qemu_prog(al_err *err)
{
	(void)err;
	return &al_sysfilter_qemu;
}

const struct sock_fprog *al_sysfilter_gateway_prog(void)
{
	return &al_sysfilter_gateway;
}

int al_sysfilter_install(const struct sock_fprog *prog)
{
	if (prog == NULL) {
		errno = EINVAL;
		return -1;
	}
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog, 0, 0) < 0)
		return -1;
	return 0;
}
