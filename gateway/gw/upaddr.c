/* gw/upaddr: upstream address classification (deny internal ranges,
 * IPv4-embedding IPv6 forms; the operator's ranges lift most denials). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "gw/upaddr.h"

typedef struct range6 {
	uint8_t addr[16];
	int len;
} range6;

struct al_upaddr {
	al_net_prefix pool;
	al_net_prefix v4[AL_UPADDR_RANGES_MAX];
	size_t n4;
	range6 v6[AL_UPADDR_RANGES_MAX];
	size_t n6;
};

#define IP4(a, b, c, d)                                                        \
	(((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) |                       \
	 ((uint32_t)(c) << 8) | (uint32_t)(d))

static bool in4(uint32_t addr, uint32_t net, int len)
{
	return al_net_prefix_contains(&(al_net_prefix){net, len}, addr);
}

static bool in6(const uint8_t *a, const uint8_t *net, int len)
{
	int full = len / 8, rest = len % 8;
	if (memcmp(a, net, (size_t)full) != 0)
		return false;
	if (rest == 0)
		return true;
	uint8_t mask = (uint8_t)(0xffu << (8 - rest));
	return (a[full] & mask) == (net[full] & mask);
}

/* Strict decimal 0..max, no sign, no leading zero. */
static bool parse_len(const char *s, size_t n, int max, int *out)
{
	if (n == 0 || n > 3 || (s[0] == '0' && n > 1))
		return false;
	int v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	if (v > max)
		return false;
	*out = v;
	return true;
}

static int parse_range6(const char *s, size_t n, range6 *r)
{
	const char *slash = memchr(s, '/', n);
	char text[INET6_ADDRSTRLEN];
	if (slash == NULL || (size_t)(slash - s) >= sizeof text)
		return -1;
	memcpy(text, s, (size_t)(slash - s));
	text[slash - s] = '\0';
	if (inet_pton(AF_INET6, text, r->addr) != 1 ||
	    !parse_len(slash + 1, n - (size_t)(slash - s) - 1, 128, &r->len))
		return -1;
	for (int bit = r->len; bit < 128; bit++)
		if (r->addr[bit / 8] & (0x80u >> (bit % 8)))
			return -1; /* host bits set */
	return 0;
}

al_upaddr *al_upaddr_new(const char *allow_cidrs, const al_net_prefix *pool,
			 al_err *err)
{
	al_upaddr *u = calloc(1, sizeof *u);
	if (u == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "upaddr: out of memory");
		return NULL;
	}
	if (pool != NULL)
		u->pool = *pool;
	else if (al_net_prefix_parse(AL_NET_POOL_DEFAULT, &u->pool, err) != 0)
		goto fail;
	const char *s = allow_cidrs != NULL ? allow_cidrs : "";
	while (*s != '\0') {
		const char *comma = strchr(s, ',');
		size_t n = comma != NULL ? (size_t)(comma - s) : strlen(s);
		char item[64];
		if (n == 0 || n >= sizeof item) {
			al_err_set(err, AL_EINVAL, 0,
				   "AIRLOCK_UPSTREAM_ALLOW_CIDRS: %s entry"
				   " (want CIDRs separated by ',')",
				   n == 0 ? "an empty" : "an overlong");
			goto fail;
		}
		memcpy(item, s, n);
		item[n] = '\0';
		if (u->n4 + u->n6 >= AL_UPADDR_RANGES_MAX) {
			al_err_set(err, AL_EINVAL, 0,
				   "AIRLOCK_UPSTREAM_ALLOW_CIDRS: more than"
				   " %d ranges",
				   AL_UPADDR_RANGES_MAX);
			goto fail;
		}
		int rc;
		if (memchr(item, ':', n) != NULL)
			rc = parse_range6(item, n, &u->v6[u->n6++]);
		else
			rc = al_net_prefix_parse(item, &u->v4[u->n4++], NULL);
		if (rc != 0) {
			al_err_set(err, AL_EINVAL, 0,
				   "AIRLOCK_UPSTREAM_ALLOW_CIDRS: '%s' is not"
				   " a CIDR (a.b.c.d/n or x::/n, host bits"
				   " clear)",
				   item);
			goto fail;
		}
		if (comma == NULL)
			break;
		s = comma + 1;
		if (*s == '\0') {
			al_err_set(err, AL_EINVAL, 0,
				   "AIRLOCK_UPSTREAM_ALLOW_CIDRS: ends with"
				   " ','");
			goto fail;
		}
	}
	return u;
fail:
	free(u);
	return NULL;
}

void al_upaddr_free(al_upaddr *u)
{
	free(u);
}

const char *al_upaddr_check4(const al_upaddr *u, uint32_t a)
{
	/* Never an upstream, whatever the operator allows. */
	if (a == 0)
		return "unspecified";
	if (a == 0xffffffffu)
		return "broadcast";
	if (in4(a, IP4(224, 0, 0, 0), 4))
		return "multicast";
	if (in4(a, IP4(198, 18, 0, 0), 15))
		return "synthetic (198.18.0.0/15)";
	if (al_net_prefix_contains(&u->pool, a))
		return "airlock slot pool";
	for (size_t i = 0; i < u->n4; i++)
		if (al_net_prefix_contains(&u->v4[i], a))
			return NULL;
	static const struct {
		uint32_t net;
		int len;
		const char *reason;
	} deny[] = {
		{IP4(0, 0, 0, 0), 8, "this network (0.0.0.0/8)"},
		{IP4(127, 0, 0, 0), 8, "loopback"},
		{IP4(169, 254, 169, 254), 32, "metadata"},
		{IP4(169, 254, 0, 0), 16, "link-local"},
		{IP4(10, 0, 0, 0), 8, "private (rfc1918)"},
		{IP4(172, 16, 0, 0), 12, "private (rfc1918)"},
		{IP4(192, 168, 0, 0), 16, "private (rfc1918)"},
		{IP4(100, 64, 0, 0), 10, "cgnat (100.64.0.0/10)"},
		{IP4(192, 0, 0, 0), 24, "ietf assignments (192.0.0.0/24)"},
		{IP4(240, 0, 0, 0), 4, "reserved (240.0.0.0/4)"},
	};
	for (size_t i = 0; i < sizeof deny / sizeof *deny; i++)
		if (in4(a, deny[i].net, deny[i].len))
			return deny[i].reason;
	return NULL;
}

static const char *check6(const al_upaddr *u, const uint8_t *a)
{
	static const uint8_t zero[16];
	static const uint8_t mapped[16] = {[10] = 0xff, [11] = 0xff};
	static const uint8_t mcast[16] = {0xff};
	if (memcmp(a, zero, 16) == 0)
		return "unspecified";
	if (in6(a, mcast, 8))
		return "multicast";
	if (in6(a, mapped, 96))
		return "ipv4-mapped ipv6 (::ffff:0:0/96)";
	for (size_t i = 0; i < u->n6; i++)
		if (in6(a, u->v6[i].addr, u->v6[i].len))
			return NULL;
	static const uint8_t loop[16] = {[15] = 1};
	static const uint8_t nat64[16] = {0x00, 0x64, 0xff, 0x9b};
	static const uint8_t nat64_local[16] = {0x00, 0x64, 0xff,
						0x9b, 0,    0x01};
	static const uint8_t sixto4[16] = {0x20, 0x02};
	static const uint8_t teredo[16] = {0x20, 0x01};
	static const uint8_t ietf[16] = {0x20, 0x01};
	static const uint8_t doc[16] = {0x20, 0x01, 0x0d, 0xb8};
	static const uint8_t doc2[16] = {0x3f, 0xff};
	static const uint8_t ula[16] = {0xfc};
	static const uint8_t ll[16] = {0xfe, 0x80};
	static const uint8_t global[16] = {0x20};
	if (memcmp(a, loop, 16) == 0)
		return "loopback";
	if (in6(a, zero, 96))
		return "ipv4-compatible ipv6 (::/96)";
	if (in6(a, nat64, 96) || in6(a, nat64_local, 48))
		return "nat64 (64:ff9b::/96)";
	if (in6(a, ula, 7))
		return "unique local (fc00::/7)";
	if (in6(a, ll, 10))
		return "link-local";
	if (in6(a, sixto4, 16))
		return "6to4 (2002::/16)";
	if (in6(a, teredo, 32))
		return "teredo (2001::/32)";
	if (in6(a, ietf, 23))
		return "ietf assignments (2001::/23)";
	if (in6(a, doc, 32) || in6(a, doc2, 20))
		return "documentation (2001:db8::/32, 3fff::/20)";
	if (!in6(a, global, 3))
		return "not global unicast";
	return NULL;
}

const char *al_upaddr_check(const al_upaddr *u, const struct sockaddr *sa)
{
	if (sa == NULL)
		return "not ip";
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		return al_upaddr_check4(u, ntohl(s4->sin_addr.s_addr));
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
		return check6(u, s6->sin6_addr.s6_addr);
	}
	return "not ip";
}
