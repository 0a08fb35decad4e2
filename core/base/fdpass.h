/* fdpass: one descriptor passed with bytes over an AF_UNIX stream
 * socket (SCM_RIGHTS). */
#ifndef AL_FDPASS_H
#define AL_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

#include "base/err.h"

/* Send n bytes (all of them, or fail) with fd attached to the first.
 * Non-blocking sockets: AL_EUNAVAIL when it would block before the
 * first byte went, AL_EPROTO when only part went (the stream is then
 * broken). */
int al_fd_send(int sock, const void *p, size_t n, int fd, al_err *err);

/* One recvmsg of up to cap bytes: the count (0 = EOF), or -1 (EAGAIN is
 * -1 with errno EAGAIN and err untouched). A descriptor that came with
 * them is stored in *fd (close-on-exec) if *fd was -1, else closed: the
 * caller holds at most one. Extra descriptors are closed. */
ssize_t al_fd_recv(int sock, void *p, size_t cap, int *fd, al_err *err);

#endif
