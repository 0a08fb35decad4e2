/* net/nft: a slot's ruleset as built, decoded back from the batch with
 * libnftnl (no privileges, no kernel): which rules, in which order, with
 * which addresses. The kernel side (what the rules drop) is
 * tests/integration/test_netslot.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/rule.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include "net/nft.h"

#define MAX_RULES 64

typedef struct decoded {
	char rules[MAX_RULES][1024]; /* "chain: expressions" */
	int nrules;
	int ingress_policy, forward_policy, prerouting_policy;
	char ingress_dev[IF_NAMESIZE];
	int new_elems, del_elems, batch_begin, batch_end;
} decoded;

static void decode(const char *buf, size_t len, decoded *d)
{
	memset(d, 0, sizeof *d);
	d->ingress_policy = d->forward_policy = d->prerouting_policy = -1;
	int left = (int)len;
	for (const struct nlmsghdr *h = (const void *)buf;
	     mnl_nlmsg_ok(h, left); h = mnl_nlmsg_next(h, &left)) {
		if (h->nlmsg_type == NFNL_MSG_BATCH_BEGIN) {
			d->batch_begin++;
			continue;
		}
		if (h->nlmsg_type == NFNL_MSG_BATCH_END) {
			d->batch_end++;
			continue;
		}
		int type = h->nlmsg_type & 0xff;
		assert_int_equal(h->nlmsg_type >> 8, NFNL_SUBSYS_NFTABLES);
		if (type == NFT_MSG_NEWSETELEM)
			d->new_elems++;
		if (type == NFT_MSG_DELSETELEM)
			d->del_elems++;
		if (type == NFT_MSG_NEWCHAIN) {
			struct nftnl_chain *c = nftnl_chain_alloc();
			assert_int_equal(nftnl_chain_nlmsg_parse(h, c), 0);
			const char *name =
				nftnl_chain_get_str(c, NFTNL_CHAIN_NAME);
			int pol = (int)nftnl_chain_get_u32(c,
							   NFTNL_CHAIN_POLICY);
			if (strcmp(name, "ingress") == 0) {
				d->ingress_policy = pol;
				snprintf(d->ingress_dev, sizeof d->ingress_dev,
					 "%s",
					 nftnl_chain_get_str(c,
							     NFTNL_CHAIN_DEV));
			} else if (strcmp(name, "forward") == 0) {
				d->forward_policy = pol;
			} else if (strcmp(name, "prerouting") == 0) {
				d->prerouting_policy = pol;
			}
			nftnl_chain_free(c);
		}
		if (type == NFT_MSG_NEWRULE) {
			assert_true(d->nrules < MAX_RULES);
			struct nftnl_rule *r = nftnl_rule_alloc();
			assert_int_equal(nftnl_rule_nlmsg_parse(h, r), 0);
			char *out = d->rules[d->nrules++];
			int n = snprintf(out, 1024, "%s: ",
					 nftnl_rule_get_str(r,
							    NFTNL_RULE_CHAIN));
			nftnl_rule_snprintf(out + n, 1024 - (size_t)n, r, 0, 0);
			nftnl_rule_free(r);
		}
	}
}

static const al_net_prefix deny[] = {
	{0x0a000000, 8},  /* 10/8 */
	{0xa9fe0000, 16}, /* 169.254/16 */
	{0xc0000202, 32}, /* a host address */
};

static al_nft_spec spec(const uint8_t *mac)
{
	al_nft_spec s = {
		.ifindex = 7,
		.guest = 0x0ac80006,   /* 10.200.0.6 */
		.gateway = 0x0ac80005, /* 10.200.0.5 */
		.tproxy_port = AL_NFT_TPROXY_PORT,
		.mac = mac,
		.deny = deny,
		.ndeny = 3,
	};
	snprintf(s.ifname, sizeof s.ifname, "al-guest");
	return s;
}

static int count_in(const decoded *d, const char *chain)
{
	int n = 0;
	for (int i = 0; i < d->nrules; i++)
		n += strncmp(d->rules[i], chain, strlen(chain)) == 0;
	return n;
}

static const char *rule(const decoded *d, const char *chain, int k)
{
	for (int i = 0; i < d->nrules; i++)
		if (strncmp(d->rules[i], chain, strlen(chain)) == 0 && k-- == 0)
			return d->rules[i];
	fail_msg("no rule %d in %s", k, chain);
	return NULL;
}

#define HAS(text, needle)                                                      \
	do {                                                                   \
		if (strstr((text), (needle)) == NULL)                          \
			fail_msg("'%s' not in '%s'", (needle), (text));        \
	} while (0)

static void build(const al_nft_spec *s, decoded *d)
{
	static char buf[AL_NFT_BATCH_MAX];
	size_t len = 0;
	al_err err;
	if (al_nft_build(s, buf, sizeof buf, &len, &err) != 0)
		fail_msg("build: %s", err.msg);
	assert_true(len > 0 && len <= sizeof buf / 2);
	decode(buf, len, d);
}

static void test_one_atomic_batch(void **state)
{
	(void)state;
	static const uint8_t mac[6] = {2, 0xa1, 0, 0, 0, 1};
	al_nft_spec s = spec(mac);
	static decoded d;
	build(&s, &d);
	assert_int_equal(d.batch_begin, 1);
	assert_int_equal(d.batch_end, 1);
	assert_int_equal(d.ingress_policy, NF_DROP);
	assert_string_equal(d.ingress_dev, "al-guest");
	assert_int_equal(d.forward_policy, NF_DROP);
	assert_int_equal(d.prerouting_policy, NF_ACCEPT);
	assert_int_equal(d.new_elems, 1);
}

static void test_l2_chain(void **state)
{
	(void)state;
	static const uint8_t mac[6] = {2, 0xa1, 0, 0, 0, 1};
	al_nft_spec s = spec(mac);
	static decoded d;
	build(&s, &d);
	assert_int_equal(count_in(&d, "ingress"), 3);
	/* First: any source MAC not in the set is dropped. */
	const char *r = rule(&d, "ingress", 0);
	HAS(r, "payload load 6b @ link header + 6");
	HAS(r, "lookup reg 1 set guest_mac");
	HAS(r, "0x1 ]"); /* the inverted-lookup flag */
	HAS(r, "drop");
	/* ARP: sender MAC in the set and sender address the guest's. */
	r = rule(&d, "ingress", 1);
	HAS(r, "cmp eq reg 1 0x00000608"); /* ETH_P_ARP, network order */
	HAS(r, "@ network header + 14");
	HAS(r, "cmp eq reg 1 0x0600c80a"); /* 10.200.0.6 */
	HAS(r, "accept");
	/* IPv4 from the guest's address only. */
	r = rule(&d, "ingress", 2);
	HAS(r, "cmp eq reg 1 0x00000008");
	HAS(r, "@ network header + 12");
	HAS(r, "cmp eq reg 1 0x0600c80a");
	HAS(r, "accept");
}

static void test_l3_chain_order(void **state)
{
	(void)state;
	al_nft_spec s = spec(NULL);
	static decoded d;
	build(&s, &d);
	/* iif, not-IPv4, saddr, 2 DNS, other DNS, 3 deny, tproxy, final
	 * drop. */
	assert_int_equal(count_in(&d, "prerouting"), 6 + 3 + 2);
	HAS(rule(&d, "prerouting", 0), "meta load iif");
	HAS(rule(&d, "prerouting", 0), "cmp neq reg 1 0x00000007");
	HAS(rule(&d, "prerouting", 1), "meta load nfproto");
	HAS(rule(&d, "prerouting", 1), "drop");
	HAS(rule(&d, "prerouting", 2), "cmp neq reg 1 0x0600c80a");
	HAS(rule(&d, "prerouting", 2), "drop");
	/* DNS to the gateway only, UDP then TCP, before any drop of
	 * private ranges (the gateway's address is in one). */
	for (int k = 3; k <= 4; k++) {
		const char *r = rule(&d, "prerouting", k);
		HAS(r, "@ network header + 16");
		HAS(r, "cmp eq reg 1 0x0500c80a"); /* 10.200.0.5 */
		HAS(r, k == 3 ? "cmp eq reg 1 0x00000011"
			      : "cmp eq reg 1 0x00000006");
		HAS(r, "@ transport header + 2");
		HAS(r, "cmp eq reg 1 0x00003500"); /* port 53 */
		HAS(r, "accept");
	}
	const char *r = rule(&d, "prerouting", 5);
	HAS(r, "cmp eq reg 1 0x00000006");
	HAS(r, "cmp eq reg 1 0x00003500");
	assert_null(strstr(r, "network header"));
	HAS(r, "drop");
	r = rule(&d, "prerouting", 6);
	HAS(r, "bitwise reg 1 = ( reg 1 & 0x000000ff )");
	HAS(r, "cmp eq reg 1 0x0000000a");
	HAS(r, "drop");
	HAS(rule(&d, "prerouting", 7), "cmp eq reg 1 0x0000fea9");
	/* A /32 needs no mask. */
	r = rule(&d, "prerouting", 8);
	assert_null(strstr(r, "bitwise"));
	HAS(r, "cmp eq reg 1 0x020200c0");
	/* Then every TCP connection to the gateway's transparent port. */
	r = rule(&d, "prerouting", 9);
	HAS(r, "meta load l4proto");
	HAS(r, "cmp eq reg 1 0x00000006");
	HAS(r, "immediate reg 1 0x0500c80a");
	HAS(r, "immediate reg 2 0x0000993a"); /* 15001 */
	HAS(r, "tproxy ip addr reg 1 port reg 2");
	HAS(r, "accept");
	/* And the rest dropped, counted. */
	r = rule(&d, "prerouting", 10);
	HAS(r, "counter");
	HAS(r, "drop");
	/* No MAC yet (a vm slot before its take): the set stays empty, so
	 * the L2 chain drops every frame. */
	assert_int_equal(d.new_elems, 0);
}

static void test_mac_batch(void **state)
{
	(void)state;
	static char buf[AL_NFT_MAC_BATCH_MAX];
	size_t len;
	al_err err;
	assert_int_equal(al_nft_build_mac((const uint8_t[6]){2, 1, 2, 3, 4, 5},
					  buf, sizeof buf, &len, &err),
			 0);
	static decoded d;
	decode(buf, len, &d);
	/* Flush, then the one MAC, in one transaction. */
	assert_int_equal(d.del_elems, 1);
	assert_int_equal(d.new_elems, 1);
	assert_int_equal(d.batch_begin, 1);
	assert_int_equal(d.batch_end, 1);
}

static void test_bad_spec(void **state)
{
	(void)state;
	static char buf[AL_NFT_BATCH_MAX];
	size_t len;
	al_err err;
	al_nft_spec s = spec(NULL);
	s.ifindex = 0;
	assert_int_equal(al_nft_build(&s, buf, sizeof buf, &len, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	s = spec(NULL);
	s.gateway = 0;
	assert_int_equal(al_nft_build(&s, buf, sizeof buf, &len, &err), -1);
	/* Too little room is an error, never a cut-short ruleset. */
	s = spec(NULL);
	static char small[2 * 8192];
	assert_int_equal(al_nft_build(&s, small, 100, &len, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	al_net_prefix many[200];
	for (int i = 0; i < 200; i++)
		many[i] = (al_net_prefix){0x0b000000u + ((uint32_t)i << 8), 24};
	s.deny = many;
	s.ndeny = 200;
	assert_int_equal(al_nft_build(&s, small, sizeof small, &len, &err), -1);
	assert_int_equal(err.code, AL_ENOMEM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_atomic_batch),
		cmocka_unit_test(test_l2_chain),
		cmocka_unit_test(test_l3_chain_order),
		cmocka_unit_test(test_mac_batch),
		cmocka_unit_test(test_bad_spec),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
