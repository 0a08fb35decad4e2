/* DISK_GROW: the vm sandbox's disk image is made at its template's size
 * and the template's snapshot has that ext4 mounted; the host grows the
 * image to the sandbox's disk_mb after a restore or claim, and the agent
 * grows the mounted filesystem to match (online, EXT4_IOC_RESIZE_FS:
 * the guest has no resize2fs). */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

/* fs/ext4/ext4.h; not in the uapi headers. */
#define DISK_EXT4_IOC_RESIZE_FS _IOW('f', 16, uint64_t)
#define DISK_EXT4_MAGIC 0xEF53
/* The device learns its new size from a config interrupt the host's
 * resize raised just before; a guest worker thread applies it. */
#define DISK_WAIT_MS 5000

/* Bytes of the block device dev, from sysfs (512-byte sectors); -1. */
static int64_t dev_bytes(dev_t dev)
{
	char p[64], buf[32];
	snprintf(p, sizeof p, "/sys/dev/block/%u:%u/size", major(dev),
		 minor(dev));
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *end;
	errno = 0;
	unsigned long long sectors = strtoull(buf, &end, 10);
	if (errno != 0 || end == buf || sectors > INT64_MAX / 512)
		return -1;
	return (int64_t)sectors * 512;
}

/* Wait until dev spans at least want bytes; 0, or -1 with err. */
static int dev_wait(dev_t dev, int64_t want, al_err *err)
{
	int64_t deadline = al_now_ms() + DISK_WAIT_MS, have;
	struct timespec pause = {0, 2 * 1000 * 1000};
	while ((have = dev_bytes(dev)) < want) {
		if (have < 0)
			return al_err_sys(err, AL_ESYS, errno,
					  "size of block device %u:%u",
					  major(dev), minor(dev));
		if (al_now_ms() >= deadline)
			return al_err_set(err, AL_ETIMEDOUT, 0,
					  "block device %u:%u has %" PRId64
					  " bytes, not %" PRId64,
					  major(dev), minor(dev), have, want);
		nanosleep(&pause, NULL);
	}
	return 0;
}

void agent_disk_grow(agent *a, const al_frame *f)
{
	al_err err;
	if (agent_req_find(a, f->id) != NULL) {
		al_warn("ignoring DISK_GROW for live request %u", f->id);
		return;
	}
	al_disk_grow req;
	int fd = -1;
	if (al_disk_grow_unpack(f->payload, f->len, &req, &err) < 0 ||
	    agent_check_path(req.path, &err) < 0)
		goto fail;
	const char *path = req.path;
	uint64_t bytes = req.bytes;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	struct statfs sf;
	if (fd < 0 || fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0) {
		al_err_sys(&err, agent_code_from_errno(errno), errno, "open %s",
			   path);
		goto fail;
	}
	if (sf.f_type != DISK_EXT4_MAGIC || sf.f_bsize <= 0) {
		al_err_set(&err, AL_EINVAL, 0, "%s is not on ext4", path);
		goto fail;
	}
	if (dev_wait(st.st_dev, (int64_t)bytes, &err) < 0)
		goto fail;
	/* Whole blocks of the device, never past it; a count below the
	 * filesystem's own is refused by ext4 (it cannot shrink online). */
	uint64_t blocks = bytes / (uint64_t)sf.f_bsize;
	if (ioctl(fd, DISK_EXT4_IOC_RESIZE_FS, &blocks) < 0) {
		al_err_sys(&err, agent_code_from_errno(errno), errno,
			   "growing %s to %" PRIu64 " blocks", path, blocks);
		goto fail;
	}
	close(fd);
	agent_send(a, AL_F_RESULT, f->id, "{}", 2);
	return;
fail:
	if (fd >= 0)
		close(fd);
	agent_send_err(a, f->id, &err);
}
