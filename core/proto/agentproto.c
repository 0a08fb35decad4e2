/* agentproto: frame codec shared by the host programs and the guest agent.
 *
 * This file is linked statically into airlock-agent, so it depends on
 * libc, json-c, err, log, hex and jsonkey only. Both peers are hostile to each other:
 * a header is validated completely before a single byte of its payload
 * is stored or allocated for. */
#include "proto/agentproto.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "base/jsonkey.h"

#define BUF_DEFAULT_MAX ((size_t)64 << 20)
/* Bytes asked of read(2) at a time by al_frame_reader_fill. */
#define READ_CHUNK ((size_t)64 << 10)

/* clang-format off */
static const char *const type_names[AL_F_TYPE_MAX] = {
	[AL_F_HELLO] = "HELLO",
	[AL_F_EXEC] = "EXEC",
	[AL_F_STARTED] = "STARTED",
	[AL_F_STDIN] = "STDIN",
	[AL_F_STDOUT] = "STDOUT",
	[AL_F_STDERR] = "STDERR",
	[AL_F_EXIT] = "EXIT",
	[AL_F_SIGNAL] = "SIGNAL",
	[AL_F_FILE_READ] = "FILE_READ",
	[AL_F_FILE_DATA] = "FILE_DATA",
	[AL_F_FILE_END] = "FILE_END",
	[AL_F_FILE_WRITE] = "FILE_WRITE",
	[AL_F_FILE_LIST] = "FILE_LIST",
	[AL_F_RESULT] = "RESULT",
	[AL_F_ERROR] = "ERROR",
	[AL_F_STATUS] = "STATUS",
	[AL_F_DESTROY] = "DESTROY",
	[AL_F_CLAIM] = "CLAIM",
	[AL_F_IDENTITY] = "IDENTITY",
	[AL_F_DISK_GROW] = "DISK_GROW",
	[AL_F_STREAM_EXEC] = "STREAM_EXEC",
	[AL_F_STREAMS] = "STREAMS",
	[AL_F_NETWORK] = "NETWORK",
	[AL_F_PAUSE] = "PAUSE",
	[AL_F_RESUME] = "RESUME",
	[AL_F_SUSPEND] = "SUSPEND",
	[AL_F_SNAPSHOT] = "SNAPSHOT",
	[AL_F_START] = "START",
	[AL_F_GW_CONFIG] = "GW_CONFIG",
	[AL_F_GW_ACK] = "GW_ACK",
	[AL_F_CRED_HELLO] = "CRED_HELLO",
	[AL_F_CRED_SET] = "CRED_SET",
	[AL_F_CRED_SET_ACK] = "CRED_SET_ACK",
	[AL_F_CRED_TAKE] = "CRED_TAKE",
	[AL_F_CRED_GRANT] = "CRED_GRANT",
	[AL_F_CRED_USE] = "CRED_USE",
	[AL_F_CRED_REFRESH] = "CRED_REFRESH",
	[AL_F_CRED_REFRESH_DONE] = "CRED_REFRESH_DONE",
	[AL_F_GW_CREDCHAN_REQ] = "GW_CREDCHAN_REQ",
	[AL_F_GW_CREDCHAN] = "GW_CREDCHAN",
};
/* clang-format on */

static int type_valid(uint16_t type)
{
	return type < AL_F_TYPE_MAX && type_names[type] != NULL;
}

const char *al_frame_type_name(uint16_t type)
{
	return type_valid(type) ? type_names[type] : "UNKNOWN";
}

static void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint16_t get_be16(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* ---- al_buf ---- */

void al_buf_init(al_buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->off = 0;
	b->cap = 0;
	b->max = max != 0 ? max : BUF_DEFAULT_MAX;
}

void al_buf_free(al_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->off = b->cap = 0;
}

size_t al_buf_pending(const al_buf *b)
{
	return b->len - b->off;
}

static size_t buf_max(const al_buf *b)
{
	return b->max != 0 ? b->max : BUF_DEFAULT_MAX;
}

/* Make room for n more bytes at data + len, within max. */
static int buf_reserve(al_buf *b, size_t n, al_err *err)
{
	size_t pending = b->len - b->off;
	if (n > buf_max(b) || pending > buf_max(b) - n)
		return al_err_set(err, AL_ETOOBIG, 0,
				  "buffer limit of %zu bytes reached",
				  buf_max(b));
	if (b->cap - b->len >= n)
		return 0;
	/* Slide the unconsumed bytes to the front before growing: a queue
	 * that is written and drained forever must not grow forever. */
	if (b->off > 0) {
		memmove(b->data, b->data + b->off, pending);
		b->len = pending;
		b->off = 0;
		if (b->cap - b->len >= n)
			return 0;
	}
	size_t want = b->cap != 0 ? b->cap : 4096;
	while (want - b->len < n)
		want *= 2;
	/* max bounds pending bytes, not capacity, but capacity need not
	 * exceed it: the doubling may overshoot, so clamp. */
	if (want > buf_max(b))
		want = buf_max(b);
	uint8_t *p = realloc(b->data, want);
	if (p == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM,
				  "out of memory growing a buffer to %zu",
				  want);
	b->data = p;
	b->cap = want;
	return 0;
}

int al_buf_append(al_buf *b, const void *p, size_t n, al_err *err)
{
	if (n == 0)
		return 0;
	if (buf_reserve(b, n, err) < 0)
		return -1;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

static void buf_consume(al_buf *b, size_t n)
{
	b->off += n;
	if (b->off == b->len)
		b->off = b->len = 0;
}

/* Write to fd without SIGPIPE where the fd is a socket; the channel may
 * also be a character device (virtio-serial), where send() is ENOTSOCK. */
static ssize_t write_nosig(int fd, const struct iovec *iov, int cnt)
{
	struct msghdr mh = {
		.msg_iov = (struct iovec *)iov,
		.msg_iovlen = (size_t)cnt,
	};
	ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	if (n < 0 && errno == ENOTSOCK)
		n = writev(fd, iov, cnt);
	return n;
}

int al_buf_flush(al_buf *b, int fd, al_err *err)
{
	size_t all = SIZE_MAX;
	return al_buf_flush_max(b, fd, &all, err);
}

int al_buf_flush_max(al_buf *b, int fd, size_t *max, al_err *err)
{
	while (b->len > b->off && *max > 0) {
		size_t have = b->len - b->off;
		struct iovec iov = {
			.iov_base = b->data + b->off,
			.iov_len = have < *max ? have : *max,
		};
		ssize_t n = write_nosig(fd, &iov, 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return AL_AGAIN;
			return al_err_sys(err, AL_EUNAVAIL, errno,
					  "write to peer");
		}
		buf_consume(b, (size_t)n);
		*max -= (size_t)n;
	}
	return 0;
}

/* ---- encoding ---- */

static int check_outgoing(uint16_t type, size_t len, al_err *err)
{
	if (!type_valid(type))
		return al_err_set(err, AL_EINVAL, 0,
				  "cannot encode frame of unknown type %u",
				  (unsigned)type);
	if (len > AL_FRAME_MAX_PAYLOAD)
		return al_err_set(err, AL_ETOOBIG, 0,
				  "frame payload of %zu bytes exceeds %u", len,
				  AL_FRAME_MAX_PAYLOAD);
	return 0;
}

static void encode_header(uint8_t *h, uint16_t type, uint32_t id, uint32_t len)
{
	put_be32(h, AL_FRAME_MAGIC);
	put_be16(h + 4, type);
	put_be16(h + 6, 0);
	put_be32(h + 8, id);
	put_be32(h + 12, len);
}

int al_frame_encode(al_buf *out, uint16_t type, uint32_t id,
		    const void *payload, size_t len, al_err *err)
{
	if (check_outgoing(type, len, err) < 0)
		return -1;
	if (len > 0 && payload == NULL)
		return al_err_set(err, AL_EINVAL, 0, "payload is NULL");
	/* Reserve header and payload together so a failure never leaves
	 * half a frame queued, which would desynchronize the stream. */
	if (buf_reserve(out, AL_FRAME_HDR_LEN + len, err) < 0)
		return -1;
	encode_header(out->data + out->len, type, id, (uint32_t)len);
	out->len += AL_FRAME_HDR_LEN;
	if (len > 0)
		memcpy(out->data + out->len, payload, len);
	out->len += len;
	return 0;
}

/* ---- decoding ---- */

void al_frame_reader_init(al_frame_reader *r)
{
	al_buf_init(&r->in, 0);
}

void al_frame_reader_free(al_frame_reader *r)
{
	al_buf_free(&r->in);
}

int al_frame_reader_feed(al_frame_reader *r, const void *p, size_t n,
			 al_err *err)
{
	return al_buf_append(&r->in, p, n, err);
}

int al_frame_reader_fill(al_frame_reader *r, int fd, al_err *err)
{
	if (buf_reserve(&r->in, READ_CHUNK, err) < 0)
		return -1;
	for (;;) {
		ssize_t n = read(fd, r->in.data + r->in.len, READ_CHUNK);
		if (n > 0) {
			r->in.len += (size_t)n;
			return 1;
		}
		if (n == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 1;
		return al_err_sys(err, AL_EUNAVAIL, errno, "read from peer");
	}
}

int al_frame_next(al_frame_reader *r, al_frame *f, al_err *err)
{
	const uint8_t *p = r->in.data + r->in.off;
	size_t avail = al_buf_pending(&r->in);
	uint8_t magic[4];

	f->payload = NULL;
	/* Reject a wrong magic as soon as its first bytes are here, so a
	 * peer speaking something else is cut off without waiting. */
	put_be32(magic, AL_FRAME_MAGIC);
	size_t mlen = avail < sizeof magic ? avail : sizeof magic;
	if (mlen > 0 && memcmp(p, magic, mlen) != 0)
		return al_err_set(err, AL_EPROTO, 0, "bad frame magic");
	if (avail < AL_FRAME_HDR_LEN)
		return 0;

	uint16_t type = get_be16(p + 4);
	uint16_t flags = get_be16(p + 6);
	uint32_t id = get_be32(p + 8);
	uint32_t len = get_be32(p + 12);
	if (flags != 0)
		return al_err_set(err, AL_EPROTO, 0,
				  "frame flags 0x%x are reserved",
				  (unsigned)flags);
	if (len > AL_FRAME_MAX_PAYLOAD)
		return al_err_set(err, AL_EPROTO, 0,
				  "frame payload of %u bytes exceeds %u", len,
				  AL_FRAME_MAX_PAYLOAD);
	if (!type_valid(type))
		return al_err_set(err, AL_EPROTO, 0, "unknown frame type %u",
				  (unsigned)type);
	if (avail - AL_FRAME_HDR_LEN < len)
		return 0;

	uint8_t *payload = malloc((size_t)len + 1);
	if (payload == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM,
				  "out of memory for a %u byte frame", len);
	if (len > 0)
		memcpy(payload, p + AL_FRAME_HDR_LEN, len);
	payload[len] = '\0';
	f->type = type;
	f->flags = flags;
	f->id = id;
	f->len = len;
	f->payload = payload;
	buf_consume(&r->in, AL_FRAME_HDR_LEN + (size_t)len);
	return 1;
}

void al_frame_free(al_frame *f)
{
	free(f->payload);
	f->payload = NULL;
	f->len = 0;
}

/* ---- blocking helpers ---- */

/* Milliseconds poll() may wait before deadline_ms; -1 = forever. */
static int poll_timeout(int64_t deadline_ms)
{
	if (deadline_ms == 0)
		return -1;
	int64_t left = deadline_ms - al_now_ms();
	if (left <= 0)
		return 0;
	return left > 60000 ? 60000 : (int)left;
}

static int wait_fd(int fd, short events, int64_t deadline_ms, al_err *err)
{
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = events};
		int t = poll_timeout(deadline_ms);
		int n = poll(&pfd, 1, t);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return al_err_sys(err, AL_ESYS, errno, "poll");
		}
		if (n > 0)
			return 0;
		if (t == 0 || (deadline_ms != 0 && al_now_ms() >= deadline_ms))
			return al_err_set(err, AL_ETIMEDOUT, 0,
					  "peer did not answer in time");
	}
}

int al_frame_send(int fd, uint16_t type, uint32_t id, const void *payload,
		  size_t len, al_err *err)
{
	return al_frame_send_until(fd, type, id, payload, len, 0, err);
}

int al_frame_send_until(int fd, uint16_t type, uint32_t id, const void *payload,
			size_t len, int64_t deadline_ms, al_err *err)
{
	uint8_t hdr[AL_FRAME_HDR_LEN];

	if (check_outgoing(type, len, err) < 0)
		return -1;
	if (len > 0 && payload == NULL)
		return al_err_set(err, AL_EINVAL, 0, "payload is NULL");
	encode_header(hdr, type, id, (uint32_t)len);

	struct iovec iov[2] = {
		{.iov_base = hdr, .iov_len = sizeof hdr},
		{.iov_base = (void *)payload, .iov_len = len},
	};
	struct iovec *v = iov;
	int cnt = len > 0 ? 2 : 1;
	while (cnt > 0) {
		ssize_t n = write_nosig(fd, v, cnt);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				if (wait_fd(fd, POLLOUT, deadline_ms, err) < 0)
					return -1;
				continue;
			}
			return al_err_sys(err, AL_EUNAVAIL, errno,
					  "sending %s frame",
					  al_frame_type_name(type));
		}
		size_t done = (size_t)n;
		while (cnt > 0 && done >= v->iov_len) {
			done -= v->iov_len;
			v++;
			cnt--;
		}
		if (cnt > 0) {
			v->iov_base = (uint8_t *)v->iov_base + done;
			v->iov_len -= done;
		}
	}
	return 0;
}

int al_frame_recv(int fd, al_frame_reader *r, al_frame *f, int64_t deadline_ms,
		  al_err *err)
{
	for (;;) {
		int rc = al_frame_next(r, f, err);
		if (rc < 0)
			return -1;
		if (rc == 1)
			return 0;
		if (wait_fd(fd, POLLIN, deadline_ms, err) < 0)
			return -1;
		rc = al_frame_reader_fill(r, fd, err);
		if (rc < 0)
			return -1;
		if (rc == 0) {
			if (al_buf_pending(&r->in) == 0)
				return al_err_set(err, AL_EUNAVAIL, 0,
						  "peer closed the channel");
			return al_err_set(err, AL_EPROTO, 0,
					  "peer closed the channel mid-frame");
		}
	}
}

/* ---- payloads ---- */

/* Nesting deeper than any message has costs a hostile peer nothing. */
#define PAYLOAD_DEPTH 16

static char *pack(json_object *o, al_err *err)
{
	char *s = NULL;
	if (o != NULL) {
		const char *t = json_object_to_json_string_ext(
			o, JSON_C_TO_STRING_PLAIN |
				   JSON_C_TO_STRING_NOSLASHESCAPE);
		s = t != NULL ? strdup(t) : NULL;
	}
	json_object_put(o);
	if (s == NULL)
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory packing");
	return s;
}

/* One JSON object and nothing after it, or NULL (err). */
static json_object *unpack(const void *payload, size_t len, const char *what,
			   al_err *err)
{
	json_tokener *tok = json_tokener_new_ex(PAYLOAD_DEPTH);
	if (tok == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		return NULL;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	json_object *o = NULL;
	if (len <= AL_FRAME_MAX_PAYLOAD)
		o = json_tokener_parse_ex(tok, payload, (int)len);
	int ok = o != NULL &&
		 json_tokener_get_error(tok) == json_tokener_success &&
		 json_object_is_type(o, json_type_object);
	for (size_t i = json_tokener_get_parse_end(tok); ok && i < len; i++)
		ok = strchr(" \t\r\n", ((const char *)payload)[i]) != NULL &&
		     ((const char *)payload)[i] != '\0';
	json_tokener_free(tok);
	if (!ok) {
		json_object_put(o);
		al_err_set(err, AL_EINVAL, 0, "%s payload is not a JSON object",
			   what);
		return NULL;
	}
	/* A repeated member could read one way here, another elsewhere. */
	if (al_json_keys_unique(payload, len, 0, err) < 0) {
		json_object_put(o);
		al_err_wrap(err, "%s payload: ", what);
		return NULL;
	}
	return o;
}

/* The string field key of o, NUL-free; NULL when absent (err unset) or
 * of the wrong type (err set). */
static const char *get_str(json_object *o, const char *key, size_t *len,
			   al_err *err)
{
	json_object *v = NULL;
	if (!json_object_object_get_ex(o, key, &v) || v == NULL)
		return NULL;
	const char *s = json_object_get_string(v);
	*len = (size_t)json_object_get_string_len(v);
	if (!json_object_is_type(v, json_type_string) ||
	    memchr(s, '\0', *len) != NULL) {
		al_err_set(err, AL_EINVAL, 0,
			   "field \"%s\" must be a string without NUL", key);
		return NULL;
	}
	return s;
}

/* The absolute "path" of a request into out (outlen with its NUL); -1
 * with e (AL_EINVAL missing or not a string, AL_EPATH relative or too
 * long). */
static int get_path(json_object *o, char *out, size_t outlen, al_err *e)
{
	size_t n = 0;
	const char *path = get_str(o, "path", &n, e);
	if (path == NULL && e->code == AL_OK)
		al_err_set(e, AL_EINVAL, 0, "field \"path\" is required");
	else if (path != NULL && path[0] != '/')
		al_err_set(e, AL_EPATH, 0, "path must be absolute");
	else if (path != NULL && n >= outlen)
		al_err_set(e, AL_EPATH, 0, "path is too long");
	if (e->code != AL_OK)
		return -1;
	memcpy(out, path, n + 1);
	return 0;
}

char *al_file_req_pack(const char *path, int mode, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o != NULL) {
		json_object_object_add(o, "path", json_object_new_string(path));
		if (mode >= 0)
			json_object_object_add(o, "mode",
					       json_object_new_int(mode));
	}
	return pack(o, err);
}

int al_file_req_unpack(const void *payload, size_t len, al_file_req *out,
		       al_err *err)
{
	al_err e = {0};
	json_object *o = unpack(payload, len, "file request", err);
	if (o == NULL)
		return -1;
	json_object *m = NULL;
	int64_t mode = AL_FILE_MODE_DEFAULT;
	if (get_path(o, out->path, sizeof out->path, &e) == 0 &&
	    json_object_object_get_ex(o, "mode", &m) && m != NULL &&
	    (!json_object_is_type(m, json_type_int) ||
	     (mode = json_object_get_int64(m)) < 0 || mode > 07777))
		al_err_set(&e, AL_EINVAL, 0,
			   "field \"mode\" must be an integer, 0 to 07777");
	if (e.code == AL_OK)
		out->mode = (unsigned)mode;
	json_object_put(o);
	if (e.code != AL_OK) {
		*err = e;
		return -1;
	}
	return 0;
}

char *al_disk_grow_pack(const char *path, uint64_t bytes, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o != NULL) {
		json_object_object_add(o, "path", json_object_new_string(path));
		json_object_object_add(o, "bytes",
				       json_object_new_int64((int64_t)bytes));
	}
	return pack(o, err);
}

int al_disk_grow_unpack(const void *payload, size_t len, al_disk_grow *out,
			al_err *err)
{
	al_err e = {0};
	json_object *o = unpack(payload, len, "disk grow request", err);
	if (o == NULL)
		return -1;
	json_object *b = NULL;
	int64_t bytes = 0;
	if (get_path(o, out->path, sizeof out->path, &e) == 0 &&
	    (!json_object_object_get_ex(o, "bytes", &b) ||
	     !json_object_is_type(b, json_type_int) ||
	     (bytes = json_object_get_int64(b)) <= 0))
		al_err_set(&e, AL_EINVAL, 0,
			   "field \"bytes\" must be a positive integer");
	if (e.code == AL_OK)
		out->bytes = (uint64_t)bytes;
	json_object_put(o);
	if (e.code != AL_OK) {
		*err = e;
		return -1;
	}
	return 0;
}

char *al_vm_identity_pack(const al_vm_identity *m, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o != NULL) {
		json_object_object_add(o, "hostname",
				       json_object_new_string(m->hostname));
		json_object_object_add(o, "entropy",
				       json_object_new_string(m->entropy));
		json_object_object_add(o, "time_ms",
				       json_object_new_int64(m->time_ms));
		if (m->mac[0] != '\0')
			json_object_object_add(o, "mac",
					       json_object_new_string(m->mac));
		if (m->net[0] != '\0')
			json_object_object_add(o, "net",
					       json_object_new_string(m->net));
	}
	return pack(o, err);
}

/* String field key of o into out (room outlen with its NUL): 0, or -1
 * with e set (wrong type, too long, or absent when required). */
static int get_str_into(json_object *o, const char *key, int required,
			char *out, size_t outlen, al_err *e)
{
	size_t n = 0;
	const char *v = get_str(o, key, &n, e);
	if (v == NULL && e->code == AL_OK && required)
		al_err_set(e, AL_EINVAL, 0, "field \"%s\" is required", key);
	else if (v != NULL && n >= outlen)
		al_err_set(e, AL_EINVAL, 0, "field \"%s\" is too long", key);
	else if (v != NULL && n == 0)
		al_err_set(e, AL_EINVAL, 0, "field \"%s\" is empty", key);
	if (e->code != AL_OK)
		return -1;
	out[0] = '\0';
	if (v != NULL)
		memcpy(out, v, n + 1);
	return 0;
}

int al_vm_identity_unpack(const void *payload, size_t len, al_vm_identity *out,
			  al_err *err)
{
	static const char *const fields[] = {"hostname", "entropy", "time_ms",
					     "mac", "net"};
	al_err e = {0};
	memset(out, 0, sizeof *out);
	json_object *o = unpack(payload, len, "identity", err);
	if (o == NULL)
		return -1;
	json_object_object_foreach(o, key, val)
	{
		(void)val;
		size_t i = 0;
		while (i < sizeof fields / sizeof *fields &&
		       strcmp(key, fields[i]) != 0)
			i++;
		if (i == sizeof fields / sizeof *fields) {
			al_err_set(&e, AL_EINVAL, 0,
				   "unknown field in IDENTITY");
			break;
		}
	}
	json_object *t = NULL;
	if (e.code == AL_OK &&
	    get_str_into(o, "hostname", 1, out->hostname, sizeof out->hostname,
			 &e) == 0 &&
	    get_str_into(o, "entropy", 1, out->entropy, sizeof out->entropy,
			 &e) == 0 &&
	    get_str_into(o, "mac", 0, out->mac, sizeof out->mac, &e) == 0 &&
	    get_str_into(o, "net", 0, out->net, sizeof out->net, &e) == 0) {
		/* Up to the year 9999: anything later is not a clock. */
		if (!json_object_object_get_ex(o, "time_ms", &t) ||
		    !json_object_is_type(t, json_type_int) ||
		    (out->time_ms = json_object_get_int64(t)) <= 0 ||
		    out->time_ms > 253402300799999LL)
			al_err_set(&e, AL_EINVAL, 0,
				   "time_ms must be unix milliseconds");
	}
	json_object_put(o);
	if (e.code != AL_OK) {
		explicit_bzero(out, sizeof *out);
		*err = e;
		return -1;
	}
	return 0;
}

static json_object *exec_object(const al_exec_msg *m)
{
	json_object *o = json_object_new_object();
	if (o != NULL) {
		json_object_object_add(o, "cmd", json_object_get(m->cmd));
		if (m->env != NULL)
			json_object_object_add(o, "env",
					       json_object_get(m->env));
		if (m->cwd != NULL)
			json_object_object_add(o, "cwd",
					       json_object_new_string(m->cwd));
		if (m->user != NULL)
			json_object_object_add(o, "user",
					       json_object_new_string(m->user));
		if (m->timeout_ms != 0)
			json_object_object_add(
				o, "timeout_ms",
				json_object_new_int64(m->timeout_ms));
		json_object_object_add(o, "stdin",
				       json_object_new_boolean(m->stdin_open));
		if (m->kill_on_exit)
			json_object_object_add(o, "kill_on_exit",
					       json_object_new_boolean(1));
	}
	return o;
}

char *al_exec_pack(const al_exec_msg *m, al_err *err)
{
	return pack(exec_object(m), err);
}

static int nul_free(json_object *s)
{
	return json_object_is_type(s, json_type_string) &&
	       memchr(json_object_get_string(s), '\0',
		      (size_t)json_object_get_string_len(s)) == NULL;
}

static int exec_cmd_check(json_object *cmd, al_err *err)
{
	if (cmd == NULL || !json_object_is_type(cmd, json_type_array))
		return al_err_set(err, AL_EINVAL, 0,
				  "field \"cmd\" must be an array of strings");
	size_t n = json_object_array_length(cmd);
	if (n == 0 || n > AL_EXEC_ARGS_MAX)
		return al_err_set(err, AL_EINVAL, 0,
				  "field \"cmd\" must hold 1 to %d strings",
				  AL_EXEC_ARGS_MAX);
	for (size_t i = 0; i < n; i++)
		if (!nul_free(json_object_array_get_idx(cmd, i)))
			return al_err_set(err, AL_EINVAL, 0,
					  "cmd[%zu] must be a string without "
					  "NUL",
					  i);
	if (json_object_get_string_len(json_object_array_get_idx(cmd, 0)) == 0)
		return al_err_set(err, AL_EINVAL, 0, "cmd[0] is empty");
	return 0;
}

static int exec_env_check(json_object *env, al_err *err)
{
	if (env == NULL)
		return 0;
	if (!json_object_is_type(env, json_type_object))
		return al_err_set(err, AL_EINVAL, 0,
				  "field \"env\" must be an object of "
				  "strings");
	if (json_object_object_length(env) > AL_EXEC_ENV_MAX)
		return al_err_set(err, AL_EINVAL, 0,
				  "field \"env\" holds more than %d variables",
				  AL_EXEC_ENV_MAX);
	json_object_object_foreach(env, k, v)
	{
		/* Names only: values may be secrets. */
		if (k[0] == '\0' || strchr(k, '=') != NULL)
			return al_err_set(err, AL_EINVAL, 0,
					  "env name \"%.200s\" is invalid", k);
		if (!nul_free(v))
			return al_err_set(err, AL_EINVAL, 0,
					  "env \"%.200s\" must be a string "
					  "without NUL",
					  k);
	}
	return 0;
}

/* Fill out from the EXEC object o (borrowed: out points into it). */
static int exec_from(json_object *o, al_exec_msg *out, al_err *err)
{
	al_err e = {0};
	size_t n = 0;
	json_object *v = NULL;
	json_object_object_get_ex(o, "cmd", &out->cmd);
	if (json_object_object_get_ex(o, "env", &v) && v != NULL)
		out->env = v;
	out->cwd = get_str(o, "cwd", &n, &e);
	out->user = get_str(o, "user", &n, &e);
	if (e.code == AL_OK && exec_cmd_check(out->cmd, &e) == 0 &&
	    exec_env_check(out->env, &e) == 0) {
		v = NULL;
		if (json_object_object_get_ex(o, "stdin", &v) && v != NULL &&
		    !json_object_is_type(v, json_type_boolean))
			al_err_set(&e, AL_EINVAL, 0,
				   "field \"stdin\" must be true or false");
		out->stdin_open = v != NULL && json_object_get_boolean(v);
		v = NULL;
		if (json_object_object_get_ex(o, "kill_on_exit", &v) &&
		    v != NULL && !json_object_is_type(v, json_type_boolean))
			al_err_set(&e, AL_EINVAL, 0,
				   "field \"kill_on_exit\" must be true or "
				   "false");
		out->kill_on_exit = v != NULL && json_object_get_boolean(v);
		v = NULL;
		if (json_object_object_get_ex(o, "timeout_ms", &v) &&
		    v != NULL &&
		    (!json_object_is_type(v, json_type_int) ||
		     (out->timeout_ms = json_object_get_int64(v)) < 0 ||
		     out->timeout_ms > AL_EXEC_TIMEOUT_MS_MAX))
			al_err_set(&e, AL_EINVAL, 0,
				   "field \"timeout_ms\" must be an integer, "
				   "0 to %lld",
				   (long long)AL_EXEC_TIMEOUT_MS_MAX);
	}
	if (e.code != AL_OK) {
		*err = e;
		return -1;
	}
	return 0;
}

int al_exec_unpack(const void *payload, size_t len, al_exec_msg *out,
		   al_err *err)
{
	memset(out, 0, sizeof *out);
	json_object *o = unpack(payload, len, "EXEC", err);
	if (o == NULL)
		return -1;
	if (exec_from(o, out, err) < 0) {
		json_object_put(o);
		memset(out, 0, sizeof *out);
		return -1;
	}
	out->root = o;
	return 0;
}

void al_exec_msg_free(al_exec_msg *m)
{
	json_object_put(m->root);
	memset(m, 0, sizeof *m);
}

char *al_file_result_pack(uint64_t bytes, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o != NULL)
		json_object_object_add(o, "bytes",
				       json_object_new_int64((int64_t)bytes));
	return pack(o, err);
}

char *al_error_pack(al_code code, const char *message, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o != NULL) {
		json_object_object_add(
			o, "code", json_object_new_string(al_code_name(code)));
		json_object_object_add(o, "message",
				       json_object_new_string(message));
	}
	return pack(o, err);
}

int al_error_unpack(const void *payload, size_t len, al_err *out, al_err *err)
{
	al_err e = {0};
	json_object *o = unpack(payload, len, "ERROR", err);
	if (o == NULL)
		return -1;
	size_t n = 0;
	const char *code = get_str(o, "code", &n, &e);
	const char *msg = get_str(o, "message", &n, &e);
	if (e.code != AL_OK) {
		json_object_put(o);
		*err = e;
		return -1;
	}
	al_err_set(out, code != NULL ? al_code_from_name(code) : AL_EINTERNAL,
		   0, "%.400s", msg != NULL ? msg : "error in sandbox");
	json_object_put(o);
	return 0;
}

/* ---- EXIT ---- */

static int signal_name_valid(const char *s, size_t n)
{
	if (n < 4 || n >= sizeof((al_exit_msg *)0)->signal ||
	    strncmp(s, "SIG", 3) != 0)
		return 0;
	for (size_t i = 3; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9')))
			return 0;
	return 1;
}

char *al_exit_pack(const al_exit_msg *m, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o != NULL && m->signal[0] != '\0') {
		json_object_object_add(o, "signal",
				       json_object_new_string(m->signal));
		json_object_object_add(o, "timed_out",
				       json_object_new_boolean(m->timed_out));
	} else if (o != NULL) {
		json_object_object_add(o, "exit_code",
				       json_object_new_int(m->exit_code));
	}
	return pack(o, err);
}

int al_exit_unpack(const void *payload, size_t len, al_exit_msg *out,
		   al_err *err)
{
	memset(out, 0, sizeof *out);
	out->exit_code = -1;
	json_object *o = unpack(payload, len, "EXIT", err);
	if (o == NULL)
		return -1;
	al_err e = {0};
	size_t n = 0;
	json_object *code = NULL, *t = NULL;
	const char *sig = get_str(o, "signal", &n, &e);
	int has_code = json_object_object_get_ex(o, "exit_code", &code);
	if (e.code != AL_OK) {
		/* get_str said why */
	} else if (has_code == (sig != NULL)) {
		al_err_set(&e, AL_EINVAL, 0,
			   "EXIT needs one of \"exit_code\" and \"signal\"");
	} else if (has_code) {
		int64_t c = -1;
		if (!json_object_is_type(code, json_type_int) ||
		    (c = json_object_get_int64(code)) < 0 || c > 255)
			al_err_set(&e, AL_EINVAL, 0,
				   "field \"exit_code\" must be 0 to 255");
		else
			out->exit_code = (int)c;
	} else if (!signal_name_valid(sig, n)) {
		al_err_set(&e, AL_EINVAL, 0, "field \"signal\" is malformed");
	} else {
		memcpy(out->signal, sig, n + 1);
		if (json_object_object_get_ex(o, "timed_out", &t) &&
		    t != NULL && !json_object_is_type(t, json_type_boolean))
			al_err_set(&e, AL_EINVAL, 0,
				   "field \"timed_out\" must be true or "
				   "false");
		out->timed_out = t != NULL && json_object_get_boolean(t);
	}
	json_object_put(o);
	if (e.code != AL_OK) {
		memset(out, 0, sizeof *out);
		out->exit_code = -1;
		*err = e;
		return -1;
	}
	return 0;
}

/* ---- streams ---- */

int al_hex_id_valid(const char *s, size_t n)
{
	if (s == NULL || strlen(s) != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

int al_hex_random(char *out, size_t n, al_err *err)
{
	uint8_t rnd[64];
	size_t want = n / 2, got = 0;
	if (n % 2 != 0 || want > sizeof rnd)
		return al_err_set(err, AL_EINVAL, 0, "bad random id length");
	while (got < want) {
		ssize_t k = getrandom(rnd + got, want - got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return al_err_sys(err, AL_ESYS, errno, "getrandom");
		got += (size_t)k;
	}
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < want; i++) {
		out[2 * i] = hex[rnd[i] >> 4];
		out[2 * i + 1] = hex[rnd[i] & 15];
	}
	out[n] = '\0';
	explicit_bzero(rnd, sizeof rnd);
	return 0;
}

char *al_stream_exec_pack(const al_exec_msg *m, const char *lease,
			  int background, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o != NULL) {
		json_object_object_add(o, "exec", exec_object(m));
		json_object_object_add(o, "lease",
				       json_object_new_string(lease));
		json_object_object_add(o, "background",
				       json_object_new_boolean(background));
	}
	return pack(o, err);
}

int al_stream_exec_unpack(const void *payload, size_t len,
			  al_stream_exec_msg *out, al_err *err)
{
	memset(out, 0, sizeof *out);
	json_object *o = unpack(payload, len, "STREAM_EXEC", err);
	if (o == NULL)
		return -1;
	al_err e = {0};
	size_t n = 0;
	json_object *ex = NULL, *bg = NULL;
	const char *lease = get_str(o, "lease", &n, &e);
	if (e.code == AL_OK && !al_hex_id_valid(lease, AL_STREAM_LEASE_LEN))
		al_err_set(&e, AL_EINVAL, 0,
			   "field \"lease\" must be %d lowercase hex digits",
			   AL_STREAM_LEASE_LEN);
	else if (e.code == AL_OK &&
		 json_object_object_get_ex(o, "background", &bg) &&
		 bg != NULL && !json_object_is_type(bg, json_type_boolean))
		al_err_set(&e, AL_EINVAL, 0,
			   "field \"background\" must be true or false");
	else if (e.code == AL_OK &&
		 (!json_object_object_get_ex(o, "exec", &ex) ||
		  !json_object_is_type(ex, json_type_object)))
		al_err_set(&e, AL_EINVAL, 0,
			   "field \"exec\" must be an object");
	else if (e.code == AL_OK)
		exec_from(ex, &out->exec, &e);
	if (e.code != AL_OK) {
		json_object_put(o);
		memset(out, 0, sizeof *out);
		*err = e;
		return -1;
	}
	memcpy(out->lease, lease, AL_STREAM_LEASE_LEN + 1);
	out->background = bg != NULL && json_object_get_boolean(bg);
	out->exec.root = o;
	return 0;
}

void al_stream_exec_free(al_stream_exec_msg *m)
{
	al_exec_msg_free(&m->exec);
	memset(m, 0, sizeof *m);
}

char *al_stream_token_pack(const char *token, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o != NULL)
		json_object_object_add(o, "token",
				       json_object_new_string(token));
	return pack(o, err);
}

int al_stream_token_unpack(const void *payload, size_t len,
			   char out[AL_STREAM_TOKEN_LEN + 1], al_err *err)
{
	json_object *o = unpack(payload, len, "stream token", err);
	if (o == NULL)
		return -1;
	al_err e = {0};
	size_t n = 0;
	const char *t = get_str(o, "token", &n, &e);
	if (e.code == AL_OK && al_hex_id_valid(t, AL_STREAM_TOKEN_LEN))
		memcpy(out, t, AL_STREAM_TOKEN_LEN + 1);
	else if (e.code == AL_OK)
		al_err_set(&e, AL_EINVAL, 0, "stream token is malformed");
	json_object_put(o);
	if (e.code != AL_OK) {
		*err = e;
		return -1;
	}
	return 0;
}

char *al_streams_pack(char (*const lease)[AL_STREAM_LEASE_LEN + 1], size_t n,
		      al_code end, const char *message, al_err *err)
{
	json_object *o = json_object_new_object();
	json_object *a = json_object_new_array();
	if (o == NULL || a == NULL) {
		json_object_put(o);
		json_object_put(a);
		return pack(NULL, err);
	}
	for (size_t i = 0; i < n; i++)
		json_object_array_add(a, json_object_new_string(lease[i]));
	json_object_object_add(o, "leases", a);
	if (end != AL_OK) {
		json_object_object_add(
			o, "end", json_object_new_string(al_code_name(end)));
		json_object_object_add(o, "message",
				       json_object_new_string(message));
	}
	return pack(o, err);
}

int al_streams_unpack(const void *payload, size_t len, al_streams_msg *out,
		      al_err *err)
{
	memset(out, 0, sizeof *out);
	json_object *o = unpack(payload, len, "STREAMS", err);
	if (o == NULL)
		return -1;
	al_err e = {0};
	size_t n = 0;
	json_object *a = NULL;
	if (!json_object_object_get_ex(o, "leases", &a) ||
	    !json_object_is_type(a, json_type_array) ||
	    json_object_array_length(a) > AL_STREAMS_MAX) {
		al_err_set(&e, AL_EINVAL, 0,
			   "field \"leases\" must be an array of at most %d",
			   AL_STREAMS_MAX);
		goto out;
	}
	out->n = json_object_array_length(a);
	out->lease = calloc(out->n + 1, sizeof *out->lease);
	if (out->lease == NULL) {
		al_err_set(&e, AL_ENOMEM, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < out->n; i++) {
		json_object *v = json_object_array_get_idx(a, i);
		const char *s = json_object_is_type(v, json_type_string)
					? json_object_get_string(v)
					: NULL;
		if (!al_hex_id_valid(s, AL_STREAM_LEASE_LEN)) {
			al_err_set(&e, AL_EINVAL, 0, "leases[%zu] is malformed",
				   i);
			goto out;
		}
		memcpy(out->lease[i], s, AL_STREAM_LEASE_LEN + 1);
	}
	const char *end = get_str(o, "end", &n, &e);
	const char *msg = get_str(o, "message", &n, &e);
	if (e.code == AL_OK && end != NULL) {
		out->end = al_code_from_name(end);
		if (out->end == AL_OK)
			out->end = AL_EINTERNAL;
		snprintf(out->message, sizeof out->message, "%s",
			 msg != NULL ? msg : "stream ended");
	}
out:
	json_object_put(o);
	if (e.code != AL_OK) {
		al_streams_msg_free(out);
		*err = e;
		return -1;
	}
	return 0;
}

void al_streams_msg_free(al_streams_msg *m)
{
	free(m->lease);
	memset(m, 0, sizeof *m);
}

/* A snapshot id as al_id_valid (base/config.h, which the agent does not
 * link) takes it: [a-z0-9][a-z0-9-]{0,62}. */
static int snapshot_id_valid(const char *s, size_t n)
{
	if (n == 0 || n > 63 || s[0] == '-')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

/* The boolean field key of o into *out (absent: unchanged); -1 (e) when
 * it is not a boolean. */
static int get_bool(json_object *o, const char *key, int *out, al_err *e)
{
	json_object *v = NULL;
	if (!json_object_object_get_ex(o, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_boolean))
		return al_err_set(e, AL_EINVAL, 0,
				  "field \"%s\" must be true or false", key);
	*out = json_object_get_boolean(v);
	return 0;
}

char *al_suspend_pack(const al_suspend_msg *m, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o != NULL) {
		json_object_object_add(o, "snapshot",
				       json_object_new_string(m->snapshot));
		json_object_object_add(o, "memory",
				       json_object_new_boolean(m->memory));
	}
	return pack(o, err);
}

int al_suspend_unpack(const void *payload, size_t len, al_suspend_msg *out,
		      al_err *err)
{
	memset(out, 0, sizeof *out);
	json_object *o = unpack(payload, len, "SUSPEND", err);
	if (o == NULL)
		return -1;
	al_err e = {0};
	size_t n = 0;
	const char *id = get_str(o, "snapshot", &n, &e);
	if (e.code == AL_OK && (id == NULL || !snapshot_id_valid(id, n)))
		al_err_set(&e, AL_EINVAL, 0,
			   "field \"snapshot\" must be a snapshot id");
	else if (e.code == AL_OK)
		memcpy(out->snapshot, id, n + 1);
	if (e.code == AL_OK)
		(void)get_bool(o, "memory", &out->memory, &e);
	json_object_put(o);
	if (e.code != AL_OK) {
		memset(out, 0, sizeof *out);
		*err = e;
		return -1;
	}
	return 0;
}

char *al_suspend_result_pack(const al_suspend_msg *m, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o != NULL) {
		json_object_object_add(
			o, "bytes", json_object_new_int64((int64_t)m->bytes));
		json_object_object_add(o, "memory",
				       json_object_new_boolean(m->memory));
	}
	return pack(o, err);
}

int al_suspend_result_unpack(const void *payload, size_t len,
			     al_suspend_msg *out, al_err *err)
{
	memset(out, 0, sizeof *out);
	json_object *o = unpack(payload, len, "SUSPEND result", err);
	if (o == NULL)
		return -1;
	al_err e = {0};
	json_object *b = NULL;
	if (!json_object_object_get_ex(o, "bytes", &b) ||
	    !json_object_is_type(b, json_type_int) ||
	    json_object_get_int64(b) < 0)
		al_err_set(&e, AL_EINVAL, 0,
			   "field \"bytes\" must be a count of bytes");
	else
		out->bytes = (uint64_t)json_object_get_int64(b);
	if (e.code == AL_OK)
		(void)get_bool(o, "memory", &out->memory, &e);
	json_object_put(o);
	if (e.code != AL_OK) {
		memset(out, 0, sizeof *out);
		*err = e;
		return -1;
	}
	return 0;
}
