/* Relaying to a sandbox's shim (see upstream.h). */
#include "upstream.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "base/jsonkey.h"
#include "sandbox/shimctl.h"

int fcgi_upstream_open(al_req *r, uint16_t type, const char *payload,
		       int64_t deadline_ms, al_err *err)
{
	int fd = al_shimctl_connect(r->cfg, r->id, err);
	if (fd < 0)
		return -1;
	if (al_frame_send_until(fd, type, AL_REQ_ID_CLIENT, payload,
				strlen(payload), deadline_ms, err) < 0) {
		al_shimctl_relay_error(err);
		close(fd);
		return -1;
	}
	return fd;
}

/* A decoded frame as fcgi_upstream_next hands it out. */
static int take(al_frame *f, al_err *err)
{
	if (f->id != AL_REQ_ID_CLIENT) {
		al_frame_free(f);
		return al_err_set(err, AL_EPROTO, 0,
				  "sandbox answered for another request");
	}
	if (f->type == AL_F_ERROR) {
		al_shimctl_error_frame(f, err);
		al_frame_free(f);
		return -1;
	}
	return AL_UPSTREAM_FRAME;
}

int fcgi_upstream_next(al_req *r, int fd, al_frame_reader *rd, al_frame *f,
		       int64_t until_ms, al_err *err)
{
	for (;;) {
		int k = al_frame_next(rd, f, err);
		if (k < 0)
			err->code = AL_EPROTO;
		if (k != 0)
			return k < 0 ? -1 : take(f, err);
		int timeout = -1;
		if (until_ms > 0) {
			int64_t left = until_ms - al_now_ms();
			if (left <= 0)
				return AL_UPSTREAM_IDLE;
			timeout = left > 60000 ? 60000 : (int)left;
		}
		struct pollfd pfd[2] = {
			{.fd = fd, .events = POLLIN},
			{.fd = r->fcgi->ipcFd, .events = POLLRDHUP},
		};
		int n = poll(pfd, r->fcgi->ipcFd >= 0 ? 2 : 1, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return al_err_sys(err, AL_ESYS, errno, "poll");
		}
		if (n == 0)
			continue;
		/* nginx closes its side when the HTTP client goes away. */
		if (r->fcgi->ipcFd >= 0 &&
		    (pfd[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0)
			return AL_UPSTREAM_GONE;
		if (pfd[0].revents != 0) {
			int rc = al_frame_reader_fill(rd, fd, err);
			if (rc < 0) {
				al_shimctl_relay_error(err);
				return -1;
			}
			if (rc == 0) {
				/* Frames that arrived before EOF count. */
				k = al_frame_next(rd, f, err);
				if (k != 0)
					return k < 0 ? -1 : take(f, err);
				return al_err_set(err, AL_EUNAVAIL, 0,
						  "sandbox connection closed");
			}
		}
	}
}

json_object *fcgi_upstream_json(const al_frame *f, al_err *err)
{
	json_tokener *tok = json_tokener_new_ex(AL_JSON_DEPTH_MAX);
	if (tok == NULL) {
		al_err_set(err, AL_ENOMEM, 0, "out of memory");
		return NULL;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	json_object *o = json_tokener_parse_ex(tok, (const char *)f->payload,
					       (int)f->len);
	json_tokener_free(tok);
	al_err dup;
	if (o == NULL || !json_object_is_type(o, json_type_object) ||
	    al_json_keys_unique((const char *)f->payload, f->len, 0, &dup) <
		    0) {
		json_object_put(o);
		al_err_set(err, AL_EPROTO, 0, "sandbox sent a malformed %s",
			   al_frame_type_name(f->type));
		return NULL;
	}
	return o;
}
