/* vm shape: see vm/shape.h. */
#include "vm/shape.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/config.h"
#include "base/file.h"
#include "base/log.h"
#include "proto/agentproto.h"
#include "vm/machine.h"
#include "vm/snapshot.h"

#define SHAPE_POLL_MS 100

unsigned al_vm_shape_vcpus(uint32_t cpu_millis)
{
	if (cpu_millis == 0)
		return AL_VM_VCPUS;
	return (cpu_millis + 999) / 1000;
}

int al_vm_shape_limits(uint64_t memory_mb, al_limits *l, al_err *err)
{
	if (memory_mb != 0 && memory_mb != AL_VM_MEM_MB)
		return al_err_set(err, AL_EINVAL, 0,
				  "'memory_mb' of a vm sandbox is %d, fixed by "
				  "the template's VM snapshot",
				  AL_VM_MEM_MB);
	l->memory_bytes = (uint64_t)AL_VM_MEM_MB << 20;
	return 0;
}

/* The snapshot in dir is whole: it appears by one rename, but a
 * directory someone emptied by hand must not be restored from. */
static int shape_ready(const char *dir)
{
	static const char *const names[] = {"disk.ext4", "mem", "state"};
	char p[AL_PATH_MAX + 16];
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, names[i]) >=
			    sizeof p ||
		    access(p, R_OK) < 0)
			return 0;
	}
	return 1;
}

/* The lock of one shape, held on fd; while another start holds it, wait
 * until deadline_ms, then AL_EUNAVAIL. */
static int lock_shape(int fd, unsigned vcpus, int64_t deadline_ms, al_err *err)
{
	for (;;) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return al_err_sys(err, AL_ESYS, errno,
					  "locking the %u-vCPU snapshot",
					  vcpus);
		if (al_now_ms() >= deadline_ms)
			return al_err_set(err, AL_EUNAVAIL, 0,
					  "the template's %u-vCPU VM snapshot "
					  "is being made for another create: "
					  "retry in a few seconds",
					  vcpus);
		struct timespec ts = {0, SHAPE_POLL_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
}

static void fsync_dir(const char *dir)
{
	al_autofd int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		al_warn("fsync %s: %s", dir, strerror(errno));
}

/* Boot a copy of the never-booted disk with vcpus vCPUs in out.new,
 * snapshot it there, rename it to out. Called with the shape's lock. */
static int make_shape(const char *vmdir, const char *out, unsigned vcpus,
		      al_vm_accel accel, const char *state_dir,
		      const char *cgroup, al_err *err)
{
	char tmp[AL_PATH_MAX], base[AL_PATH_MAX], disk[AL_PATH_MAX];
	struct stat before, after;
	al_vm_kernel k;
	if (al_vm_path(tmp, sizeof tmp, err, "%s.new", out) < 0 ||
	    al_vm_path(base, sizeof base, err, "%s/" AL_VM_BASE_DISK, vmdir) <
		    0 ||
	    al_vm_path(disk, sizeof disk, err, "%s/disk.ext4", tmp) < 0)
		return -1;
	if (stat(vmdir, &before) < 0)
		return al_err_sys(err, AL_ENOENT, errno, "stat %s", vmdir);
	if (al_vm_kernel_find(state_dir, &k, err) < 0)
		return -1;
	/* A maker that died half-way left this. */
	al_vm_snapdir_remove(tmp);
	if (mkdir(tmp, 0700) < 0)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", tmp);
	int64_t t0 = al_now_ms();
	if (al_file_clone(base, disk, AL_FILE_CLONE_SYNC, NULL, err) < 0 ||
	    al_vm_snapshot_boot(tmp, vcpus, &k, accel, cgroup, err) < 0) {
		al_vm_snapdir_remove(tmp);
		al_err_wrap(err, "making the %u-vCPU snapshot of %s", vcpus,
			    vmdir);
		return -1;
	}
	/* airlock-controller --init swapped a rebuilt VMDIR in meanwhile:
	 * this snapshot is of the old disk, and tmp now names a path in the
	 * new directory, not ours to remove. */
	if (stat(vmdir, &after) < 0 || after.st_ino != before.st_ino ||
	    after.st_dev != before.st_dev)
		return al_err_set(err, AL_EUNAVAIL, 0,
				  "the template's VM snapshot was rebuilt "
				  "while its %u-vCPU one was made: retry",
				  vcpus);
	if (rename(tmp, out) < 0) {
		al_err_sys(err, AL_ESYS, errno, "rename %s", tmp);
		al_vm_snapdir_remove(tmp);
		return -1;
	}
	fsync_dir(vmdir);
	al_info("vm template %s: %u-vCPU snapshot made in %lld ms", vmdir,
		vcpus, (long long)(al_now_ms() - t0));
	return 0;
}

int al_vm_shape_dir(const char *vmdir, unsigned vcpus, al_vm_accel accel,
		    const char *state_dir, const char *cgroup, char *out,
		    size_t outlen, al_err *err)
{
	unsigned host = al_config_host_cpus();
	if (vcpus == 0 || vcpus > host)
		return al_err_set(err, AL_EINVAL, 0,
				  "a vm of %u vCPUs on a host of %u CPUs",
				  vcpus, host);
	if (vcpus == AL_VM_VCPUS)
		return al_vm_path(out, outlen, err, "%s", vmdir);
	char lock[AL_PATH_MAX];
	if (al_vm_path(out, outlen, err, "%s/" AL_VM_SHAPE_PREFIX "%u", vmdir,
		       vcpus) < 0 ||
	    al_vm_path(lock, sizeof lock, err, "%s.lock", out) < 0)
		return -1;
	if (shape_ready(out))
		return 0;
	al_autofd int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
				0600);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", lock);
	if (lock_shape(fd, vcpus, al_now_ms() + AL_VM_SHAPE_WAIT_MS, err) < 0)
		return -1;
	/* Made by the start that held the lock before us. */
	if (shape_ready(out))
		return 0;
	return make_shape(vmdir, out, vcpus, accel, state_dir, cgroup, err);
}
