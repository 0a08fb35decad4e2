/* slot: one sandbox's network, as the host owns it.
 *
 * A slot is a network namespace made by host root (so it belongs to the
 * host's user namespace: root inside a sandbox, whose user namespace is
 * a child of it, has no CAP_NET_ADMIN or CAP_NET_RAW over it), kept
 * alive by a bind mount of its nsfs file at <dir>/<index>.gw. It holds:
 *   - lo, up;
 *   - the guest-facing link AL_NETSLOT_LINK with the gateway's address
 *     (pool + 4i + 1)/30: a veth (ns driver) whose peer is eth0 of a
 *     second namespace made the same way, <dir>/<index>.guest, with the
 *     sandbox's address (+2)/30, MAC 02:a1:<i> and a default route via
 *     the gateway; or a persistent tap (vm driver) that QEMU's NIC is
 *     connected to through a file descriptor (al_netslot_tap_open);
 *   - "local 0.0.0.0/0 dev lo" in the main table (AnyIP: every
 *     destination is this namespace's own, so nothing is ever forwarded
 *     and tproxy needs no policy routing), beside the /30's own route;
 *   - IPv6 off (disable_ipv6 on all and default), forwarding off;
 *   - the rules of nft.h.
 * The gateway's sockets are made in the slot (al_netslot_socket) and
 * passed to it; the gateway process itself stays outside, where its
 * upstream connections go.
 * ns: the jail joins <index>.guest (setns as host root, before entering
 * its own user namespace) instead of a new network namespace of its own.
 * vm: QEMU, in its own empty namespace as today, gets the tap's fd as
 * `-netdev tap,id=net0,fd=N`.
 * Everything is made through netlink (nl.h), never by running ip(8). */
#ifndef AL_NET_SLOT_H
#define AL_NET_SLOT_H

#include <stddef.h>
#include <stdint.h>

#include "base/addr.h"
#include "base/config.h"
#include "base/err.h"

#define AL_NETSLOT_LINK "al-guest"
#define AL_NETSLOT_GUEST_IF "eth0"

typedef enum al_netslot_kind {
	AL_NETSLOT_NS = 0, /* veth to a second namespace the jail joins */
	AL_NETSLOT_VM = 1, /* tap that QEMU's NIC uses */
} al_netslot_kind;

typedef struct al_netslot {
	uint32_t index;
	al_netslot_kind kind;
	al_net_slot_addr addr;
	char gw_path[AL_PATH_MAX];
	char guest_path[AL_PATH_MAX]; /* ns only; "" for vm */
	int gw_fd;		      /* the slot's namespace (nsfs fd) */
	int guest_fd;		      /* ns: the jail's namespace; vm: -1 */
	int ifindex;		      /* AL_NETSLOT_LINK in the slot */
} al_netslot;

typedef struct al_netslot_spec {
	const char *dir; /* root-owned, mode 0700 */
	uint32_t index;
	al_netslot_kind kind;
	al_net_slot_addr addr;
	const al_net_prefix *deny; /* never-reachable destinations */
	size_t ndeny;
} al_netslot_spec;

const char *al_netslot_kind_name(al_netslot_kind kind);

/* Make slot spec->index from nothing: namespaces, links, addresses,
 * routes, sysctls and rules. On failure nothing of it is left. */
int al_netslot_create(const al_netslot_spec *spec, al_netslot *s, al_err *err);
/* Open the namespaces of a slot made earlier (by any process), whose
 * link al_netslot_create found at ifindex. */
int al_netslot_open(const char *dir, uint32_t index, al_netslot_kind kind,
		    const al_net_slot_addr *addr, int ifindex, al_netslot *s,
		    al_err *err);
/* Close s's fds (the slot stays, as long as its files do). */
void al_netslot_close(al_netslot *s);
/* Unmount and unlink slot index's files under dir: its namespaces go
 * with their last user (links, addresses and rules with them). Harmless
 * where there is nothing. */
void al_netslot_remove(const char *dir, uint32_t index);

/* A socket made in the slot's namespace (for the gateway: its DNS and
 * transparent TCP listeners on the gateway's address). */
int al_netslot_socket(const al_netslot *s, int domain, int type, int proto,
		      al_err *err);
/* vm: a file descriptor on the slot's tap, for QEMU's -netdev tap,fd=. */
int al_netslot_tap_open(const al_netslot *s, al_err *err);
/* vm: the guest MAC the rules accept (the sandbox's, core/vm/net.h). */
int al_netslot_set_mac(const al_netslot *s, const uint8_t mac[6], al_err *err);

#endif
