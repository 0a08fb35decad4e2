/* vmmem: see vm/mem.h. */
#include "vm/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/config.h"
#include "base/fdpass.h"
#include "base/file.h"
#include "base/log.h"
#include "proto/agentproto.h"

int al_vmmem_is_sealed(int fd)
{
	int s = fcntl(fd, F_GET_SEALS);
	return s >= 0 && (s & AL_VMMEM_SEALS_ALL) == AL_VMMEM_SEALS_ALL;
}

int al_vmmem_sealed_copy(const char *path, al_err *err)
{
	al_autofd int in = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0)
		return al_err_sys(err, AL_ENOENT, errno, "open %s", path);
	al_autofd int fd = memfd_create("airlock-template-ram",
					MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "memfd_create");
	if (al_file_copy_sparse(in, fd, err) < 0) {
		al_err_wrap(err, "copying %s", path);
		return -1;
	}
	if (fcntl(fd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		return al_err_sys(err, AL_ESYS, errno, "sealing the copy of %s",
				  path);
	return al_steal_fd(&fd);
}

/* ---- client ---- */

static int ask_server(const char *run_dir, const char *vmdir, al_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", run_dir,
			     AL_VMMEM_SOCK) >= sizeof sa.sun_path)
		return al_err_set(err, AL_EINVAL, 0, "socket path too long");
	if (strlen(vmdir) >= AL_PATH_MAX)
		return al_err_set(err, AL_EINVAL, 0, "vmdir path too long");
	al_autofd int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return al_err_sys(err, AL_ESYS, errno, "socket");
	struct timeval tv = {.tv_sec = 10};
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0)
		return al_err_sys(err, AL_EUNAVAIL, errno, "connect %s",
				  sa.sun_path);
	if (send(s, vmdir, strlen(vmdir), MSG_NOSIGNAL) < 0)
		return al_err_sys(err, AL_EUNAVAIL, errno, "send");
	char reply[256];
	int fd = -1;
	al_err rerr = {0};
	ssize_t n = al_fd_recv(s, reply, sizeof reply - 1, &fd, &rerr);
	if (n <= 0) {
		if (fd >= 0)
			close(fd);
		return al_err_sys(err, AL_EUNAVAIL, n < 0 ? errno : EPIPE,
				  "no answer on %s", sa.sun_path);
	}
	reply[n] = '\0';
	if (reply[0] != 'Y' || fd < 0) {
		if (fd >= 0)
			close(fd);
		return al_err_set(err, AL_EUNAVAIL, 0, "controller: %s",
				  reply[0] == 'E' ? reply + 1 : "bad answer");
	}
	/* Fail closed: never hand QEMU pages it could write through. */
	if (!al_vmmem_is_sealed(fd)) {
		close(fd);
		return al_err_set(err, AL_EPROTO, 0,
				  "controller sent unsealed template RAM");
	}
	return fd;
}

int al_vmmem_get(const char *run_dir, const char *vmdir, int *shared,
		 al_err *err)
{
	*shared = 0;
	al_err why = {0};
	int fd = ask_server(run_dir, vmdir, &why);
	if (fd >= 0) {
		*shared = 1;
		return fd;
	}
	al_warn("template RAM of %s not shared (%s): using a private copy",
		vmdir, why.msg);
	char mem[AL_PATH_MAX + 8];
	if ((size_t)snprintf(mem, sizeof mem, "%s/mem", vmdir) >= sizeof mem)
		return al_err_set(err, AL_EINVAL, 0, "vmdir path too long");
	return al_vmmem_sealed_copy(mem, err);
}

/* ---- server ---- */

#define VMMEM_MAX 64

typedef struct vmmem_entry {
	char path[PATH_MAX + 8]; /* real path of VMDIR/mem */
	dev_t dev;
	ino_t ino;
	struct timespec mtime;
	off_t size;
	int fd;
} vmmem_entry;

struct al_vmmem_server {
	int lfd;
	int stop[2];
	char pool[PATH_MAX];
	pthread_t thread;
	pthread_mutex_t lock;
	vmmem_entry e[VMMEM_MAX];
};

static int same_file(const vmmem_entry *e, const struct stat *st)
{
	return e->dev == st->st_dev && e->ino == st->st_ino &&
	       e->size == st->st_size &&
	       e->mtime.tv_sec == st->st_mtim.tv_sec &&
	       e->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* The sealed copy for one request (a vmdir path); -1 with the reason. */
static int lookup(al_vmmem_server *s, const char *vmdir, al_err *err)
{
	char real[PATH_MAX], mem[PATH_MAX + 8];
	if (realpath(vmdir, real) == NULL)
		return al_err_sys(err, AL_ENOENT, errno, "no VM directory");
	size_t pl = strlen(s->pool);
	/* Only template snapshots under the pool, never another file. */
	if (strncmp(real, s->pool, pl) != 0 || real[pl] != '/')
		return al_err_set(err, AL_EPERM, 0, "not under the pool");
	snprintf(mem, sizeof mem, "%s/mem", real);
	struct stat st;
	if (lstat(mem, &st) < 0)
		return al_err_sys(err, AL_ENOENT, errno, "no snapshot RAM");
	if (!S_ISREG(st.st_mode) || st.st_uid != 0)
		return al_err_set(err, AL_EPERM, 0,
				  "snapshot RAM is not a root-owned file");
	pthread_mutex_lock(&s->lock);
	vmmem_entry *free_slot = NULL;
	for (int i = 0; i < VMMEM_MAX; i++) {
		vmmem_entry *e = &s->e[i];
		if (e->fd < 0) {
			if (free_slot == NULL)
				free_slot = e;
			continue;
		}
		if (strcmp(e->path, mem) == 0 && same_file(e, &st)) {
			int fd = dup(e->fd);
			pthread_mutex_unlock(&s->lock);
			if (fd < 0)
				return al_err_sys(err, AL_ESYS, errno, "dup");
			return fd;
		}
	}
	pthread_mutex_unlock(&s->lock);
	int64_t t0 = al_now_ms();
	int fd = al_vmmem_sealed_copy(mem, err);
	if (fd < 0)
		return -1;
	al_info("vm-mem: sealed copy of %s (%lld MiB) in %lld ms", mem,
		(long long)(st.st_size >> 20), (long long)(al_now_ms() - t0));
	pthread_mutex_lock(&s->lock);
	if (free_slot != NULL && free_slot->fd < 0) {
		snprintf(free_slot->path, sizeof free_slot->path, "%s", mem);
		free_slot->dev = st.st_dev;
		free_slot->ino = st.st_ino;
		free_slot->mtime = st.st_mtim;
		free_slot->size = st.st_size;
		free_slot->fd = dup(fd);
	}
	pthread_mutex_unlock(&s->lock);
	return fd;
}

static void serve_one(al_vmmem_server *s, int c)
{
	struct ucred cr;
	socklen_t cl = sizeof cr;
	char req[AL_PATH_MAX];
	ssize_t n = -1;
	/* MSG_TRUNC: the real length, so a longer request is refused
	 * rather than answered for its first bytes. */
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 &&
	    cr.uid == 0)
		n = recv(c, req, sizeof req, MSG_TRUNC);
	al_err err = {0};
	int fd = -1;
	if (n <= 0 || (size_t)n >= sizeof req ||
	    memchr(req, '\0', (size_t)n) != NULL) {
		al_err_set(&err, AL_EINVAL, 0, "bad request");
	} else {
		req[n] = '\0';
		fd = lookup(s, req, &err);
	}
	char reply[200];
	int rl = snprintf(reply, sizeof reply, "%c%s", fd >= 0 ? 'Y' : 'E',
			  fd >= 0 ? "" : err.msg);
	if (rl < 0 || (size_t)rl >= sizeof reply)
		rl = (int)sizeof reply - 1;
	al_err serr = {0};
	if (fd >= 0 && al_fd_send(c, reply, (size_t)rl, fd, &serr) < 0)
		al_warn("vm-mem: reply: %s", serr.msg);
	if (fd < 0) {
		al_warn("vm-mem: refused: %s", err.msg);
		if (send(c, reply, (size_t)rl, MSG_NOSIGNAL) < 0)
			al_warn("vm-mem: reply: %s", strerror(errno));
	}
	if (fd >= 0)
		close(fd);
}

static void *serve_loop(void *arg)
{
	al_vmmem_server *s = arg;
	for (;;) {
		struct pollfd p[2] = {{.fd = s->lfd, .events = POLLIN},
				      {.fd = s->stop[0], .events = POLLIN}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			al_warn("vm-mem: poll: %s", strerror(errno));
			return NULL;
		}
		if (p[1].revents != 0)
			return NULL;
		int c = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		struct timeval tv = {.tv_sec = 2};
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
		serve_one(s, c);
		close(c);
	}
}

al_vmmem_server *al_vmmem_serve(const char *run_dir, const char *pool_dir,
				al_err *err)
{
	al_vmmem_server *s = calloc(1, sizeof *s);
	if (s == NULL) {
		al_err_set(err, AL_ENOMEM, 0, "out of memory");
		return NULL;
	}
	s->lfd = -1;
	s->stop[0] = s->stop[1] = -1;
	for (int i = 0; i < VMMEM_MAX; i++)
		s->e[i].fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char real[PATH_MAX];
	if (realpath(pool_dir, real) == NULL) {
		al_err_sys(err, AL_ENOENT, errno, "pool %s", pool_dir);
		goto fail;
	}
	snprintf(s->pool, sizeof s->pool, "%s", real);
	if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", run_dir,
			     AL_VMMEM_SOCK) >= sizeof sa.sun_path) {
		al_err_set(err, AL_EINVAL, 0, "socket path too long");
		goto fail;
	}
	s->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s->lfd < 0 || pipe2(s->stop, O_CLOEXEC) < 0) {
		al_err_sys(err, AL_ESYS, errno, "socket");
		goto fail;
	}
	unlink(sa.sun_path);
	mode_t old = umask(077);
	int rc = bind(s->lfd, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (rc < 0 || listen(s->lfd, 64) < 0) {
		al_err_sys(err, AL_ESYS, errno, "listen on %s", sa.sun_path);
		goto fail;
	}
	if (pthread_create(&s->thread, NULL, serve_loop, s) != 0) {
		al_err_set(err, AL_ESYS, 0, "pthread_create");
		goto fail;
	}
	return s;
fail:
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->stop[0] >= 0) {
		close(s->stop[0]);
		close(s->stop[1]);
	}
	pthread_mutex_destroy(&s->lock);
	free(s);
	return NULL;
}

void al_vmmem_prune(al_vmmem_server *s)
{
	if (s == NULL)
		return;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < VMMEM_MAX; i++) {
		vmmem_entry *e = &s->e[i];
		struct stat st;
		if (e->fd < 0 ||
		    (lstat(e->path, &st) == 0 && same_file(e, &st)))
			continue;
		/* Running clones keep their own references to the pages. */
		al_info("vm-mem: dropping the copy of %s", e->path);
		close(e->fd);
		e->fd = -1;
	}
	pthread_mutex_unlock(&s->lock);
}

void al_vmmem_stop(al_vmmem_server *s)
{
	if (s == NULL)
		return;
	(void)!write(s->stop[1], "x", 1);
	pthread_join(s->thread, NULL);
	close(s->lfd);
	close(s->stop[0]);
	close(s->stop[1]);
	for (int i = 0; i < VMMEM_MAX; i++)
		if (s->e[i].fd >= 0)
			close(s->e[i].fd);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
