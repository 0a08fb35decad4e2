/* addr: IPv4 prefixes and the address plan of network slots.
 *
 * A pool (AIRLOCK_NET_POOL, default 10.200.0.0/16) is cut into /30s, one
 * per slot: slot i owns pool + 4i, whose .1 is the gateway's address (in
 * the slot's namespace) and .2 the sandbox's; .0 and .3 are the /30's
 * network and broadcast. The guest's MAC of slot i is 02:a1:<i, 4 bytes
 * big endian>: locally administered, unicast. Pure functions, no
 * privileges: the unit tests cover them all. */
#ifndef AL_NET_ADDR_H
#define AL_NET_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define AL_NET_POOL_DEFAULT "10.200.0.0/16"
#define AL_NET_SLOT_PREFIX 30
/* Slots beyond this many are never used, whatever the pool's size. */
#define AL_NET_SLOTS_MAX 65536u
/* "255.255.255.255/32" and the NUL. */
#define AL_NET_PREFIX_STRLEN 19
/* "255.255.255.255" and the NUL. */
#define AL_NET_ADDR_STRLEN 16

typedef struct al_net_prefix {
	uint32_t addr; /* host order, host bits clear */
	int len;       /* 0..32 */
} al_net_prefix;

typedef struct al_net_slot_addr {
	uint32_t gateway; /* host order */
	uint32_t guest;
	uint8_t guest_mac[6];
} al_net_slot_addr;

/* "a.b.c.d/len" (len 0..32; host bits must be clear). AL_EINVAL with the
 * text quoted otherwise. */
int al_net_prefix_parse(const char *text, al_net_prefix *p, al_err *err);
void al_net_prefix_format(const al_net_prefix *p,
			  char out[AL_NET_PREFIX_STRLEN]);
uint32_t al_net_prefix_mask(int len);
/* "a.b.c.d" of an address in host order. */
void al_net_addr_format(uint32_t addr, char out[AL_NET_ADDR_STRLEN]);
bool al_net_prefix_contains(const al_net_prefix *p, uint32_t addr);
bool al_net_prefix_overlap(const al_net_prefix *a, const al_net_prefix *b);

/* Slots a pool holds: its /30s, at most AL_NET_SLOTS_MAX; 0 for a pool
 * smaller than a /30. */
uint32_t al_net_pool_slots(const al_net_prefix *pool);
/* A slot pool as text (AIRLOCK_NET_POOL): an IPv4 prefix of at least one
 * /30 that overlaps none of AL_NET_SYNTHETIC, "this network", loopback,
 * link-local, multicast and reserved space. AL_EINVAL saying what is
 * wrong otherwise (the caller names the setting). That it overlaps no
 * route or address of the host is al_netpool_open's check (net/pool.h):
 * it needs the host's tables. */
int al_net_pool_parse(const char *text, al_net_prefix *pool, al_err *err);
/* Addresses of slot index (< al_net_pool_slots); AL_EINVAL otherwise. */
int al_net_slot_addr_of(const al_net_prefix *pool, uint32_t index,
			al_net_slot_addr *a, al_err *err);

/* Destinations no sandbox may reach, whatever the gateway says: "this
 * network", RFC 1918, CGNAT, loopback, link-local (169.254.169.254, the
 * metadata address, is in it), IETF protocol assignments, multicast,
 * reserved and broadcast. TEST-NETs and the benchmark range are not in
 * it: the gateway's synthetic addresses are in 198.18.0.0/15. */
extern const al_net_prefix al_net_never[];
extern const size_t al_net_never_count;

/* The gateway's synthetic addresses (DNS answers for allowed names). A
 * pool may not overlap it. */
#define AL_NET_SYNTHETIC "198.18.0.0/15"

#endif
