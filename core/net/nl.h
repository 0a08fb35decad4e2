/* nl: rtnetlink through libmnl, and entering a network namespace.
 *
 * Every link, address and route of a slot (slot.h) is made with these
 * calls, never by running ip(8). A netlink socket belongs to the network
 * namespace its creator was in when it was opened: al_nl_open() opens
 * one in the calling thread's current namespace, so callers enter the
 * slot's namespace first (al_nl_enter) and leave it after. setns() of a
 * network namespace changes the calling thread only. */
#ifndef AL_NET_NL_H
#define AL_NET_NL_H

#include <stdint.h>

#include "base/err.h"

/* One netlink message or answer; libmnl's MNL_SOCKET_BUFFER_SIZE is a
 * run-time value (page size). */
#define AL_NL_BUF 8192

typedef struct al_nl {
	struct mnl_socket *sock;
	uint32_t portid;
	uint32_t seq;
} al_nl;

/* The calling thread's current network namespace (an fd), then enter
 * target (an nsfs fd). Returns the fd to hand back to al_nl_leave. */
int al_nl_enter(int target_ns_fd, al_err *err);
/* Back to the namespace al_nl_enter returned (and close that fd). A
 * failure leaves the thread in the wrong namespace: AL_EINTERNAL, and
 * the caller must not go on with network work in this thread. */
int al_nl_leave(int saved_ns_fd, al_err *err);

/* A NETLINK_ROUTE socket in the current namespace; 0 / -1. */
int al_nl_open(al_nl *nl, al_err *err);
void al_nl_close(al_nl *nl);

/* Create a veth pair in the current namespace: name here, peer in the
 * namespace peer_ns_fd, with MAC peer_mac (NULL: the kernel's). */
int al_nl_veth_add(al_nl *nl, const char *name, const char *peer,
		   int peer_ns_fd, const uint8_t peer_mac[6], al_err *err);
/* Set link ifindex up. */
int al_nl_link_up(al_nl *nl, int ifindex, al_err *err);
/* Add addr/prefix (host order) on ifindex, with peer broadcast. */
int al_nl_addr_add(al_nl *nl, int ifindex, uint32_t addr, int prefix,
		   al_err *err);
/* Add a route to dst/prefix in the main table: type RTN_UNICAST via gw
 * (0: none) out of ifindex, or RTN_LOCAL (dst delivered to this host,
 * "AnyIP") on ifindex. */
int al_nl_route_add(al_nl *nl, int type, uint32_t dst, int prefix, uint32_t gw,
		    int ifindex, al_err *err);

/* IPv4 routes (dst, prefix) and addresses of the current namespace, for
 * a pool to check it does not overlap them. fn returns nonzero to stop;
 * kind is 'r' (route of any table, not the default) or 'a' (address). */
typedef int (*al_nl_prefix_fn)(void *arg, int kind, uint32_t addr, int prefix);
int al_nl_ipv4_walk(al_nl *nl, al_nl_prefix_fn fn, void *arg, al_err *err);

/* Write value to /proc/sys/<key> of the current namespace (net keys are
 * per namespace). */
int al_nl_sysctl(const char *key, const char *value, al_err *err);

#endif
