/* gw/upaddr: may the gateway dial this upstream address?
 *
 * Every address the gateway's resolver returns is checked here before
 * connect(): an upstream name that resolves (or is rebound) to an
 * internal address must not become a way in. Denied, with the reason
 * the egress log shows:
 *   IPv4: 0.0.0.0/8 "this network" (0.0.0.0 reaches the host), loopback
 *   127/8, RFC 1918 (10/8, 172.16/12, 192.168/16), CGNAT 100.64/10,
 *   link-local 169.254/16 with the metadata address 169.254.169.254
 *   named apart, IETF assignments 192.0.0.0/24, benchmark 198.18/15 (the
 *   gateway's own synthetic addresses), multicast 224/4, reserved 240/4,
 *   broadcast 255.255.255.255, and the airlock slot pool.
 *   IPv6: everything outside global unicast 2000::/3, and in it the
 *   forms that embed an IPv4 address (NAT64 64:ff9b::/96 is outside
 *   already; 6to4 2002::/16, Teredo 2001::/32), plus ::ffff:0:0/96
 *   (mapped), ::/96 (compatible), ULA fc00::/7, link-local fe80::/10,
 *   multicast ff00::/8, the IETF's 2001::/23 (benchmarking, ORCHID,
 *   ... beside Teredo), documentation 2001:db8::/32 and 3fff::/20.
 * The operator's ranges (AIRLOCK_UPSTREAM_ALLOW_CIDRS, e.g. an internal
 * mirror) lift those denials for the addresses inside them, except the
 * ones that can never be an upstream: unspecified, multicast, broadcast,
 * the synthetic range and the slot pool (those would loop back into the
 * gateway or reach another sandbox). */
#ifndef AL_GW_UPADDR_H
#define AL_GW_UPADDR_H

#include <stdbool.h>
#include <sys/socket.h>

#include "base/addr.h"
#include "base/err.h"

/* Operator ranges at most. */
#define AL_UPADDR_RANGES_MAX 64

typedef struct al_upaddr al_upaddr;

/* A classifier. allow_cidrs: NULL or "" for none, else comma-separated
 * CIDRs, IPv4 "a.b.c.d/n" or IPv6 "x::/n", host bits clear, no spaces
 * (AIRLOCK_UPSTREAM_ALLOW_CIDRS). pool: the slot pool (NULL:
 * AL_NET_POOL_DEFAULT). NULL and AL_EINVAL quoting the bad entry. */
al_upaddr *al_upaddr_new(const char *allow_cidrs, const al_net_prefix *pool,
			 al_err *err);
void al_upaddr_free(al_upaddr *u);

/* NULL when the gateway may dial sa (AF_INET or AF_INET6; the port is
 * not looked at), else a static reason ("loopback", "private
 * (rfc1918)", "metadata", ...). Any other family: "not ip". */
const char *al_upaddr_check(const al_upaddr *u, const struct sockaddr *sa);
/* The same for an IPv4 address in host order. */
const char *al_upaddr_check4(const al_upaddr *u, uint32_t addr);

#endif
