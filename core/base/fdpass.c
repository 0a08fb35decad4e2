/* fdpass: see fdpass.h. */
#include "base/fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int al_fd_send(int sock, const void *p, size_t n, int fd, al_err *err)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	struct iovec iov = {.iov_base = (void *)p, .iov_len = n};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof u.buf};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof fd);
	ssize_t w;
	do
		w = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	if (w < 0)
		return al_err_sys(err, AL_EUNAVAIL, errno, "sendmsg");
	if ((size_t)w != n)
		return al_err_set(err, AL_EPROTO, 0,
				  "sendmsg: %zd of %zu bytes went", w, n);
	return 0;
}

ssize_t al_fd_recv(int sock, void *p, size_t cap, int *fd, al_err *err)
{
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = p, .iov_len = cap};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof u.buf};
	ssize_t r;
	do
		r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			al_err_sys(err, AL_EUNAVAIL, errno, "recvmsg");
		return -1;
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL;
	     c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int got;
			memcpy(&got, CMSG_DATA(c) + i * sizeof(int),
			       sizeof got);
			if (*fd < 0)
				*fd = got;
			else
				close(got);
		}
	}
	return r;
}
