/* gw/resolve: the gateway's own upstream resolver (libevent's evdns on
 * the caller's event_base).
 *
 * The gateway never trusts an address the guest chose: for a connection
 * to a synthetic address it resolves the mapped name itself, here, and
 * dials the first address al_upaddr allows. Where names come from:
 *   1. AIRLOCK_UPSTREAM_HOSTS, a hosts-format file ("IP name..." lines,
 *      '#' comments), when set: a name in it is answered from it only;
 *   2. the nameserver AIRLOCK_UPSTREAM_DNS ("IP:PORT", IPv4 or
 *      "[IPv6]:PORT") when set, else the nameservers of /etc/resolv.conf
 *      (only them: its search list and the host's /etc/hosts are not
 *      used, a name is always absolute).
 * Both A and AAAA records are asked for; IPv4 addresses come first (in
 * the upstream's order), then IPv6 ones (a host without an IPv6 route
 * still reaches a name that has both), each classified the same way by
 * al_upaddr (IPv6: loopback, link-local, ULA, mapped and embedded IPv4
 * forms, NAT64, ... refused unless AIRLOCK_UPSTREAM_ALLOW_CIDRS allows).
 * The guest's side stays IPv4 only (gw/dnsserv answers its AAAA with no
 * data). Lookups are bounded: at most max_inflight at once (past it a lookup
 * fails at once with AL_EQUOTA), each answered within about timeout_ms
 * (evdns retries included). evdns's own messages go to al_log.
 */
#ifndef AL_GW_RESOLVE_H
#define AL_GW_RESOLVE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "gw/upaddr.h"

#include <sys/socket.h>

struct event_base;

#define AL_RESOLVE_ADDRS_MAX 16
#define AL_RESOLVE_INFLIGHT_DEFAULT 64
#define AL_RESOLVE_TIMEOUT_MS_DEFAULT 5000

typedef struct al_resolver al_resolver;
typedef struct al_resolve_req al_resolve_req;

typedef struct al_resolver_config {
	const char *upstream_dns;  /* "IP:PORT", NULL or "": resolv.conf */
	const char *hosts;	   /* path of a hosts file, NULL or "": none */
	const char *resolv_conf;   /* NULL: /etc/resolv.conf */
	const al_upaddr *classify; /* not owned; must outlive the resolver */
	unsigned max_inflight;	   /* 0: AL_RESOLVE_INFLIGHT_DEFAULT */
	unsigned timeout_ms;	   /* 0: AL_RESOLVE_TIMEOUT_MS_DEFAULT */
} al_resolver_config;

typedef struct al_resolve_addr {
	int family;	   /* AF_INET or AF_INET6 */
	uint32_t addr;	   /* AF_INET: the address, host order */
	uint8_t addr6[16]; /* AF_INET6: the address */
	const char *deny;  /* NULL: may be dialled; else al_upaddr's reason */
} al_resolve_addr;

/* a with port as a sockaddr for connect(): its length. */
socklen_t al_resolve_addr_sockaddr(const al_resolve_addr *a, unsigned port,
				   struct sockaddr_storage *out);

typedef struct al_resolve_result {
	/* 0: n addresses (n >= 1: IPv4 then IPv6, each in the upstream's
	 * order); else the error code: AL_ENOENT (no such name, or neither
	 * an A nor an AAAA record), AL_ETIMEDOUT,
	 * AL_EUNAVAIL (the upstream failed), AL_EQUOTA (too many lookups
	 * at once). */
	int status;
	const char *error; /* a short text for the log when status != 0 */
	size_t n;
	al_resolve_addr addrs[AL_RESOLVE_ADDRS_MAX];
	/* The first address that may be dialled, or NULL (then every one
	 * is denied: the gateway refuses, logging addrs[0].deny). */
	const al_resolve_addr *first_allowed;
} al_resolve_result;

/* Called once per lookup, always from the event loop (never inside
 * al_resolve), unless the lookup was cancelled. r is valid during the
 * call only. */
typedef void (*al_resolve_cb)(const al_resolve_result *r, void *arg);

/* A resolver; NULL and AL_EINVAL for a bad AIRLOCK_UPSTREAM_DNS value, an
 * unreadable hosts file or a resolv.conf without nameservers (a clear
 * error at start, not at the first lookup). */
al_resolver *al_resolver_new(struct event_base *base,
			     const al_resolver_config *cfg, al_err *err);
/* Cancels pending lookups (their callbacks are not called). evdns ends
 * a cancelled lookup on a later turn of the loop, and the last memory
 * goes then: turn the loop once more before freeing the event_base. */
void al_resolver_free(al_resolver *r);

/* Start resolving name (canonical). A handle for al_resolve_cancel, or
 * NULL with AL_EQUOTA / AL_EINVAL / AL_ENOMEM (cb is then not called). */
al_resolve_req *al_resolve(al_resolver *r, const char *name, al_resolve_cb cb,
			   void *arg, al_err *err);
/* Drop a pending lookup: its callback is never called. */
void al_resolve_cancel(al_resolve_req *q);
/* Lookups pending now. */
size_t al_resolver_inflight(const al_resolver *r);

#endif
