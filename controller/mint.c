/* The mint service: one thread, one poll loop over the listener and at
 * most AL_MINTD_CONNS open requests. See mint.h. */
#include "mint.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "base/config.h"
#include "base/log.h"
#include "base/ratebucket.h"
#include "ca/leafcache.h"
#include "ca/mint.h"
#include "host/uidrange.h"
#include "proto/agentproto.h"

/* Bucket index of a peer: its gateway slot, ROOT_SLOT for root, and
 * DENIED_SLOT shared by every other uid (read, then refused: so that
 * such a peer learns why instead of a broken pipe, and all of them
 * together hold at most AL_MINTD_PER_UID connections). */
#define ROOT_SLOT AL_UIDRANGE_GW_COUNT
#define DENIED_SLOT (AL_UIDRANGE_GW_COUNT + 1)
#define LOG_EVERY_MS 60000

typedef struct bucket {
	al_ratebucket rb;
	int64_t logged_ms;    /* last "rate limited" line */
	unsigned long denied; /* since that line */
} bucket;

typedef struct conn {
	int fd;
	uint32_t slot;
	uid_t uid;
	int64_t deadline;
	size_t len;
	unsigned char buf[AL_MINT_REQ_MAX];
} conn;

struct al_mintd {
	pthread_t thread;
	int lfd, wake[2];
	al_ca *ca;
	al_leafcache *cache;
	bucket *buckets; /* DENIED_SLOT + 1 */
	conn conns[AL_MINTD_CONNS];
	size_t nconns;
	unsigned long minted, cached, refused;
	char path[AL_PATH_MAX + 32];
};

/* The peer's bucket slot, DENIED_SLOT when the peer may not ask. */
static uint32_t peer_slot(int fd, uid_t *uid)
{
	struct ucred cr;
	socklen_t len = sizeof cr;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return DENIED_SLOT;
	*uid = cr.uid;
	if (cr.uid == 0)
		return ROOT_SLOT;
	if (cr.uid >= AL_UIDRANGE_GW_BASE &&
	    cr.uid - AL_UIDRANGE_GW_BASE < AL_UIDRANGE_GW_COUNT)
		return cr.uid - AL_UIDRANGE_GW_BASE;
	return DENIED_SLOT;
}

/* Take one token from the slot's bucket; 0 when it had none. */
static int charge(al_mintd *m, uint32_t slot)
{
	bucket *b = &m->buckets[slot];
	int64_t now = al_now_ms();
	if (al_ratebucket_take(&b->rb, AL_MINTD_BURST, AL_MINTD_RATE, now,
			       NULL))
		return 1;
	b->denied++;
	if (now - b->logged_ms >= LOG_EVERY_MS) {
		al_warn("mint: gateway uid %u over its rate (%d/s): %lu "
			"request(s) refused",
			slot == ROOT_SLOT ? 0u : AL_UIDRANGE_GW_BASE + slot,
			AL_MINTD_RATE, b->denied);
		b->logged_ms = now;
		b->denied = 0;
	}
	return 0;
}

static void reply(int fd, al_code status, const void *data, size_t len)
{
	unsigned char out[AL_MINT_RESP_MAX];
	int n = al_mint_resp_pack(status, data, len, out, sizeof out, NULL);
	if (n > 0)
		(void)send(fd, out, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void reply_err(int fd, const al_err *err)
{
	reply(fd, err->code != AL_OK ? err->code : AL_EINTERNAL, err->msg,
	      strlen(err->msg));
}

/* Cache key: the name and the SHA-256 of the key's DER. */
static void cache_key(const al_mint_req *r, char *out, size_t outlen)
{
	unsigned char h[SHA256_DIGEST_LENGTH];
	SHA256(r->point, sizeof r->point, h);
	int n = snprintf(out, outlen, "%s|", r->name);
	for (size_t i = 0; i < 16 && n > 0 && (size_t)n + 2 < outlen; i++)
		n += snprintf(out + n, outlen - (size_t)n, "%02x", h[i]);
}

static void serve(al_mintd *m, conn *c)
{
	al_err err = {0};
	al_mint_req req;
	if (c->slot == DENIED_SLOT) {
		m->refused++;
		al_err_set(&err, AL_EPERM, 0,
			   "mint: uid %u may not ask for leaves",
			   (unsigned)c->uid);
		reply_err(c->fd, &err);
		return;
	}
	if (!charge(m, c->slot)) {
		m->refused++;
		al_err_set(&err, AL_EQUOTA, 0, "mint: rate limit");
		reply_err(c->fd, &err);
		return;
	}
	if (al_mint_req_unpack(c->buf, c->len, &req, &err) < 0) {
		m->refused++;
		reply_err(c->fd, &err);
		return;
	}
	char key[AL_LEAFCACHE_KEY_MAX];
	cache_key(&req, key, sizeof key);
	X509 *x = al_leafcache_get(m->cache, key);
	if (x != NULL) {
		m->cached++;
	} else {
		x = al_ca_mint_point(m->ca, req.name, req.point, &err);
		if (x == NULL || al_leafcache_put(m->cache, key, x, &err) < 0) {
			X509_free(x);
			reply_err(c->fd, &err);
			return;
		}
		m->minted++;
	}
	unsigned char *der = NULL;
	int n = i2d_X509(x, &der);
	X509_free(x);
	if (n <= 0 || n > AL_MINT_DATA_MAX) {
		OPENSSL_free(der);
		al_err_set(&err, AL_EINTERNAL, 0, "mint: encoding the leaf");
		reply_err(c->fd, &err);
		return;
	}
	reply(c->fd, AL_OK, der, (size_t)n);
	OPENSSL_free(der);
}

static void conn_close(al_mintd *m, size_t i)
{
	close(m->conns[i].fd);
	m->conns[i] = m->conns[--m->nconns];
}

static size_t open_for(const al_mintd *m, uint32_t slot)
{
	size_t n = 0;
	for (size_t i = 0; i < m->nconns; i++)
		n += m->conns[i].slot == slot;
	return n;
}

static void accept_one(al_mintd *m)
{
	int fd = accept4(m->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	uid_t uid = (uid_t)-1;
	uint32_t slot = peer_slot(fd, &uid);
	if (open_for(m, slot) >= AL_MINTD_PER_UID) {
		al_err err = {0};
		al_err_set(&err, AL_EQUOTA, 0, "mint: too many requests open");
		reply_err(fd, &err);
		close(fd);
		m->refused++;
		return;
	}
	conn *c = &m->conns[m->nconns++];
	c->fd = fd;
	c->slot = slot;
	c->uid = uid;
	c->len = 0;
	c->deadline = al_now_ms() + AL_MINTD_DEADLINE_MS;
}

/* Read what is there; 1 when the connection is done (served or dead). */
static int read_conn(al_mintd *m, conn *c)
{
	for (;;) {
		size_t need = al_mint_req_need(c->buf, c->len);
		if (need == 0 || c->len == sizeof c->buf) {
			serve(m, c);
			return 1;
		}
		if (need > sizeof c->buf - c->len)
			need = sizeof c->buf - c->len;
		ssize_t r = recv(c->fd, c->buf + c->len, need, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return 0;
		if (r == 0 && c->len > 0) {
			serve(m, c); /* says what is wrong with it */
			return 1;
		}
		if (r <= 0)
			return 1;
		c->len += (size_t)r;
	}
}

static void *loop(void *arg)
{
	al_mintd *m = arg;
	struct pollfd p[AL_MINTD_CONNS + 2];
	for (;;) {
		int64_t now = al_now_ms(), next = now + 1000;
		for (size_t i = 0; i < m->nconns;) {
			if (m->conns[i].deadline <= now) {
				conn_close(m, i);
				continue;
			}
			if (m->conns[i].deadline < next)
				next = m->conns[i].deadline;
			i++;
		}
		p[0] = (struct pollfd){.fd = m->wake[0], .events = POLLIN};
		/* Full: leave new peers in the backlog. */
		p[1] = (struct pollfd){.fd = m->nconns < AL_MINTD_CONNS ? m->lfd
									: -1,
				       .events = POLLIN};
		for (size_t i = 0; i < m->nconns; i++)
			p[2 + i] = (struct pollfd){.fd = m->conns[i].fd,
						   .events = POLLIN};
		size_t polled = m->nconns;
		int n = poll(p, 2 + polled, (int)(next - now));
		if (n < 0 && errno != EINTR) {
			al_error("mint: poll: %s", strerror(errno));
			return NULL;
		}
		if (n <= 0)
			continue;
		if (p[0].revents != 0)
			return NULL;
		/* Back to front: conn_close moves the last one into i. */
		for (size_t i = polled; i-- > 0;)
			if (p[2 + i].revents != 0 && read_conn(m, &m->conns[i]))
				conn_close(m, i);
		if (p[1].revents & POLLIN)
			accept_one(m);
	}
}

al_mintd *ctl_mintd_start(const char *state_dir, al_ca *ca, al_err *err)
{
	al_mintd *m = calloc(1, sizeof *m);
	if (m == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		return NULL;
	}
	m->lfd = m->wake[0] = m->wake[1] = -1;
	m->ca = ca;
	snprintf(m->path, sizeof m->path, "%s/%s", state_dir, AL_MINT_SOCK);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(m->path) >= sizeof sa.sun_path) {
		al_err_set(err, AL_EINVAL, 0, "mint socket path too long: %s",
			   m->path);
		goto fail;
	}
	memcpy(sa.sun_path, m->path, strlen(m->path) + 1);
	m->buckets = calloc(DENIED_SLOT + 1, sizeof *m->buckets);
	if (m->buckets == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		goto fail;
	}
	if ((m->cache = al_leafcache_new(AL_MINTD_CACHE, err)) == NULL)
		goto fail;
	if (pipe2(m->wake, O_CLOEXEC) < 0) {
		al_err_sys(err, AL_ESYS, errno, "pipe");
		goto fail;
	}
	m->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (m->lfd < 0) {
		al_err_sys(err, AL_ESYS, errno, "socket");
		goto fail;
	}
	unlink(m->path);
	/* Gateways run as their own uids: anyone may connect, SO_PEERCRED
	 * decides (peer_slot). */
	if (bind(m->lfd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    chmod(m->path, 0666) < 0 || listen(m->lfd, 256) < 0) {
		al_err_sys(err, AL_ESYS, errno, "listen on %s", m->path);
		goto fail;
	}
	int rc = pthread_create(&m->thread, NULL, loop, m);
	if (rc != 0) {
		al_err_sys(err, AL_ESYS, rc, "mint thread");
		unlink(m->path);
		goto fail;
	}
	return m;
fail:
	if (m->lfd >= 0)
		close(m->lfd);
	if (m->wake[0] >= 0)
		close(m->wake[0]), close(m->wake[1]);
	al_leafcache_free(m->cache);
	free(m->buckets);
	free(m);
	return NULL;
}

void ctl_mintd_stop(al_mintd *m)
{
	if (m == NULL)
		return;
	(void)!write(m->wake[1], "x", 1);
	pthread_join(m->thread, NULL);
	while (m->nconns > 0)
		conn_close(m, 0);
	close(m->lfd);
	close(m->wake[0]);
	close(m->wake[1]);
	unlink(m->path);
	al_info("mint: stopped (%lu minted, %lu from cache, %lu refused)",
		m->minted, m->cached, m->refused);
	al_leafcache_free(m->cache);
	free(m->buckets);
	free(m);
}
