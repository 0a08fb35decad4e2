/* nft: see nft.h. */
#include "net/nft.h"
#include "net/nl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

#include <linux/if_ether.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* nft's own type id for ether_addr keys (shown by `nft list`). */
#define NFT_TYPE_ETHERADDR 9
#define MAC_SET_ID 1

typedef struct batch {
	struct mnl_nlmsg_batch *b;
	uint32_t seq;
	bool oom; /* an allocation or the buffer failed: nothing is sent */
} batch;

static struct nlmsghdr *msg(batch *b, uint16_t type, uint16_t family,
			    uint16_t flags)
{
	if (b->oom)
		return NULL;
	return nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(b->b), type,
				     family, flags | NLM_F_ACK, b->seq++);
}

static void next(batch *b)
{
	if (!b->oom && !mnl_nlmsg_batch_next(b->b))
		b->oom = true;
}

static void table_add(batch *b, uint16_t family, const char *name)
{
	struct nftnl_table *t = nftnl_table_alloc();
	struct nlmsghdr *h = msg(b, NFT_MSG_NEWTABLE, family, NLM_F_CREATE);
	if (t == NULL || h == NULL) {
		b->oom = true;
	} else {
		nftnl_table_set_str(t, NFTNL_TABLE_NAME, name);
		nftnl_table_nlmsg_build_payload(h, t);
		next(b);
	}
	if (t != NULL)
		nftnl_table_free(t);
}

static void chain_add(batch *b, uint16_t family, const char *table,
		      const char *name, uint32_t hook, int32_t prio,
		      uint32_t policy, const char *dev)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	struct nlmsghdr *h = msg(b, NFT_MSG_NEWCHAIN, family, NLM_F_CREATE);
	if (c == NULL || h == NULL) {
		b->oom = true;
	} else {
		nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, table);
		nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
		nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, "filter");
		nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, hook);
		nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
		nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, policy);
		if (dev != NULL)
			nftnl_chain_set_str(c, NFTNL_CHAIN_DEV, dev);
		nftnl_chain_nlmsg_build_payload(h, c);
		next(b);
	}
	if (c != NULL)
		nftnl_chain_free(c);
}

static struct nftnl_set *mac_set(void)
{
	struct nftnl_set *s = nftnl_set_alloc();
	if (s == NULL)
		return NULL;
	nftnl_set_set_str(s, NFTNL_SET_TABLE, AL_NFT_TABLE_L2);
	nftnl_set_set_str(s, NFTNL_SET_NAME, AL_NFT_SET_MAC);
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_NETDEV);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, 6);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, NFT_TYPE_ETHERADDR);
	nftnl_set_set_u32(s, NFTNL_SET_ID, MAC_SET_ID);
	return s;
}

static void set_add(batch *b)
{
	struct nftnl_set *s = mac_set();
	struct nlmsghdr *h = msg(b, NFT_MSG_NEWSET, NFPROTO_NETDEV,
				 NLM_F_CREATE);
	if (s == NULL || h == NULL) {
		b->oom = true;
	} else {
		nftnl_set_nlmsg_build_payload(h, s);
		next(b);
	}
	if (s != NULL)
		nftnl_set_free(s);
}

/* mac != NULL: add it as the set's element; NULL: flush the set. */
static void set_elem(batch *b, const uint8_t *mac)
{
	struct nftnl_set *s = mac_set();
	struct nftnl_set_elem *e = mac != NULL ? nftnl_set_elem_alloc() : NULL;
	struct nlmsghdr *h =
		msg(b, mac != NULL ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM,
		    NFPROTO_NETDEV, mac != NULL ? NLM_F_CREATE : 0);
	if (s == NULL || h == NULL || (mac != NULL && e == NULL)) {
		b->oom = true;
		if (e != NULL)
			nftnl_set_elem_free(e);
	} else {
		if (e != NULL) {
			nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, mac, 6);
			nftnl_set_elem_add(s, e);
		}
		nftnl_set_elems_nlmsg_build_payload(h, s);
		next(b);
	}
	if (s != NULL)
		nftnl_set_free(s);
}

/* ---- the slot's rules, as data ---- */

/* What a match loads into register 1. */
enum field {
	F_NONE,	     /* ends a rule's matches */
	F_ETH_SRC,   /* source MAC */
	F_ETHERTYPE, /* link-layer protocol */
	F_ARP_SHA,   /* ARP sender MAC */
	F_ARP_SPA,   /* ARP sender address */
	F_IP_SRC,
	F_IP_DST,
	F_DPORT, /* transport destination port */
	F_IIF,	 /* input interface index */
	F_NFPROTO,
	F_L4PROTO,
};

/* Packet fields are in network order; meta iif is a host-order int. */
static const struct {
	bool meta;
	uint32_t base_or_key, off, len;
} fields[] = {
	[F_ETH_SRC] = {false, NFT_PAYLOAD_LL_HEADER, 6, 6},
	[F_ETHERTYPE] = {false, NFT_PAYLOAD_LL_HEADER, 12, 2},
	[F_ARP_SHA] = {false, NFT_PAYLOAD_NETWORK_HEADER, 8, 6},
	[F_ARP_SPA] = {false, NFT_PAYLOAD_NETWORK_HEADER, 14, 4},
	[F_IP_SRC] = {false, NFT_PAYLOAD_NETWORK_HEADER, 12, 4},
	[F_IP_DST] = {false, NFT_PAYLOAD_NETWORK_HEADER, 16, 4},
	[F_DPORT] = {false, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2},
	[F_IIF] = {true, NFT_META_IIF, 0, 4},
	[F_NFPROTO] = {true, NFT_META_NFPROTO, 0, 1},
	[F_L4PROTO] = {true, NFT_META_L4PROTO, 0, 1},
};

enum op { EQ, NEQ, IN_MAC, NOT_IN_MAC };

/* What a field is compared with: constants, the slot's own addresses,
 * or (V_DENY) the never-list entry the rule is repeated for, masked to
 * its length. */
enum value {
	V_NONE, /* for the MAC set lookups */
	V_ETH_ARP,
	V_ETH_IP,
	V_IPV4,
	V_TCP,
	V_UDP,
	V_DNS_PORT,
	V_IIF,
	V_GUEST,
	V_GATEWAY,
	V_DENY,
};

typedef struct match {
	uint8_t field, op, value;
} match;

enum verdict { ACCEPT, DROP, TPROXY }; /* TPROXY: to the gateway, accept */

typedef struct rule_spec {
	bool l2;       /* netdev ingress; else inet prerouting */
	bool per_deny; /* once for each never-list entry */
	match m[3];    /* up to the first F_NONE */
	bool counter;
	uint8_t verdict;
} rule_spec;

/* The ruleset, in order (the comment in nft.h says why each holds). */
static const rule_spec rules[] = {
	/* Another source MAC: drop (also while no MAC is set yet). */
	{.l2 = true,
	 .m = {{F_ETH_SRC, NOT_IN_MAC, V_NONE}},
	 .counter = true,
	 .verdict = DROP},
	/* ARP: only the guest's own MAC and address as its sender, so it
	 * cannot claim another address on the link. */
	{.l2 = true,
	 .m = {{F_ETHERTYPE, EQ, V_ETH_ARP},
	       {F_ARP_SHA, IN_MAC, V_NONE},
	       {F_ARP_SPA, EQ, V_GUEST}},
	 .verdict = ACCEPT},
	/* IPv4 from the guest's address; anything else hits the policy. */
	{.l2 = true,
	 .m = {{F_ETHERTYPE, EQ, V_ETH_IP}, {F_IP_SRC, EQ, V_GUEST}},
	 .verdict = ACCEPT},
	/* Only the guest's link is filtered here (lo is the gateway's). */
	{.m = {{F_IIF, NEQ, V_IIF}}, .verdict = ACCEPT},
	{.m = {{F_NFPROTO, NEQ, V_IPV4}}, .counter = true, .verdict = DROP},
	/* The L2 chain checked this already; a second check costs one
	 * compare and holds if that chain is ever bypassed. */
	{.m = {{F_IP_SRC, NEQ, V_GUEST}}, .counter = true, .verdict = DROP},
	/* DNS to the gateway, before any drop of private ranges (the
	 * gateway's address is in one). */
	{.m = {{F_IP_DST, EQ, V_GATEWAY},
	       {F_L4PROTO, EQ, V_UDP},
	       {F_DPORT, EQ, V_DNS_PORT}},
	 .verdict = ACCEPT},
	{.m = {{F_IP_DST, EQ, V_GATEWAY},
	       {F_L4PROTO, EQ, V_TCP},
	       {F_DPORT, EQ, V_DNS_PORT}},
	 .verdict = ACCEPT},
	/* DNS over TCP to anyone else never reaches even the gateway's
	 * TCP listener (UDP elsewhere falls to the last rule). */
	{.m = {{F_L4PROTO, EQ, V_TCP}, {F_DPORT, EQ, V_DNS_PORT}},
	 .counter = true,
	 .verdict = DROP},
	{.per_deny = true,
	 .m = {{F_IP_DST, EQ, V_DENY}},
	 .counter = true,
	 .verdict = DROP},
	/* Every other TCP connection: to the gateway's listener. If none
	 * listens, tproxy does not match and the last rule drops. */
	{.m = {{F_L4PROTO, EQ, V_TCP}}, .verdict = TPROXY},
	{.counter = true, .verdict = DROP},
};

static struct nftnl_expr *expr(struct nftnl_rule *r, const char *name,
			       bool *oom)
{
	struct nftnl_expr *e = nftnl_expr_alloc(name);
	if (e == NULL)
		*oom = true;
	else
		nftnl_rule_add_expr(r, e);
	return e;
}

static void e_load(struct nftnl_rule *r, uint8_t f, bool *oom)
{
	struct nftnl_expr *e = expr(r, fields[f].meta ? "meta" : "payload",
				    oom);
	if (e == NULL)
		return;
	if (fields[f].meta) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY,
				   fields[f].base_or_key);
		nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
		return;
	}
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, fields[f].base_or_key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, fields[f].off);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, fields[f].len);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
}

static void e_lookup_mac(struct nftnl_rule *r, bool invert, bool *oom)
{
	struct nftnl_expr *e = expr(r, "lookup", oom);
	if (e == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, AL_NFT_SET_MAC);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, MAC_SET_ID);
	if (invert)
		nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS,
				   NFT_LOOKUP_F_INV);
}

static void e_mask(struct nftnl_rule *r, uint32_t mask_be, bool *oom)
{
	uint32_t zero = 0;
	struct nftnl_expr *e = expr(r, "bitwise", oom);
	if (e == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, 4);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &mask_be, 4);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &zero, 4);
}

static void e_cmp(struct nftnl_rule *r, uint32_t op, const void *data,
		  uint32_t len, bool *oom)
{
	struct nftnl_expr *e = expr(r, "cmp", oom);
	if (e == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
}

static void e_imm(struct nftnl_rule *r, uint32_t dreg, const void *data,
		  uint32_t len, bool *oom)
{
	struct nftnl_expr *e = expr(r, "immediate", oom);
	if (e == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, dreg);
	nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, data, len);
}

static void e_tproxy(struct nftnl_rule *r, uint32_t addr, uint16_t port,
		     bool *oom)
{
	uint32_t a = htonl(addr);
	uint16_t p = htons(port);
	e_imm(r, NFT_REG_1, &a, 4, oom);
	e_imm(r, NFT_REG_2, &p, 2, oom);
	struct nftnl_expr *e = expr(r, "tproxy", oom);
	if (e == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_TPROXY_FAMILY, NFPROTO_IPV4);
	nftnl_expr_set_u32(e, NFTNL_EXPR_TPROXY_REG_ADDR, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_TPROXY_REG_PORT, NFT_REG_2);
}

static void e_verdict(struct nftnl_rule *r, int verdict, bool *oom)
{
	struct nftnl_expr *e = expr(r, "immediate", oom);
	if (e == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
}

/* Value v as a host-order number. */
static uint32_t value_of(uint8_t v, const al_nft_spec *s,
			 const al_net_prefix *deny)
{
	switch ((enum value)v) {
	case V_ETH_ARP:
		return ETH_P_ARP;
	case V_ETH_IP:
		return ETH_P_IP;
	case V_IPV4:
		return NFPROTO_IPV4;
	case V_TCP:
		return IPPROTO_TCP;
	case V_UDP:
		return IPPROTO_UDP;
	case V_DNS_PORT:
		return 53;
	case V_IIF:
		return (uint32_t)s->ifindex;
	case V_GUEST:
		return s->guest;
	case V_GATEWAY:
		return s->gateway;
	case V_DENY:
		return deny->addr;
	case V_NONE:
		break;
	}
	return 0;
}

static void e_match(struct nftnl_rule *r, const match *m, const al_nft_spec *s,
		    const al_net_prefix *deny, bool *oom)
{
	e_load(r, m->field, oom);
	if (m->op == IN_MAC || m->op == NOT_IN_MAC) {
		e_lookup_mac(r, m->op == NOT_IN_MAC, oom);
		return;
	}
	if (m->value == V_DENY && deny->len < 32)
		e_mask(r, htonl(al_net_prefix_mask(deny->len)), oom);
	uint32_t v = value_of(m->value, s, deny), len = fields[m->field].len;
	uint32_t be32 = htonl(v);
	uint16_t be16 = htons((uint16_t)v);
	uint8_t u8 = (uint8_t)v;
	const void *data = len == 1		   ? (const void *)&u8
			   : len == 2		   ? (const void *)&be16
			   : fields[m->field].meta ? (const void *)&v
						   : (const void *)&be32;
	e_cmp(r, m->op == EQ ? NFT_CMP_EQ : NFT_CMP_NEQ, data, len, oom);
}

/* Append one rule built from rs (deny: the never-list entry, for
 * per_deny rules) to the batch. */
static void rule_add(batch *b, const rule_spec *rs, const al_nft_spec *s,
		     const al_net_prefix *deny)
{
	uint16_t family = rs->l2 ? NFPROTO_NETDEV : NFPROTO_INET;
	struct nftnl_rule *r = nftnl_rule_alloc();
	struct nlmsghdr *h = msg(b, NFT_MSG_NEWRULE, family,
				 NLM_F_CREATE | NLM_F_APPEND);
	bool oom = r == NULL || h == NULL;
	if (!oom) {
		nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, family);
		nftnl_rule_set_str(r, NFTNL_RULE_TABLE,
				   rs->l2 ? AL_NFT_TABLE_L2 : AL_NFT_TABLE);
		nftnl_rule_set_str(r, NFTNL_RULE_CHAIN,
				   rs->l2 ? "ingress" : "prerouting");
		for (size_t i = 0; i < 3 && rs->m[i].field != F_NONE; i++)
			e_match(r, &rs->m[i], s, deny, &oom);
		if (rs->counter)
			expr(r, "counter", &oom);
		if (rs->verdict == TPROXY)
			e_tproxy(r, s->gateway, s->tproxy_port, &oom);
		e_verdict(r, rs->verdict == DROP ? NF_DROP : NF_ACCEPT, &oom);
	}
	if (oom) {
		b->oom = true;
	} else {
		nftnl_rule_nlmsg_build_payload(h, r);
		next(b);
	}
	if (r != NULL)
		nftnl_rule_free(r);
}

static void rules_add(batch *b, const al_nft_spec *s, bool l2)
{
	for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
		if (rules[i].l2 != l2)
			continue;
		if (!rules[i].per_deny)
			rule_add(b, &rules[i], s, NULL);
		else
			for (size_t k = 0; k < s->ndeny; k++)
				rule_add(b, &rules[i], s, &s->deny[k]);
	}
}

static int batch_start(batch *b, char *buf, size_t cap, al_err *err)
{
	if (cap < 2 * AL_NL_BUF)
		return al_err_set(err, AL_EINVAL, 0,
				  "nft batch buffer too small");
	/* The batch grows in the first half; the second half is the room
	 * mnl_nlmsg_batch_next needs to tell that a message overran. */
	b->b = mnl_nlmsg_batch_start(buf, cap / 2);
	b->seq = (uint32_t)time(NULL);
	b->oom = b->b == NULL;
	if (!b->oom) {
		nftnl_batch_begin(mnl_nlmsg_batch_current(b->b), b->seq++);
		next(b);
	}
	return 0;
}

static int batch_finish(batch *b, size_t *len, al_err *err)
{
	if (!b->oom) {
		nftnl_batch_end(mnl_nlmsg_batch_current(b->b), b->seq++);
		next(b);
	}
	if (b->oom) {
		if (b->b != NULL)
			mnl_nlmsg_batch_stop(b->b);
		return al_err_set(err, AL_ENOMEM, 0,
				  "building the nft batch ran out of memory "
				  "or room");
	}
	*len = mnl_nlmsg_batch_size(b->b);
	mnl_nlmsg_batch_stop(b->b);
	return 0;
}

int al_nft_build(const al_nft_spec *s, char *buf, size_t cap, size_t *len,
		 al_err *err)
{
	if (s->ifindex <= 0 || s->ifname[0] == '\0' || s->guest == 0 ||
	    s->gateway == 0 || s->tproxy_port == 0)
		return al_err_set(err, AL_EINVAL, 0, "nft: incomplete spec");
	batch b;
	if (batch_start(&b, buf, cap, err) < 0)
		return -1;
	table_add(&b, NFPROTO_NETDEV, AL_NFT_TABLE_L2);
	set_add(&b);
	if (s->mac != NULL)
		set_elem(&b, s->mac);
	chain_add(&b, NFPROTO_NETDEV, AL_NFT_TABLE_L2, "ingress",
		  NF_NETDEV_INGRESS, 0, NF_DROP, s->ifname);
	rules_add(&b, s, true);
	table_add(&b, NFPROTO_INET, AL_NFT_TABLE);
	chain_add(&b, NFPROTO_INET, AL_NFT_TABLE, "prerouting",
		  NF_INET_PRE_ROUTING, -150, NF_ACCEPT, NULL);
	chain_add(&b, NFPROTO_INET, AL_NFT_TABLE, "forward", NF_INET_FORWARD, 0,
		  NF_DROP, NULL);
	rules_add(&b, s, false);
	return batch_finish(&b, len, err);
}

int al_nft_build_mac(const uint8_t mac[6], char *buf, size_t cap, size_t *len,
		     al_err *err)
{
	batch b;
	if (batch_start(&b, buf, cap, err) < 0)
		return -1;
	set_elem(&b, NULL);
	set_elem(&b, mac);
	return batch_finish(&b, len, err);
}

int al_nft_apply(const char *buf, size_t len, al_err *err)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER,
						 SOCK_CLOEXEC);
	if (nl == NULL)
		return al_err_sys(err, AL_ESYS, errno, "netfilter socket");
	int rc = -1;
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		al_err_sys(err, AL_ESYS, errno, "bind netfilter socket");
		goto out;
	}
	if (mnl_socket_sendto(nl, buf, len) < 0) {
		al_err_sys(err, AL_ESYS, errno, "send nft batch");
		goto out;
	}
	/* The kernel handles the batch inside sendto: every answer (an ack
	 * per message, or the error that aborted it) is queued by now. */
	int fd = mnl_socket_get_fd(nl);
	char rbuf[AL_NL_BUF];
	int first_error = 0;
	unsigned acks = 0;
	for (;;) {
		ssize_t n = recv(fd, rbuf, sizeof rbuf, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		int left = (int)n;
		for (const struct nlmsghdr *h = (const void *)rbuf;
		     mnl_nlmsg_ok(h, left); h = mnl_nlmsg_next(h, &left)) {
			if (h->nlmsg_type != NLMSG_ERROR)
				continue;
			const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
			if (e->error == 0)
				acks++;
			else if (first_error == 0)
				first_error = -e->error;
		}
	}
	if (first_error != 0) {
		al_err_sys(err, AL_ESYS, first_error,
			   "nftables refused the slot's rules");
		goto out;
	}
	if (acks == 0) {
		al_err_set(err, AL_EINTERNAL, 0,
			   "nftables answered nothing to the batch");
		goto out;
	}
	rc = 0;
out:
	mnl_socket_close(nl);
	return rc;
}
