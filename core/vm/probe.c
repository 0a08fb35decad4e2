/* vm probe: see vm/probe.h. */
#include "vm/probe.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "proto/agentproto.h"
#include "vm/jail.h"
#include "vm/machine.h"

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

static int vm_file(const char *state_dir, const char *name, char *out,
		   size_t len)
{
	int n = snprintf(out, len, "%s/vm/%s", state_dir, name);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int al_vm_status_save(const char *state_dir, const char *why, al_err *err)
{
	char dir[AL_PATH_MAX], path[AL_PATH_MAX], tmp[AL_PATH_MAX + 8];
	if (vm_file(state_dir, "", dir, sizeof dir) < 0 ||
	    vm_file(state_dir, "unavailable", path, sizeof path) < 0)
		return al_err_set(err, AL_EINVAL, 0, "state dir path too long");
	if (why == NULL) {
		if (unlink(path) < 0 && errno != ENOENT)
			return al_err_sys(err, AL_ESYS, errno, "remove %s",
					  path);
		return 0;
	}
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", dir);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	al_autofd int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				0644);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "create %s", tmp);
	size_t n = strnlen(why, 400);
	if (write(fd, why, n) != (ssize_t)n || rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return al_err_sys(err, AL_ESYS, e, "write %s", path);
	}
	return 0;
}

int al_vm_usable(const char *state_dir, char *why, size_t whylen)
{
	al_vm_kernel k;
	al_err err;
	char path[AL_PATH_MAX];
	if (access(AL_VM_QEMU, X_OK) < 0) {
		snprintf(why, whylen,
			 AL_VM_QEMU " is not installed (apt-get install "
				    "qemu-system-x86)");
		return 0;
	}
	if (al_vm_kernel_find(state_dir, &k, &err) < 0) {
		snprintf(why, whylen, "no guest kernel (run make vm-kernel)");
		return 0;
	}
	if (vm_file(state_dir, "unavailable", path, sizeof path) < 0) {
		snprintf(why, whylen, "state dir path too long");
		return 0;
	}
	al_autofd int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char buf[400];
		ssize_t n = read(fd, buf, sizeof buf - 1);
		if (n < 0)
			n = 0;
		buf[n] = '\0';
		/* Printable only: it ends up in API answers and logs. */
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] < ' ' || buf[i] > '~')
				buf[i] = ' ';
		snprintf(why, whylen, "%s", n > 0 ? buf : "unknown reason");
		return 0;
	}
	if (vm_file(state_dir, "accel", path, sizeof path) < 0 ||
	    access(path, R_OK) < 0) {
		snprintf(
			why, whylen,
			"the accelerator probe has not run (airlock-controller "
			"--init)");
		return 0;
	}
	why[0] = '\0';
	return 1;
}

/* ---- accelerator probe ---- */

al_vm_accel al_vm_probe(const al_vm_kernel *k, int timeout_ms, char *why,
			size_t whylen)
{
	snprintf(why, whylen, "unknown");
	al_autofd int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0) {
		snprintf(why, whylen, "/dev/kvm: %s", strerror(errno));
		return AL_VM_TCG;
	}
	al_err err = {0};
	al_vm_machine m;
	al_vm_machine_init(&m);
	if (al_vm_rundir_make(m.rundir, sizeof m.rundir, &err) < 0 ||
	    al_vmjail_uid_take("probe", &m.uid, &err) < 0) {
		snprintf(why, whylen, "%s", err.msg);
		al_vm_machine_release(&m);
		return AL_VM_TCG;
	}
	al_vm_launch l = {.mode = AL_VM_PROBE,
			  .accel = AL_VM_KVM,
			  .kernel = k,
			  .mem_fd = -1,
			  .rundir = m.rundir,
			  .uid = m.uid.uid};
	al_autofd int qmp_fd = -1, agent_fd = -1;
	al_vm_accel res = AL_VM_TCG;
	if (al_vm_machine_spawn(&m, &l, &qmp_fd, &agent_fd, &err) < 0) {
		snprintf(why, whylen, "%s", err.msg);
		al_vm_machine_release(&m);
		return AL_VM_TCG;
	}
	char serial[128];
	snprintf(serial, sizeof serial, "%s/serial.log", m.rundir);
	int64_t deadline = al_now_ms() + timeout_ms;
	snprintf(why, whylen, "guest did not reach init within %d ms",
		 timeout_ms);
	int exited = 0;
	for (;;) {
		char buf[4096];
		al_autofd int fd = open(serial, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : 0;
		if (n > 0) {
			buf[n] = '\0';
			if (memmem(buf, (size_t)n, AL_VM_PROBE_MARKER,
				   strlen(AL_VM_PROBE_MARKER)) != NULL) {
				res = AL_VM_KVM;
				snprintf(why, whylen, "guest booted under kvm");
				break;
			}
		}
		if (exited)
			break;
		if (al_vm_machine_exited(&m, 20)) {
			char tail[160];
			al_vm_machine_log_tail(&m, tail, sizeof tail);
			snprintf(why, whylen, "QEMU exited under kvm: %s",
				 tail[0] != '\0' ? tail : "no message");
			/* The marker may have landed right before exit: one
			 * more read. */
			exited = 1;
			continue;
		}
		if (al_now_ms() >= deadline)
			break;
	}
	al_vm_machine_release(&m);
	return res;
}
