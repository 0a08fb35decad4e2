/* nft: a slot's nftables rules, built with libnftnl as one netlink batch
 * (the kernel applies it whole or not at all) and sent in the slot's
 * namespace.
 *
 * Two tables, both in the slot's namespace (owned by the host's user
 * namespace: nothing inside a sandbox can change them):
 *   netdev airlock_l2, chain ingress on the guest-facing link (policy
 *     drop): a frame passes only with the guest's MAC (set guest_mac) as
 *     source, and only as ARP whose sender is that MAC and the guest's
 *     address, or IPv4 from the guest's address. No IPv6, no other
 *     ethertype, no spoofed source.
 *   inet airlock, chain prerouting (filter, priority -150) for packets
 *     from that link: not IPv4: drop; a source other than the guest's:
 *     drop; DNS (UDP and TCP 53) to the gateway: accept; TCP 53 to
 *     anyone else: drop; any destination in the never-list (private,
 *     loopback, link-local incl. 169.254.169.254, CGNAT, multicast, the
 *     pool itself: the gateway's other ports and every other sandbox,
 *     the host's own addresses): drop; any other TCP: tproxy to the
 *     gateway's listener (gateway:AL_NFT_TPROXY_PORT, whose accepted
 *     sockets show the original destination in getsockname) and accept;
 *     everything else (other UDP, ICMP, ...): drop, counted. Chain
 *     forward: policy drop (nothing is ever routed through a slot).
 * al_nft_build is pure (the unit tests decode its batch); al_nft_apply
 * needs CAP_NET_ADMIN over the current namespace. */
#ifndef AL_NET_NFT_H
#define AL_NET_NFT_H

#include <net/if.h>
#include <stddef.h>
#include <stdint.h>

#include "base/addr.h"
#include "base/err.h"

/* The gateway's transparent TCP listener in every slot. */
#define AL_NFT_TPROXY_PORT 15001
#define AL_NFT_TABLE_L2 "airlock_l2"
#define AL_NFT_TABLE "airlock"
#define AL_NFT_SET_MAC "guest_mac"
/* Room for one slot's batch: ~30 rules of a few hundred bytes. */
#define AL_NFT_BATCH_MAX 65536
#define AL_NFT_MAC_BATCH_MAX 16384

typedef struct al_nft_spec {
	char ifname[IF_NAMESIZE]; /* the guest-facing link in the slot */
	int ifindex;
	uint32_t guest;	  /* the sandbox's address (host order) */
	uint32_t gateway; /* the gateway's address */
	uint16_t tproxy_port;
	const uint8_t *mac; /* guest MAC, or NULL: none yet (all dropped) */
	const al_net_prefix *deny; /* never-reachable destinations */
	size_t ndeny;
} al_nft_spec;

/* The whole ruleset of a slot as one batch in buf (cap bytes, at least
 * AL_NFT_BATCH_MAX is ample); *len its length. */
int al_nft_build(const al_nft_spec *s, char *buf, size_t cap, size_t *len,
		 al_err *err);
/* A batch that replaces the guest MAC the L2 chain accepts. */
int al_nft_build_mac(const uint8_t mac[6], char *buf, size_t cap, size_t *len,
		     al_err *err);
/* Send a batch on a netfilter socket in the current namespace; fails
 * with the kernel's error if any message of it is refused (nothing of
 * it is then applied). */
int al_nft_apply(const char *buf, size_t len, al_err *err);

#endif
