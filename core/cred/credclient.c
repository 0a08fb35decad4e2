/* credclient: see credclient.h. */
#include "cred/credclient.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/agentproto.h"

/* Kept here rather than from controller/credsvc.h: core does not look
 * into the programs. */
#define CRED_SOCK "run/cred.sock"

static int dial(const char *state_dir, al_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", state_dir,
			 CRED_SOCK);
	if (n < 0 || (size_t)n >= sizeof sa.sun_path)
		return al_err_set(err, AL_EINVAL, 0,
				  "credential socket path too long");
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int e = errno;
		close(fd);
		return al_err_sys(err, AL_EUNAVAIL, e,
				  "the controller's credential service");
	}
	return fd;
}

int al_credclient_open(const char *state_dir, const char *sandbox, al_err *err)
{
	char *hello = al_cred_hello_pack(sandbox, err);
	if (hello == NULL)
		return -1;
	int fd = dial(state_dir, err);
	if (fd >= 0 &&
	    al_frame_send_until(fd, AL_F_CRED_HELLO, 0, hello, strlen(hello),
				al_now_ms() + AL_CREDCLIENT_TIMEOUT_MS,
				err) < 0) {
		close(fd);
		fd = -1;
	}
	free(hello);
	return fd;
}

int al_credclient_refresh(const char *state_dir, const char *project,
			  al_cred_refresh_done *out, al_err *err)
{
	int64_t deadline = al_now_ms() + AL_CREDCLIENT_TIMEOUT_MS;
	char *req = al_cred_refresh_pack(project, err);
	if (req == NULL)
		return -1;
	int fd = dial(state_dir, err);
	int rc = fd < 0 ? -1
			: al_frame_send_until(fd, AL_F_CRED_REFRESH,
					      AL_REQ_ID_CLIENT, req,
					      strlen(req), deadline, err);
	free(req);
	al_frame_reader r;
	al_frame_reader_init(&r);
	al_frame f = {0};
	if (rc == 0)
		rc = al_frame_recv(fd, &r, &f, deadline, err);
	if (rc == 0) {
		al_cred_refresh_done d;
		if (f.type == AL_F_CRED_REFRESH_DONE)
			rc = al_cred_refresh_done_unpack(f.payload, f.len, &d,
							 err);
		else if (f.type == AL_F_ERROR &&
			 al_error_unpack(f.payload, f.len, err, NULL) == 0)
			rc = -1;
		else
			rc = al_err_set(err, AL_EPROTO, 0,
					"credential service: unexpected %s",
					al_frame_type_name(f.type));
		if (rc == 0 && out != NULL)
			*out = d;
		al_frame_free(&f);
	}
	al_frame_reader_free(&r);
	if (fd >= 0)
		close(fd);
	return rc;
}
