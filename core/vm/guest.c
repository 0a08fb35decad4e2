/* vm guest: see vm/guest.h. */
#include "vm/guest.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

const char *al_vm_accel_name(al_vm_accel a)
{
	return a == AL_VM_KVM ? "kvm" : "tcg";
}

int al_vm_kernel_find(const char *state_dir, al_vm_kernel *k, al_err *err)
{
	int n1 = snprintf(k->vmlinuz, sizeof k->vmlinuz, "%s/vm/kernel/vmlinuz",
			  state_dir);
	int n2 = snprintf(k->initrd, sizeof k->initrd, "%s/vm/initrd.img",
			  state_dir);
	if (n1 < 0 || (size_t)n1 >= sizeof k->vmlinuz || n2 < 0 ||
	    (size_t)n2 >= sizeof k->initrd)
		return al_err_set(err, AL_EINVAL, 0, "state dir path too long");
	if (access(k->vmlinuz, R_OK) < 0)
		return al_err_sys(err, AL_ENOENT, errno,
				  "guest kernel %s (run `make vm-kernel`)",
				  k->vmlinuz);
	if (access(k->initrd, R_OK) < 0)
		return al_err_sys(err, AL_ENOENT, errno,
				  "guest initrd %s (run `make vm-kernel`)",
				  k->initrd);
	return 0;
}
