/* uidrange: see uidrange.h. */
#include "host/uidrange.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"

const al_uidrange_pool al_uidrange_vm = {
	.dir = "/run/airlock-vm-uids",
	.base = AL_UIDRANGE_VM_BASE,
	.size = 1,
	.slots = AL_UIDRANGE_VM_COUNT,
	.what = "QEMU uids",
};

const al_uidrange_pool al_uidrange_ns = {
	.dir = "/run/airlock-ns-uids",
	.base = AL_UIDRANGE_NS_BASE,
	.size = AL_UIDRANGE_NS_SIZE,
	.slots = AL_UIDRANGE_NS_SLOTS,
	.what = "ns sandbox uid ranges",
};

const al_uidrange_pool al_uidrange_gw = {
	.dir = "/run/airlock-gw-uids",
	.base = AL_UIDRANGE_GW_BASE,
	.size = 1,
	.slots = AL_UIDRANGE_GW_COUNT,
	.what = "gateway uids",
};

static uint32_t fnv1a(const char *s)
{
	uint32_t h = 2166136261u;
	for (; s != NULL && *s != '\0'; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

int al_uidrange_take(const al_uidrange_pool *p, const char *hint,
		     al_uidrange *r, al_err *err)
{
	r->base = 0;
	r->lock_fd = -1;
	if (mkdir(p->dir, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", p->dir);
	al_autofd int dir = open(p->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
						 O_CLOEXEC);
	struct stat st;
	if (dir < 0 || fstat(dir, &st) < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", p->dir);
	/* Whoever could write here could hand one slot to two holders. */
	if (st.st_uid != 0 || (st.st_mode & 022) != 0)
		return al_err_set(err, AL_EPERM, 0,
				  "%s must be owned by root, mode 0700",
				  p->dir);
	uint32_t start = fnv1a(hint) % p->slots;
	for (uint32_t i = 0; i < p->slots; i++) {
		uint32_t slot = (start + i) % p->slots;
		char name[16];
		snprintf(name, sizeof name, "%u", slot);
		int fd = openat(dir, name,
				O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
				0600);
		if (fd < 0)
			return al_err_sys(err, AL_ESYS, errno, "open %s/%s",
					  p->dir, name);
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			r->base = p->base + slot * p->size;
			r->lock_fd = fd;
			return 0;
		}
		int e = errno;
		close(fd);
		if (e != EWOULDBLOCK)
			return al_err_sys(err, AL_ESYS, e, "flock %s/%s",
					  p->dir, name);
	}
	return al_err_set(err, AL_EUNAVAIL, 0, "all %u %s are in use", p->slots,
			  p->what);
}

void al_uidrange_drop(al_uidrange *r)
{
	if (r == NULL)
		return;
	if (r->lock_fd >= 0)
		close(r->lock_fd);
	r->lock_fd = -1;
	r->base = 0;
}
