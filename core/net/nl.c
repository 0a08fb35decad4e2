/* nl: see nl.h. */
#include "net/nl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"

int al_nl_enter(int target_ns_fd, al_err *err)
{
	int saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (saved < 0)
		return al_err_sys(err, AL_ESYS, errno,
				  "open this thread's network namespace");
	if (setns(target_ns_fd, CLONE_NEWNET) < 0) {
		int e = errno;
		close(saved);
		return al_err_sys(err, AL_ESYS, e,
				  "enter a slot's network namespace");
	}
	return saved;
}

int al_nl_leave(int saved_ns_fd, al_err *err)
{
	int rc = setns(saved_ns_fd, CLONE_NEWNET);
	int e = errno;
	close(saved_ns_fd);
	if (rc < 0)
		return al_err_sys(err, AL_EINTERNAL, e,
				  "cannot return to the caller's network "
				  "namespace");
	return 0;
}

int al_nl_open(al_nl *nl, al_err *err)
{
	nl->sock = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (nl->sock == NULL)
		return al_err_sys(err, AL_ESYS, errno, "rtnetlink socket");
	if (mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
		int e = errno;
		al_nl_close(nl);
		return al_err_sys(err, AL_ESYS, e, "bind rtnetlink socket");
	}
	nl->portid = mnl_socket_get_portid(nl->sock);
	nl->seq = (uint32_t)time(NULL);
	return 0;
}

void al_nl_close(al_nl *nl)
{
	if (nl->sock != NULL)
		mnl_socket_close(nl->sock);
	nl->sock = NULL;
}

/* Send request h and run cb (NULL: none) over the answers until the
 * last one: the ack of a request, the end of a dump. */
static int exchange(al_nl *nl, struct nlmsghdr *h, mnl_cb_t cb, void *data,
		    const char *what, al_err *err)
{
	char buf[AL_NL_BUF];
	h->nlmsg_flags |= NLM_F_REQUEST;
	h->nlmsg_seq = ++nl->seq;
	if (mnl_socket_sendto(nl->sock, h, h->nlmsg_len) < 0)
		return al_err_sys(err, AL_ESYS, errno, "netlink send (%s)",
				  what);
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(nl->sock, buf, sizeof buf);
		if (n < 0)
			return al_err_sys(err, AL_ESYS, errno,
					  "netlink receive (%s)", what);
		int rc = mnl_cb_run(buf, (size_t)n, h->nlmsg_seq, nl->portid,
				    cb, data);
		if (rc < 0)
			return al_err_sys(err, AL_ESYS, errno, "%s", what);
		if (rc == MNL_CB_STOP)
			return 0;
	}
}

/* One change, acknowledged. */
static int talk(al_nl *nl, struct nlmsghdr *h, const char *what, al_err *err)
{
	h->nlmsg_flags |= NLM_F_ACK;
	return exchange(nl, h, NULL, NULL, what, err);
}

int al_nl_veth_add(al_nl *nl, const char *name, const char *peer,
		   int peer_ns_fd, const uint8_t peer_mac[6], al_err *err)
{
	char buf[AL_NL_BUF];
	struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
	h->nlmsg_type = RTM_NEWLINK;
	h->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(h, sizeof *ifi);
	ifi->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(h, IFLA_IFNAME, name);
	struct nlattr *info = mnl_attr_nest_start(h, IFLA_LINKINFO);
	mnl_attr_put_strz(h, IFLA_INFO_KIND, "veth");
	struct nlattr *data = mnl_attr_nest_start(h, IFLA_INFO_DATA);
	struct nlattr *pn = mnl_attr_nest_start(h, VETH_INFO_PEER);
	struct ifinfomsg *pifi = mnl_nlmsg_put_extra_header(h, sizeof *pifi);
	pifi->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(h, IFLA_IFNAME, peer);
	if (peer_ns_fd >= 0)
		mnl_attr_put_u32(h, IFLA_NET_NS_FD, (uint32_t)peer_ns_fd);
	if (peer_mac != NULL)
		mnl_attr_put(h, IFLA_ADDRESS, 6, peer_mac);
	mnl_attr_nest_end(h, pn);
	mnl_attr_nest_end(h, data);
	mnl_attr_nest_end(h, info);
	return talk(nl, h, "create veth", err);
}

int al_nl_link_up(al_nl *nl, int ifindex, al_err *err)
{
	char buf[AL_NL_BUF];
	struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
	h->nlmsg_type = RTM_NEWLINK;
	struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(h, sizeof *ifi);
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = ifindex;
	ifi->ifi_flags = IFF_UP;
	ifi->ifi_change = IFF_UP;
	return talk(nl, h, "set link up", err);
}

int al_nl_addr_add(al_nl *nl, int ifindex, uint32_t addr, int prefix,
		   al_err *err)
{
	char buf[AL_NL_BUF];
	struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
	h->nlmsg_type = RTM_NEWADDR;
	h->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(h, sizeof *ifa);
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (uint8_t)prefix;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (uint32_t)ifindex;
	uint32_t a = htonl(addr);
	mnl_attr_put_u32(h, IFA_LOCAL, a);
	mnl_attr_put_u32(h, IFA_ADDRESS, a);
	if (prefix < 31) {
		uint32_t mask = prefix == 0 ? 0 : ~0u << (32 - prefix);
		mnl_attr_put_u32(h, IFA_BROADCAST, htonl(addr | ~mask));
	}
	return talk(nl, h, "add address", err);
}

int al_nl_route_add(al_nl *nl, int type, uint32_t dst, int prefix, uint32_t gw,
		    int ifindex, al_err *err)
{
	char buf[AL_NL_BUF];
	struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
	h->nlmsg_type = RTM_NEWROUTE;
	h->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	struct rtmsg *rt = mnl_nlmsg_put_extra_header(h, sizeof *rt);
	rt->rtm_family = AF_INET;
	rt->rtm_dst_len = (uint8_t)prefix;
	rt->rtm_table = RT_TABLE_MAIN;
	rt->rtm_protocol = RTPROT_STATIC;
	rt->rtm_type = (uint8_t)type;
	rt->rtm_scope = type == RTN_LOCAL ? RT_SCOPE_HOST
			: gw != 0	  ? RT_SCOPE_UNIVERSE
					  : RT_SCOPE_LINK;
	if (prefix > 0)
		mnl_attr_put_u32(h, RTA_DST, htonl(dst));
	if (gw != 0)
		mnl_attr_put_u32(h, RTA_GATEWAY, htonl(gw));
	mnl_attr_put_u32(h, RTA_OIF, (uint32_t)ifindex);
	return talk(nl, h, "add route", err);
}

typedef struct walk_ctx {
	al_nl_prefix_fn fn;
	void *arg;
	int kind; /* 'r': routes, 'a': addresses */
	int stop;
} walk_ctx;

/* One route or address of a dump: rtmsg and ifaddrmsg differ in size
 * and in the attribute that holds the prefix's address. */
static int walk_one(const struct nlmsghdr *h, void *data)
{
	walk_ctx *w = data;
	bool route = w->kind == 'r';
	size_t hdr = route ? sizeof(struct rtmsg) : sizeof(struct ifaddrmsg);
	if (w->stop || mnl_nlmsg_get_payload_len(h) < hdr)
		return MNL_CB_OK;
	const struct rtmsg *rt = mnl_nlmsg_get_payload(h);
	const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(h);
	int family = route ? rt->rtm_family : ifa->ifa_family;
	int prefix = route ? rt->rtm_dst_len : ifa->ifa_prefixlen;
	/* A default route overlaps everything: not a pool's concern. */
	if (family != AF_INET || (route && prefix == 0))
		return MNL_CB_OK;
	uint16_t type = route ? RTA_DST : IFA_LOCAL;
	const struct nlattr *a;
	mnl_attr_for_each(a, h, hdr)
	{
		if (mnl_attr_get_type(a) == type &&
		    mnl_attr_get_payload_len(a) == 4)
			w->stop = w->fn(w->arg, w->kind,
					ntohl(mnl_attr_get_u32(a)), prefix);
	}
	return MNL_CB_OK;
}

/* Every IPv4 route (kind 'r') or address ('a') of the namespace. */
static int dump(al_nl *nl, walk_ctx *w, al_err *err)
{
	char buf[AL_NL_BUF];
	struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
	h->nlmsg_flags = NLM_F_DUMP;
	if (w->kind == 'r') {
		h->nlmsg_type = RTM_GETROUTE;
		struct rtmsg *rt = mnl_nlmsg_put_extra_header(h, sizeof *rt);
		rt->rtm_family = AF_INET;
	} else {
		h->nlmsg_type = RTM_GETADDR;
		struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(h,
								   sizeof *ifa);
		ifa->ifa_family = AF_INET;
	}
	return exchange(nl, h, walk_one, w,
			w->kind == 'r' ? "dump routes" : "dump addresses", err);
}

int al_nl_ipv4_walk(al_nl *nl, al_nl_prefix_fn fn, void *arg, al_err *err)
{
	walk_ctx w = {.fn = fn, .arg = arg, .kind = 'r'};
	if (dump(nl, &w, err) < 0)
		return -1;
	w.kind = 'a';
	return dump(nl, &w, err);
}

int al_nl_sysctl(const char *key, const char *value, al_err *err)
{
	char path[160];
	int n = snprintf(path, sizeof path, "/proc/sys/%s", key);
	if (n < 0 || (size_t)n >= sizeof path)
		return al_err_set(err, AL_EINVAL, 0, "sysctl key too long");
	al_autofd int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", path);
	size_t len = strlen(value);
	if (write(fd, value, len) != (ssize_t)len)
		return al_err_sys(err, AL_ESYS, errno, "write %s", path);
	return 0;
}
