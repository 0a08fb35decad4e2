/* gw/dnsserv: the gateway's DNS server for its guest, on a UDP socket and
 * a TCP listener (the gateway's fds 3 and 4), on the caller's event_base.
 *
 * Each query is parsed by gw/dns, the name put to the decide callback
 * (the gateway's policy, protocol AL_EGRESS_DNS), answered from the
 * sandbox's gw/fakeip map (see gw/dns.h for what each type gets), and
 * reported to the log callback (allowed or not, with the reason). The
 * server never forwards a query anywhere. Bounds: queries of at most
 * AL_DNS_QUERY_MAX bytes; UDP datagrams from any address but the guest's
 * are ignored, answers go to the querier only; at most max_tcp TCP
 * connections (more are closed at once), each from the guest's address,
 * closed after tcp_idle_ms without a complete query, and with at most
 * one answer pending (a client that does not read is not queued for). */
#ifndef AL_GW_DNSSERV_H
#define AL_GW_DNSSERV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "gw/fakeip.h"

struct event_base;

#define AL_DNSSERV_TCP_MAX_DEFAULT 16
#define AL_DNSSERV_TCP_IDLE_MS_DEFAULT 10000
#define AL_DNSSERV_REASON_MAX 128

typedef struct al_dnsserv al_dnsserv;

typedef struct al_dnsserv_decision {
	bool allow;
	char reason[AL_DNSSERV_REASON_MAX]; /* printable, NUL-terminated */
} al_dnsserv_decision;

/* May name (canonical) be resolved? Fill out (it starts as deny with an
 * empty reason). */
typedef void (*al_dnsserv_decide_fn)(void *arg, const char *name,
				     al_dnsserv_decision *out);

typedef struct al_dnsserv_event {
	/* Canonical when the query was decided, else a printable rendering
	 * of what came (gw/dns), possibly "". */
	const char *name;
	uint16_t qtype;
	bool tcp;
	bool allow;	    /* the name was allowed (an A got an address) */
	int rcode;	    /* what the guest got (enum al_dns_rcode); -1: no
		    * answer at all (a response, a runt: gw/dns DROP) */
	const char *reason; /* the decision's, or why it was not asked */
	uint32_t addr;	    /* the synthetic address answered, or 0 */
} al_dnsserv_event;

/* One line of the egress log per query, answered or dropped. */
typedef void (*al_dnsserv_log_fn)(void *arg, const al_dnsserv_event *ev);

typedef struct al_dnsserv_config {
	int udp_fd;	/* bound UDP socket, or -1; not owned (not closed) */
	int tcp_fd;	/* listening TCP socket, or -1; not owned */
	uint32_t guest; /* the guest's IPv4 address, host order */
	al_fakeip *map; /* not owned; must outlive the server */
	al_dnsserv_decide_fn decide;
	al_dnsserv_log_fn log; /* may be NULL */
	void *arg;	       /* for decide and log */
	unsigned max_tcp;      /* 0: AL_DNSSERV_TCP_MAX_DEFAULT */
	unsigned tcp_idle_ms;  /* 0: AL_DNSSERV_TCP_IDLE_MS_DEFAULT */
} al_dnsserv_config;

/* Serve on cfg's fds (made non-blocking here). NULL and AL_EINVAL /
 * AL_ENOMEM / AL_ESYS. */
al_dnsserv *al_dnsserv_new(struct event_base *base,
			   const al_dnsserv_config *cfg, al_err *err);
/* Stop serving: closes the TCP connections it accepted, not cfg's fds. */
void al_dnsserv_free(al_dnsserv *s);

/* Open TCP connections now (for tests and metrics). */
size_t al_dnsserv_tcp_count(const al_dnsserv *s);

/* Answer one query message (no TCP prefix) as the server would, without
 * sockets: the core of both transports, exposed for the fuzz target and
 * tests. 0 and *len (0: no answer); -1 on a bug. */
int al_dnsserv_handle(al_dnsserv *s, const uint8_t *msg, size_t len, bool tcp,
		      uint8_t *out, size_t cap, size_t *out_len, al_err *err);

#endif
