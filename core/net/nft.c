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

/* ---- expressions ---- */

static void add(struct nftnl_rule *r, struct nftnl_expr *e, bool *oom)
{
	if (e == NULL)
		*oom = true;
	else
		nftnl_rule_add_expr(r, e);
}

static void e_meta(struct nftnl_rule *r, uint32_t key, bool *oom)
{
	struct nftnl_expr *e = nftnl_expr_alloc("meta");
	if (e != NULL) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
		nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
	}
	add(r, e, oom);
}

static void e_payload(struct nftnl_rule *r, uint32_t base, uint32_t off,
		      uint32_t len, bool *oom)
{
	struct nftnl_expr *e = nftnl_expr_alloc("payload");
	if (e != NULL) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
	}
	add(r, e, oom);
}

static void e_cmp(struct nftnl_rule *r, uint32_t op, const void *data,
		  uint32_t len, bool *oom)
{
	struct nftnl_expr *e = nftnl_expr_alloc("cmp");
	if (e != NULL) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
		nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
	}
	add(r, e, oom);
}

static void e_mask(struct nftnl_rule *r, uint32_t mask_be, bool *oom)
{
	uint32_t zero = 0;
	struct nftnl_expr *e = nftnl_expr_alloc("bitwise");
	if (e != NULL) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, 4);
		nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &mask_be, 4);
		nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &zero, 4);
	}
	add(r, e, oom);
}

static void e_lookup_mac(struct nftnl_rule *r, bool invert, bool *oom)
{
	struct nftnl_expr *e = nftnl_expr_alloc("lookup");
	if (e != NULL) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
		nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, AL_NFT_SET_MAC);
		nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, MAC_SET_ID);
		if (invert)
			nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS,
					   NFT_LOOKUP_F_INV);
	}
	add(r, e, oom);
}

static void e_imm(struct nftnl_rule *r, uint32_t dreg, const void *data,
		  uint32_t len, bool *oom)
{
	struct nftnl_expr *e = nftnl_expr_alloc("immediate");
	if (e != NULL) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, dreg);
		nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, data, len);
	}
	add(r, e, oom);
}

static void e_tproxy(struct nftnl_rule *r, uint32_t addr, uint16_t port,
		     bool *oom)
{
	uint32_t a = htonl(addr);
	uint16_t p = htons(port);
	e_imm(r, NFT_REG_1, &a, 4, oom);
	e_imm(r, NFT_REG_2, &p, 2, oom);
	struct nftnl_expr *e = nftnl_expr_alloc("tproxy");
	if (e != NULL) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_TPROXY_FAMILY, NFPROTO_IPV4);
		nftnl_expr_set_u32(e, NFTNL_EXPR_TPROXY_REG_ADDR, NFT_REG_1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_TPROXY_REG_PORT, NFT_REG_2);
	}
	add(r, e, oom);
}

static void e_counter(struct nftnl_rule *r, bool *oom)
{
	add(r, nftnl_expr_alloc("counter"), oom);
}

static void e_verdict(struct nftnl_rule *r, int verdict, bool *oom)
{
	struct nftnl_expr *e = nftnl_expr_alloc("immediate");
	if (e != NULL) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
		nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT,
				   (uint32_t)verdict);
	}
	add(r, e, oom);
}

static struct nftnl_rule *rule_new(uint16_t family, const char *table,
				   const char *chain)
{
	struct nftnl_rule *r = nftnl_rule_alloc();
	if (r == NULL)
		return NULL;
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, family);
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, table);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
	return r;
}

/* Append rule r (taking it) to the batch. */
static void rule_put(batch *b, struct nftnl_rule *r, bool oom)
{
	if (r == NULL || oom) {
		b->oom = true;
	} else {
		uint16_t family = (uint16_t)
			nftnl_rule_get_u32(r, NFTNL_RULE_FAMILY);
		struct nlmsghdr *h = msg(b, NFT_MSG_NEWRULE, family,
					 NLM_F_CREATE | NLM_F_APPEND);
		if (h == NULL) {
			b->oom = true;
		} else {
			nftnl_rule_nlmsg_build_payload(h, r);
			next(b);
		}
	}
	if (r != NULL)
		nftnl_rule_free(r);
}

/* ---- the slot's rules ---- */

static void l2_rules(batch *b, const al_nft_spec *s)
{
	uint32_t guest = htonl(s->guest);
	uint16_t arp = htons(ETH_P_ARP), ip = htons(ETH_P_IP);
	bool oom = false;
	struct nftnl_rule *r;

	/* Another source MAC: drop (also while no MAC is set yet). */
	r = rule_new(NFPROTO_NETDEV, AL_NFT_TABLE_L2, "ingress");
	if (r != NULL) {
		e_payload(r, NFT_PAYLOAD_LL_HEADER, 6, 6, &oom);
		e_lookup_mac(r, true, &oom);
		e_counter(r, &oom);
		e_verdict(r, NF_DROP, &oom);
	}
	rule_put(b, r, oom);

	/* ARP: only the guest's own MAC and address as its sender, so it
	 * cannot claim another address on the link. */
	oom = false;
	r = rule_new(NFPROTO_NETDEV, AL_NFT_TABLE_L2, "ingress");
	if (r != NULL) {
		e_payload(r, NFT_PAYLOAD_LL_HEADER, 12, 2, &oom);
		e_cmp(r, NFT_CMP_EQ, &arp, 2, &oom);
		e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 8, 6, &oom);
		e_lookup_mac(r, false, &oom);
		e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 14, 4, &oom);
		e_cmp(r, NFT_CMP_EQ, &guest, 4, &oom);
		e_verdict(r, NF_ACCEPT, &oom);
	}
	rule_put(b, r, oom);

	/* IPv4 from the guest's address; anything else hits the policy. */
	oom = false;
	r = rule_new(NFPROTO_NETDEV, AL_NFT_TABLE_L2, "ingress");
	if (r != NULL) {
		e_payload(r, NFT_PAYLOAD_LL_HEADER, 12, 2, &oom);
		e_cmp(r, NFT_CMP_EQ, &ip, 2, &oom);
		e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 12, 4, &oom);
		e_cmp(r, NFT_CMP_EQ, &guest, 4, &oom);
		e_verdict(r, NF_ACCEPT, &oom);
	}
	rule_put(b, r, oom);
}

static void dns_rule(batch *b, const al_nft_spec *s, uint8_t proto)
{
	uint32_t gw = htonl(s->gateway);
	uint16_t port = htons(53);
	bool oom = false;
	struct nftnl_rule *r = rule_new(NFPROTO_INET, AL_NFT_TABLE,
					"prerouting");
	if (r != NULL) {
		e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4, &oom);
		e_cmp(r, NFT_CMP_EQ, &gw, 4, &oom);
		e_meta(r, NFT_META_L4PROTO, &oom);
		e_cmp(r, NFT_CMP_EQ, &proto, 1, &oom);
		e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, &oom);
		e_cmp(r, NFT_CMP_EQ, &port, 2, &oom);
		e_verdict(r, NF_ACCEPT, &oom);
	}
	rule_put(b, r, oom);
}

static void l3_rules(batch *b, const al_nft_spec *s)
{
	uint32_t iif = (uint32_t)s->ifindex;
	uint8_t v4 = NFPROTO_IPV4, tcp = IPPROTO_TCP;
	uint32_t guest = htonl(s->guest);
	bool oom = false;
	struct nftnl_rule *r;

	/* Only the guest's link is filtered here (lo is the gateway's). */
	r = rule_new(NFPROTO_INET, AL_NFT_TABLE, "prerouting");
	if (r != NULL) {
		e_meta(r, NFT_META_IIF, &oom);
		e_cmp(r, NFT_CMP_NEQ, &iif, 4, &oom);
		e_verdict(r, NF_ACCEPT, &oom);
	}
	rule_put(b, r, oom);

	oom = false;
	r = rule_new(NFPROTO_INET, AL_NFT_TABLE, "prerouting");
	if (r != NULL) {
		e_meta(r, NFT_META_NFPROTO, &oom);
		e_cmp(r, NFT_CMP_NEQ, &v4, 1, &oom);
		e_counter(r, &oom);
		e_verdict(r, NF_DROP, &oom);
	}
	rule_put(b, r, oom);

	/* The L2 chain checked this already; a second check costs one
	 * compare and holds if that chain is ever bypassed. */
	oom = false;
	r = rule_new(NFPROTO_INET, AL_NFT_TABLE, "prerouting");
	if (r != NULL) {
		e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 12, 4, &oom);
		e_cmp(r, NFT_CMP_NEQ, &guest, 4, &oom);
		e_counter(r, &oom);
		e_verdict(r, NF_DROP, &oom);
	}
	rule_put(b, r, oom);

	dns_rule(b, s, IPPROTO_UDP);
	dns_rule(b, s, IPPROTO_TCP);

	/* DNS over TCP to anyone else never reaches even the gateway's
	 * TCP listener (UDP elsewhere falls to the last rule). */
	uint16_t dns = htons(53);
	oom = false;
	r = rule_new(NFPROTO_INET, AL_NFT_TABLE, "prerouting");
	if (r != NULL) {
		e_meta(r, NFT_META_L4PROTO, &oom);
		e_cmp(r, NFT_CMP_EQ, &tcp, 1, &oom);
		e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, &oom);
		e_cmp(r, NFT_CMP_EQ, &dns, 2, &oom);
		e_counter(r, &oom);
		e_verdict(r, NF_DROP, &oom);
	}
	rule_put(b, r, oom);

	for (size_t i = 0; i < s->ndeny; i++) {
		uint32_t mask = htonl(al_net_prefix_mask(s->deny[i].len));
		uint32_t net = htonl(s->deny[i].addr);
		oom = false;
		r = rule_new(NFPROTO_INET, AL_NFT_TABLE, "prerouting");
		if (r != NULL) {
			e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4, &oom);
			if (s->deny[i].len < 32)
				e_mask(r, mask, &oom);
			e_cmp(r, NFT_CMP_EQ, &net, 4, &oom);
			e_counter(r, &oom);
			e_verdict(r, NF_DROP, &oom);
		}
		rule_put(b, r, oom);
	}

	/* Every other TCP connection: to the gateway's listener. If none
	 * listens, tproxy does not match and the last rule drops. */
	oom = false;
	r = rule_new(NFPROTO_INET, AL_NFT_TABLE, "prerouting");
	if (r != NULL) {
		e_meta(r, NFT_META_L4PROTO, &oom);
		e_cmp(r, NFT_CMP_EQ, &tcp, 1, &oom);
		e_tproxy(r, s->gateway, s->tproxy_port, &oom);
		e_verdict(r, NF_ACCEPT, &oom);
	}
	rule_put(b, r, oom);

	oom = false;
	r = rule_new(NFPROTO_INET, AL_NFT_TABLE, "prerouting");
	if (r != NULL) {
		e_counter(r, &oom);
		e_verdict(r, NF_DROP, &oom);
	}
	rule_put(b, r, oom);
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
	l2_rules(&b, s);
	table_add(&b, NFPROTO_INET, AL_NFT_TABLE);
	chain_add(&b, NFPROTO_INET, AL_NFT_TABLE, "prerouting",
		  NF_INET_PRE_ROUTING, -150, NF_ACCEPT, NULL);
	chain_add(&b, NFPROTO_INET, AL_NFT_TABLE, "forward", NF_INET_FORWARD, 0,
		  NF_DROP, NULL);
	l3_rules(&b, s);
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
