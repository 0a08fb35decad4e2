/* gw/dnsserv: the guest's DNS server (UDP and TCP) on libevent. Each TCP
 * connection owns two fixed buffers (one query in, one answer out), so a
 * connection costs about 1 KiB whatever its peer does. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "gw/dns.h"
#include "gw/dnsserv.h"

/* Datagrams read per wakeup: others wait for the next turn of the loop,
 * so a flood cannot starve the gateway's other work. */
#define UDP_BATCH 32

typedef struct tcp_conn tcp_conn;

struct tcp_conn {
	al_dnsserv *s;
	int fd;
	struct event *rd, *wr, *idle;
	uint8_t in[AL_DNS_TCP_PREFIX + AL_DNS_QUERY_MAX];
	size_t in_len;
	uint8_t out[AL_DNS_TCP_PREFIX + AL_DNS_ANSWER_MAX];
	size_t out_len, out_off;
	tcp_conn *prev, *next;
};

struct al_dnsserv {
	struct event_base *base;
	al_dnsserv_config cfg;
	struct event *udp_ev, *tcp_ev;
	struct event *accept_pause; /* re-arms tcp_ev after EMFILE & co */
	tcp_conn *conns;
	size_t n_conns;
};

static int set_nonblock(int fd, al_err *err)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return al_err_sys(err, AL_ESYS, errno,
				  "dnsserv: fcntl(%d, O_NONBLOCK)", fd);
	return 0;
}

static bool from_guest(const al_dnsserv *s, const struct sockaddr_storage *ss)
{
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
	return ss->ss_family == AF_INET &&
	       ntohl(s4->sin_addr.s_addr) == s->cfg.guest;
}

static void log_event(al_dnsserv *s, const al_dns_query *q, bool tcp,
		      bool allow, int rcode, const char *reason, uint32_t addr)
{
	if (s->cfg.log == NULL)
		return;
	al_dnsserv_event ev = {
		.name = q->name,
		.qtype = q->qtype,
		.tcp = tcp,
		.allow = allow,
		.rcode = rcode,
		.reason = reason,
		.addr = addr,
	};
	s->cfg.log(s->cfg.arg, &ev);
}

int al_dnsserv_handle(al_dnsserv *s, const uint8_t *msg, size_t len, bool tcp,
		      uint8_t *out, size_t cap, size_t *out_len, al_err *err)
{
	al_dns_query q;
	al_err perr;
	al_err_clear(&perr);
	*out_len = 0;
	enum al_dns_verdict v = al_dns_query_parse(msg, len, &q, &perr);
	if (v == AL_DNS_DROP) {
		log_event(s, &q, tcp, false, -1, perr.msg, 0);
		return 0;
	}
	enum al_dns_rcode rcode = q.rcode;
	const char *reason = perr.msg;
	al_dnsserv_decision d = {0};
	uint32_t addr = 0;
	bool with_addr = false;
	if (v == AL_DNS_ASK) {
		s->cfg.decide(s->cfg.arg, q.name, &d);
		d.reason[sizeof d.reason - 1] = '\0';
		reason = d.reason;
		rcode = AL_DNS_NOERROR;
		if (!d.allow) {
			rcode = AL_DNS_NXDOMAIN;
		} else if (q.qtype == AL_DNS_T_A) {
			if (al_fakeip_get(s->cfg.map, q.name, &addr, &perr) ==
			    0) {
				with_addr = true;
			} else {
				/* Full map: known names still answer. */
				rcode = AL_DNS_SERVFAIL;
				reason = perr.msg;
				d.allow = false;
			}
		}
	}
	if (al_dns_answer(&q, rcode, with_addr ? &addr : NULL, out, cap,
			  out_len, err) != 0)
		return -1;
	log_event(s, &q, tcp, v == AL_DNS_ASK && d.allow, (int)rcode, reason,
		  with_addr ? addr : 0);
	return 0;
}

/* ---- UDP ---- */

static void on_udp(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	al_dnsserv *s = arg;
	for (int i = 0; i < UDP_BATCH; i++) {
		uint8_t msg[AL_DNS_QUERY_MAX + 1];
		struct sockaddr_storage from;
		socklen_t fl = sizeof from;
		ssize_t n = recvfrom(fd, msg, sizeof msg, MSG_DONTWAIT,
				     (struct sockaddr *)&from, &fl);
		if (n < 0)
			return; /* EAGAIN, or an error we cannot act on */
		if (!from_guest(s, &from))
			continue;
		uint8_t ans[AL_DNS_ANSWER_MAX];
		size_t alen;
		/* A datagram longer than the buffer arrives cut at
		 * AL_DNS_QUERY_MAX + 1 bytes: the parser refuses it. */
		if (al_dnsserv_handle(s, msg, (size_t)n, false, ans, sizeof ans,
				      &alen, NULL) != 0 ||
		    alen == 0)
			continue;
		/* Best effort, like any UDP server: a full socket buffer
		 * drops the answer and the client asks again. */
		(void)sendto(fd, ans, alen, MSG_DONTWAIT,
			     (struct sockaddr *)&from, fl);
	}
}

/* ---- TCP ---- */

static void conn_close(tcp_conn *c)
{
	al_dnsserv *s = c->s;
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	s->n_conns--;
	if (c->rd != NULL)
		event_free(c->rd);
	if (c->wr != NULL)
		event_free(c->wr);
	if (c->idle != NULL)
		event_free(c->idle);
	close(c->fd);
	free(c);
}

static void arm_idle(tcp_conn *c)
{
	unsigned ms = c->s->cfg.tcp_idle_ms;
	const struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	event_add(c->idle, &tv);
}

/* Write what is pending; 0 done, 1 more to write, -1 closed. */
static int conn_flush(tcp_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t w = send(c->fd, c->out + c->out_off,
				 c->out_len - c->out_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 1;
		if (w <= 0) {
			conn_close(c);
			return -1;
		}
		c->out_off += (size_t)w;
	}
	c->out_len = c->out_off = 0;
	return 0;
}

/* A complete query is in c->in: answer it. 0 go on reading, 1 wait for
 * the answer to drain, -1 closed. */
static int conn_answer(tcp_conn *c)
{
	size_t len = c->in_len - AL_DNS_TCP_PREFIX, alen;
	c->in_len = 0;
	if (al_dnsserv_handle(c->s, c->in + AL_DNS_TCP_PREFIX, len, true,
			      c->out + AL_DNS_TCP_PREFIX, AL_DNS_ANSWER_MAX,
			      &alen, NULL) != 0 ||
	    alen == 0) {
		/* Nothing to say to this one (a response, a runt): a TCP
		 * client waits, so hang up rather than leave it. */
		conn_close(c);
		return -1;
	}
	al_dns_tcp_prefix(alen, c->out);
	c->out_len = AL_DNS_TCP_PREFIX + alen;
	c->out_off = 0;
	arm_idle(c);
	int rc = conn_flush(c);
	if (rc == 1) {
		event_del(c->rd);
		event_add(c->wr, NULL);
	}
	return rc;
}

static void on_conn_read(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	tcp_conn *c = arg;
	for (;;) {
		size_t need = AL_DNS_TCP_PREFIX;
		if (c->in_len >= AL_DNS_TCP_PREFIX)
			need += al_dns_tcp_len(c->in);
		ssize_t n = recv(fd, c->in + c->in_len, need - c->in_len,
				 MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			conn_close(c);
			return;
		}
		c->in_len += (size_t)n;
		if (c->in_len == AL_DNS_TCP_PREFIX) {
			size_t ml = al_dns_tcp_len(c->in);
			if (ml == 0 || ml > AL_DNS_QUERY_MAX) {
				conn_close(c);
				return;
			}
			continue;
		}
		if (c->in_len < need)
			continue;
		if (conn_answer(c) != 0)
			return; /* closed, or waiting for the write */
	}
}

static void on_conn_write(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	tcp_conn *c = arg;
	int rc = conn_flush(c);
	if (rc == 0) {
		event_del(c->wr);
		event_add(c->rd, NULL);
	}
}

static void on_conn_idle(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_close(arg);
}

static void on_accept_pause(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	al_dnsserv *s = arg;
	event_add(s->tcp_ev, NULL);
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
	(void)what;
	al_dnsserv *s = arg;
	for (int i = 0; i < UDP_BATCH; i++) {
		struct sockaddr_storage from;
		socklen_t fl = sizeof from;
		int fd = accept4(lfd, (struct sockaddr *)&from, &fl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM) {
				/* The listener stays readable: pause it
				 * rather than spin. */
				const struct timeval tv = {0, 100000};
				event_del(s->tcp_ev);
				event_add(s->accept_pause, &tv);
			}
			return;
		}
		if (!from_guest(s, &from) || s->n_conns >= s->cfg.max_tcp) {
			close(fd);
			continue;
		}
		tcp_conn *c = calloc(1, sizeof *c);
		if (c == NULL) {
			close(fd);
			continue;
		}
		c->s = s;
		c->fd = fd;
		c->next = s->conns;
		if (s->conns != NULL)
			s->conns->prev = c;
		s->conns = c;
		s->n_conns++;
		c->rd = event_new(s->base, fd, EV_READ | EV_PERSIST,
				  on_conn_read, c);
		c->wr = event_new(s->base, fd, EV_WRITE | EV_PERSIST,
				  on_conn_write, c);
		c->idle = evtimer_new(s->base, on_conn_idle, c);
		if (c->rd == NULL || c->wr == NULL || c->idle == NULL) {
			conn_close(c);
			continue;
		}
		event_add(c->rd, NULL);
		arm_idle(c);
	}
}

al_dnsserv *al_dnsserv_new(struct event_base *base,
			   const al_dnsserv_config *cfg, al_err *err)
{
	if (base == NULL || cfg == NULL || cfg->map == NULL ||
	    cfg->decide == NULL) {
		al_err_set(err, AL_EINVAL, 0,
			   "dnsserv: no event base, map or decide callback");
		return NULL;
	}
	al_dnsserv *s = calloc(1, sizeof *s);
	if (s == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "dnsserv: out of memory");
		return NULL;
	}
	s->base = base;
	s->cfg = *cfg;
	if (s->cfg.max_tcp == 0)
		s->cfg.max_tcp = AL_DNSSERV_TCP_MAX_DEFAULT;
	if (s->cfg.tcp_idle_ms == 0)
		s->cfg.tcp_idle_ms = AL_DNSSERV_TCP_IDLE_MS_DEFAULT;
	if (cfg->udp_fd >= 0) {
		if (set_nonblock(cfg->udp_fd, err) != 0)
			goto fail;
		s->udp_ev = event_new(base, cfg->udp_fd, EV_READ | EV_PERSIST,
				      on_udp, s);
		if (s->udp_ev == NULL || event_add(s->udp_ev, NULL) != 0) {
			al_err_set(err, AL_ENOMEM, 0, "dnsserv: udp event");
			goto fail;
		}
	}
	if (cfg->tcp_fd >= 0) {
		if (set_nonblock(cfg->tcp_fd, err) != 0)
			goto fail;
		s->tcp_ev = event_new(base, cfg->tcp_fd, EV_READ | EV_PERSIST,
				      on_accept, s);
		s->accept_pause = evtimer_new(base, on_accept_pause, s);
		if (s->tcp_ev == NULL || s->accept_pause == NULL ||
		    event_add(s->tcp_ev, NULL) != 0) {
			al_err_set(err, AL_ENOMEM, 0, "dnsserv: tcp event");
			goto fail;
		}
	}
	return s;
fail:
	al_dnsserv_free(s);
	return NULL;
}

void al_dnsserv_free(al_dnsserv *s)
{
	if (s == NULL)
		return;
	while (s->conns != NULL)
		conn_close(s->conns);
	if (s->udp_ev != NULL)
		event_free(s->udp_ev);
	if (s->tcp_ev != NULL)
		event_free(s->tcp_ev);
	if (s->accept_pause != NULL)
		event_free(s->accept_pause);
	free(s);
}

size_t al_dnsserv_tcp_count(const al_dnsserv *s)
{
	return s->n_conns;
}
