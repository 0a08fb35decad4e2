/* addr: see addr.h. */
#include "base/addr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define P(a, b, c, d, l)                                                       \
	{                                                                      \
		((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) |                \
			((uint32_t)(c) << 8) | (uint32_t)(d),                  \
			(l)                                                    \
	}

const al_net_prefix al_net_never[] = {
	P(0, 0, 0, 0, 8),    P(10, 0, 0, 0, 8),	    P(100, 64, 0, 0, 10),
	P(127, 0, 0, 0, 8),  P(169, 254, 0, 0, 16), P(172, 16, 0, 0, 12),
	P(192, 0, 0, 0, 24), P(192, 168, 0, 0, 16), P(224, 0, 0, 0, 4),
	P(240, 0, 0, 0, 4),
};
const size_t al_net_never_count = sizeof al_net_never / sizeof al_net_never[0];

uint32_t al_net_prefix_mask(int len)
{
	return len <= 0 ? 0 : len >= 32 ? ~0u : ~0u << (32 - len);
}

int al_net_prefix_parse(const char *text, al_net_prefix *p, al_err *err)
{
	char ip[16];
	const char *slash = text != NULL ? strchr(text, '/') : NULL;
	if (slash == NULL || (size_t)(slash - text) >= sizeof ip ||
	    slash == text)
		return al_err_set(err, AL_EINVAL, 0,
				  "\"%.40s\" is not an IPv4 prefix "
				  "(a.b.c.d/len)",
				  text != NULL ? text : "");
	memcpy(ip, text, (size_t)(slash - text));
	ip[slash - text] = '\0';
	struct in_addr a;
	char *end;
	const char *lt = slash + 1;
	long len = strtol(lt, &end, 10);
	if (inet_pton(AF_INET, ip, &a) != 1 || *lt < '0' || *lt > '9' ||
	    *end != '\0' || len < 0 || len > 32)
		return al_err_set(err, AL_EINVAL, 0,
				  "\"%.40s\" is not an IPv4 prefix "
				  "(a.b.c.d/len)",
				  text);
	uint32_t addr = ntohl(a.s_addr);
	if ((addr & ~al_net_prefix_mask((int)len)) != 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "\"%.40s\" has host bits set", text);
	p->addr = addr;
	p->len = (int)len;
	return 0;
}

void al_net_prefix_format(const al_net_prefix *p,
			  char out[AL_NET_PREFIX_STRLEN])
{
	snprintf(out, AL_NET_PREFIX_STRLEN, "%u.%u.%u.%u/%d", p->addr >> 24,
		 (p->addr >> 16) & 255, (p->addr >> 8) & 255, p->addr & 255,
		 p->len);
}

void al_net_addr_format(uint32_t addr, char out[AL_NET_ADDR_STRLEN])
{
	snprintf(out, AL_NET_ADDR_STRLEN, "%u.%u.%u.%u", addr >> 24,
		 (addr >> 16) & 255, (addr >> 8) & 255, addr & 255);
}

bool al_net_prefix_contains(const al_net_prefix *p, uint32_t addr)
{
	return (addr & al_net_prefix_mask(p->len)) == p->addr;
}

bool al_net_prefix_overlap(const al_net_prefix *a, const al_net_prefix *b)
{
	int len = a->len < b->len ? a->len : b->len;
	uint32_t m = al_net_prefix_mask(len);
	return (a->addr & m) == (b->addr & m);
}

uint32_t al_net_pool_slots(const al_net_prefix *pool)
{
	if (pool->len > AL_NET_SLOT_PREFIX)
		return 0;
	int bits = AL_NET_SLOT_PREFIX - pool->len;
	if (bits >= 16)
		return AL_NET_SLOTS_MAX;
	return 1u << bits;
}

/* Prefixes a pool may never overlap: the gateway's own range and what
 * cannot be routed as a link's addresses. */
static const char *const pool_forbidden[] = {
	AL_NET_SYNTHETIC, "0.0.0.0/8",	 "127.0.0.0/8",
	"169.254.0.0/16", "224.0.0.0/4", "240.0.0.0/4",
};

int al_net_pool_parse(const char *text, al_net_prefix *pool, al_err *err)
{
	al_net_prefix p;
	if (al_net_prefix_parse(text, &p, err) < 0)
		return -1;
	if (al_net_pool_slots(&p) == 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "%s is smaller than one /30 slot", text);
	for (size_t i = 0; i < sizeof pool_forbidden / sizeof *pool_forbidden;
	     i++) {
		al_net_prefix f;
		al_net_prefix_parse(pool_forbidden[i], &f, NULL);
		if (al_net_prefix_overlap(&p, &f))
			return al_err_set(err, AL_EINVAL, 0,
					  "%s overlaps %s, which no sandbox "
					  "link may use",
					  text, pool_forbidden[i]);
	}
	*pool = p;
	return 0;
}

int al_net_slot_addr_of(const al_net_prefix *pool, uint32_t index,
			al_net_slot_addr *a, al_err *err)
{
	uint32_t n = al_net_pool_slots(pool);
	if (index >= n)
		return al_err_set(err, AL_EINVAL, 0,
				  "slot %u is outside the pool (%u slots)",
				  index, n);
	uint32_t net = pool->addr + 4 * index;
	a->gateway = net + 1;
	a->guest = net + 2;
	a->guest_mac[0] = 0x02;
	a->guest_mac[1] = 0xa1;
	a->guest_mac[2] = (uint8_t)(index >> 24);
	a->guest_mac[3] = (uint8_t)(index >> 16);
	a->guest_mac[4] = (uint8_t)(index >> 8);
	a->guest_mac[5] = (uint8_t)index;
	return 0;
}
