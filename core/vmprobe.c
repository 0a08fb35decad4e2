#include "vmprobe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"

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

static int accel_path(const char *state_dir, char *out, size_t len)
{
	int n = snprintf(out, len, "%s/vm/accel", state_dir);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int al_vm_accel_save(const char *state_dir, al_vm_accel a, al_err *err)
{
	char path[AL_PATH_MAX], tmp[AL_PATH_MAX + 8];
	if (accel_path(state_dir, path, sizeof path) < 0)
		return al_err_set(err, AL_EINVAL, 0, "state dir path too long");
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	al_autofd int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				0644);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "create %s", tmp);
	const char *s = al_vm_accel_name(a);
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s) || fsync(fd) < 0 ||
	    rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return al_err_sys(err, AL_ESYS, e, "write %s", path);
	}
	return 0;
}

al_vm_accel al_vm_accel_load(const char *state_dir)
{
	char path[AL_PATH_MAX], buf[8] = "";
	if (accel_path(state_dir, path, sizeof path) < 0)
		return AL_VM_TCG;
	al_autofd int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return AL_VM_TCG;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	if (n == 3 && memcmp(buf, "kvm", 3) == 0)
		return AL_VM_KVM;
	return AL_VM_TCG;
}
