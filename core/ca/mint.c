/* Mint wire messages (strict pack/unpack) and the gateway's client. See
 * mint.h for the format. */
#include "ca/mint.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>

#include "base/cleanup.h"

#define HDR 4 /* magic */

static const unsigned char p256_spki_hdr[26] = {0x30, 0x59, 0x30, 0x13, 0x06,
						0x07, 0x2a, 0x86, 0x48, 0xce,
						0x3d, 0x02, 0x01, 0x06, 0x08,
						0x2a, 0x86, 0x48, 0xce, 0x3d,
						0x03, 0x01, 0x07, 0x03, 0x42,
						0x00};

int al_mint_req_pack(const char *name, EVP_PKEY *pub, unsigned char *out,
		     size_t out_len, al_err *err)
{
	size_t nlen = name != NULL ? strlen(name) : 0;
	if (nlen == 0 || nlen > AL_MINT_NAME_MAX)
		return al_err_set(err, AL_EINVAL, 0, "mint: name length %zu",
				  nlen);
	size_t total = HDR + 1 + nlen + 2 + AL_MINT_SPKI_LEN;
	if (total > out_len)
		return al_err_set(err, AL_ETOOBIG, 0, "mint: request buffer");
	unsigned char *p = out;
	memcpy(p, AL_MINT_MAGIC, HDR);
	p += HDR;
	*p++ = (unsigned char)nlen;
	memcpy(p, name, nlen);
	p += nlen;
	*p++ = 0;
	*p++ = AL_MINT_SPKI_LEN;
	memcpy(p, p256_spki_hdr, sizeof p256_spki_hdr);
	if (al_ca_key_point(pub, p + sizeof p256_spki_hdr, err) < 0)
		return -1;
	return (int)total;
}

size_t al_mint_req_need(const unsigned char *buf, size_t len)
{
	size_t want = HDR + 1;
	if (len < want)
		return want - len;
	want += buf[HDR] + 2u;
	if (len < want)
		return want - len;
	want += ((size_t)buf[want - 2] << 8) | buf[want - 1];
	if (want > AL_MINT_REQ_MAX)
		return 0; /* unpack says it is too big */
	return len < want ? want - len : 0;
}

int al_mint_req_unpack(const unsigned char *buf, size_t len, al_mint_req *req,
		       al_err *err)
{
	if (len > AL_MINT_REQ_MAX)
		return al_err_set(err, AL_ETOOBIG, 0, "mint request too big");
	if (len < HDR + 1 || memcmp(buf, AL_MINT_MAGIC, HDR) != 0)
		return al_err_set(err, AL_EINVAL, 0, "not a mint request");
	size_t off = HDR, nlen = buf[off++];
	if (nlen == 0 || nlen > AL_MINT_NAME_MAX || len - off < nlen + 2)
		return al_err_set(err, AL_EINVAL, 0, "mint request: name");
	if (memchr(buf + off, '\0', nlen) != NULL)
		return al_err_set(err, AL_EINVAL, 0, "mint request: NUL");
	memcpy(req->name, buf + off, nlen);
	req->name[nlen] = '\0';
	off += nlen;
	size_t klen = ((size_t)buf[off] << 8) | buf[off + 1];
	off += 2;
	if (klen != AL_MINT_SPKI_LEN || len - off != klen ||
	    memcmp(buf + off, p256_spki_hdr, sizeof p256_spki_hdr) != 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "mint request: not a P-256 public key");
	if (al_ca_name_check(req->name, err) < 0)
		return -1;
	const unsigned char *point = buf + off + sizeof p256_spki_hdr;
	if (al_ca_point_check(point, AL_CA_POINT_LEN, err) < 0)
		return -1;
	memcpy(req->point, point, AL_CA_POINT_LEN);
	return 0;
}

int al_mint_resp_pack(al_code status, const void *data, size_t data_len,
		      unsigned char *out, size_t out_len, al_err *err)
{
	if ((unsigned)status >= AL_CODE_MAX || data_len > AL_MINT_DATA_MAX)
		return al_err_set(err, AL_EINVAL, 0, "mint response");
	size_t total = HDR + 1 + 2 + data_len;
	if (total > out_len)
		return al_err_set(err, AL_ETOOBIG, 0, "mint response buffer");
	memcpy(out, AL_MINT_MAGIC, HDR);
	out[HDR] = (unsigned char)status;
	out[HDR + 1] = (unsigned char)(data_len >> 8);
	out[HDR + 2] = (unsigned char)data_len;
	if (data_len > 0)
		memcpy(out + HDR + 3, data, data_len);
	return (int)total;
}

int al_mint_resp_unpack(const unsigned char *buf, size_t len, X509 **cert,
			al_err *err)
{
	*cert = NULL;
	if (len < HDR + 3 || memcmp(buf, AL_MINT_MAGIC, HDR) != 0)
		return al_err_set(err, AL_EPROTO, 0, "not a mint response");
	unsigned status = buf[HDR];
	size_t dlen = ((size_t)buf[HDR + 1] << 8) | buf[HDR + 2];
	const unsigned char *d = buf + HDR + 3;
	if (dlen > AL_MINT_DATA_MAX || len - (HDR + 3) != dlen)
		return al_err_set(err, AL_EPROTO, 0, "mint response length");
	if (status != 0) {
		char msg[256];
		size_t n = dlen < sizeof msg - 1 ? dlen : sizeof msg - 1;
		for (size_t i = 0; i < n; i++)
			msg[i] = d[i] >= 0x20 && d[i] < 0x7f ? (char)d[i] : '?';
		msg[n] = '\0';
		return al_err_set(err,
				  status < AL_CODE_MAX ? (al_code)status
						       : AL_EPROTO,
				  0, "mint service: %s", msg);
	}
	const unsigned char *p = d;
	X509 *x = d2i_X509(NULL, &p, (long)dlen);
	if (x == NULL || p != d + dlen) {
		X509_free(x);
		ERR_clear_error();
		return al_err_set(err, AL_EPROTO, 0,
				  "mint response: not one DER certificate");
	}
	*cert = x;
	return 0;
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Wait for ev on fd until deadline; -1 with AL_ETIMEDOUT past it. */
static int wait_fd(int fd, short ev, long long deadline, al_err *err)
{
	for (;;) {
		long long left = deadline - now_ms();
		if (left <= 0)
			return al_err_set(err, AL_ETIMEDOUT, 0,
					  "mint service did not answer in "
					  "time");
		struct pollfd p = {.fd = fd, .events = ev};
		int n = poll(&p, 1, (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return al_err_sys(err, AL_ESYS, errno, "poll");
	}
}

int al_mint_fetch(const char *sock_path, const char *name, EVP_PKEY *pub,
		  int timeout_ms, X509 **cert, al_err *err)
{
	*cert = NULL;
	long long deadline = now_ms() + (timeout_ms > 0
						 ? timeout_ms
						 : AL_MINT_TIMEOUT_MS_DEFAULT);
	unsigned char req[AL_MINT_REQ_MAX];
	int rlen = al_mint_req_pack(name, pub, req, sizeof req, err);
	if (rlen < 0)
		return -1;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(sock_path) >= sizeof sa.sun_path)
		return al_err_set(err, AL_EINVAL, 0, "mint socket path");
	memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
	al_autofd int fd = socket(AF_UNIX,
				  SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
				  0);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		return al_err_sys(err, AL_EUNAVAIL, errno, "connect %s",
				  sock_path);
	for (int off = 0; off < rlen;) {
		if (wait_fd(fd, POLLOUT, deadline, err) < 0)
			return -1;
		ssize_t w = send(fd, req + off, (size_t)(rlen - off),
				 MSG_NOSIGNAL);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (w <= 0)
			return al_err_sys(err, AL_EUNAVAIL, errno,
					  "send to the mint service");
		off += (int)w;
	}
	shutdown(fd, SHUT_WR); /* the whole request */
	unsigned char resp[AL_MINT_RESP_MAX];
	size_t got = 0;
	for (;;) {
		if (wait_fd(fd, POLLIN, deadline, err) < 0)
			return -1;
		ssize_t r = recv(fd, resp + got, sizeof resp - got, 0);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r < 0)
			return al_err_sys(err, AL_EUNAVAIL, errno,
					  "recv from the mint service");
		if (r == 0)
			break;
		got += (size_t)r;
		if (got == sizeof resp)
			return al_err_set(err, AL_EPROTO, 0,
					  "mint response too big");
	}
	return al_mint_resp_unpack(resp, got, cert, err);
}
