#include "vm/probe.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
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
		snprintf(why, whylen,
			 "the accelerator probe has not run (airlock-controller "
			 "--init)");
		return 0;
	}
	why[0] = '\0';
	return 1;
}

int al_vm_template_dir(const al_config *cfg, const char *tmpl, char *out,
		       size_t outlen, al_err *err)
{
	if (!al_id_valid(tmpl))
		return al_err_set(err, AL_EINVAL, 0, "invalid template name");
	/* A versioned template (pool/templates/<t> -> template-versions/<t>/
	 * <v>/rootfs) keeps its VM artefacts beside that version's rootfs,
	 * so sandboxes of an older version keep theirs. */
	char link[AL_PATH_MAX], real[PATH_MAX], versions[AL_PATH_MAX + 32];
	snprintf(versions, sizeof versions, "%s/template-versions/",
		 cfg->pool_dir);
	if (al_config_template_root(cfg, tmpl, link, sizeof link, NULL) == 0 &&
	    realpath(link, real) != NULL &&
	    strncmp(real, versions, strlen(versions)) == 0) {
		size_t rl = strlen(real);
		if (rl > 7 && strcmp(real + rl - 7, "/rootfs") == 0) {
			real[rl - 7] = '\0';
			int n = snprintf(out, outlen, "%s/vm", real);
			if (n < 0 || (size_t)n >= outlen)
				return al_err_set(err, AL_EINVAL, 0,
						  "path for %s too long", tmpl);
			return 0;
		}
	}
	int n = snprintf(out, outlen, "%s/vm/%s", cfg->pool_dir, tmpl);
	if (n < 0 || (size_t)n >= outlen)
		return al_err_set(err, AL_EINVAL, 0, "path for %s too long",
				  tmpl);
	return 0;
}

/* The template's VM directory (target of tmpl_root/.airlock-vm). */
static int template_vmdir(const char *tmpl_root, char *out, size_t len)
{
	char link[AL_PATH_MAX + 16];
	int k = snprintf(link, sizeof link, "%s/.airlock-vm", tmpl_root);
	if (k < 0 || (size_t)k >= sizeof link)
		return -1;
	ssize_t n = readlink(link, out, len - 1);
	if (n <= 0 || (size_t)n >= len - 16)
		return -1;
	out[n] = '\0';
	return out[0] == '/' ? 0 : -1;
}

int al_vm_template_ready(const char *tmpl_root, char *why, size_t whylen)
{
	char dir[AL_PATH_MAX], p[AL_PATH_MAX + 16];
	if (template_vmdir(tmpl_root, dir, sizeof dir) < 0) {
		snprintf(why, whylen, "the template has no VM image yet");
		return 0;
	}
	static const char *const names[] = {"disk.ext4", "mem", "state",
					    "accel"};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		snprintf(p, sizeof p, "%s/%s", dir, names[i]);
		if (access(p, R_OK) < 0) {
			snprintf(why, whylen,
				 "the template's VM snapshot is incomplete "
				 "(no %s)",
				 names[i]);
			return 0;
		}
	}
	why[0] = '\0';
	return 1;
}

uint64_t al_vm_disk_size(uint64_t image_bytes, uint64_t disk_bytes)
{
	uint64_t want = disk_bytes & ~((1ull << 20) - 1);
	return want > image_bytes ? want : image_bytes;
}

int al_vm_snapshot_current(const char *vmdir)
{
	char p[AL_PATH_MAX + 16], got[16] = "";
	if ((size_t)snprintf(p, sizeof p, "%s/format", vmdir) >= sizeof p)
		return 0;
	al_autofd int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, got, sizeof got - 1) : -1;
	if (n < 0)
		return 0;
	got[n] = '\0';
	return strcmp(got, AL_VM_SNAPSHOT_FORMAT) == 0;
}

/* a's modification time is later than b's. */
static int newer(const struct stat *a, const struct stat *b)
{
	if (a->st_mtim.tv_sec != b->st_mtim.tv_sec)
		return a->st_mtim.tv_sec > b->st_mtim.tv_sec;
	return a->st_mtim.tv_nsec > b->st_mtim.tv_nsec;
}

int al_vm_template_stale(const char *tmpl_root, const char *state_dir,
			 al_vm_accel accel)
{
	char dir[AL_PATH_MAX], p[AL_PATH_MAX + 32], why[8], got[8] = "";
	if (!al_vm_template_ready(tmpl_root, why, sizeof why) ||
	    template_vmdir(tmpl_root, dir, sizeof dir) < 0)
		return 1;
	snprintf(p, sizeof p, "%s/accel", dir);
	{
		al_autofd int fd = open(p, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, got, sizeof got - 1) : -1;
		if (n < 0)
			return 1;
		got[n] = '\0';
	}
	if (strcmp(got, al_vm_accel_name(accel)) != 0 ||
	    !al_vm_snapshot_current(dir))
		return 1;
	struct stat snap, in;
	snprintf(p, sizeof p, "%s/state", dir);
	if (stat(p, &snap) < 0)
		return 1;
	al_vm_kernel k;
	al_err err;
	/* A QEMU upgrade may change device state: snapshot again. */
	const char *inputs[4] = {NULL, NULL, NULL, AL_VM_QEMU};
	snprintf(p, sizeof p, "%s/sbin/airlock-agent", tmpl_root);
	inputs[0] = p;
	if (al_vm_kernel_find(state_dir, &k, &err) == 0) {
		inputs[1] = k.vmlinuz;
		inputs[2] = k.initrd;
	}
	for (size_t i = 0; i < 4; i++)
		if (inputs[i] != NULL && stat(inputs[i], &in) == 0 &&
		    newer(&in, &snap))
			return 1;
	return 0;
}
