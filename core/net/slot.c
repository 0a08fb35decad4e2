/* slot: see slot.h. */
#include "net/slot.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "net/nft.h"
#include "net/nl.h"

#define TAP_FLAGS (IFF_TAP | IFF_NO_PI)

const char *al_netslot_kind_name(al_netslot_kind kind)
{
	return kind == AL_NETSLOT_VM ? "vm" : "ns";
}

static int slot_path(char *out, const char *dir, uint32_t index,
		     const char *suffix, al_err *err)
{
	int n = snprintf(out, AL_PATH_MAX, "%s/%u.%s", dir, index, suffix);
	if (n < 0 || n >= AL_PATH_MAX)
		return al_err_set(err, AL_EINVAL, 0,
				  "slot path under %.200s is too long", dir);
	return 0;
}

static void slot_init(al_netslot *s, uint32_t index, al_netslot_kind kind,
		      const al_net_slot_addr *addr)
{
	memset(s, 0, sizeof *s);
	s->index = index;
	s->kind = kind;
	s->addr = *addr;
	s->gw_fd = -1;
	s->guest_fd = -1;
}

/* A new network namespace, bind-mounted at path (made here), and an fd
 * on it. The calling thread is back in its own namespace on return. */
static int netns_make(const char *path, int *fd, al_err *err)
{
	*fd = -1;
	int f = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (f < 0)
		return al_err_sys(err, AL_ESYS, errno, "create %s", path);
	close(f);
	al_autofd int saved = open("/proc/thread-self/ns/net",
				   O_RDONLY | O_CLOEXEC);
	if (saved < 0) {
		al_err_sys(err, AL_ESYS, errno, "open this thread's netns");
		goto fail;
	}
	if (unshare(CLONE_NEWNET) < 0) {
		al_err_sys(err, AL_ESYS, errno, "new network namespace");
		goto fail;
	}
	int rc = mount("/proc/thread-self/ns/net", path, NULL, MS_BIND, NULL);
	int e = errno;
	if (rc == 0) {
		*fd = open(path, O_RDONLY | O_CLOEXEC);
		e = errno;
	}
	if (setns(saved, CLONE_NEWNET) < 0) {
		/* The thread must never go on in a sandbox's namespace. */
		al_err_sys(err, AL_EINTERNAL, errno,
			   "cannot return from a new network namespace");
		goto fail;
	}
	if (rc < 0) {
		al_err_sys(err, AL_ESYS, e, "bind-mount netns at %s", path);
		goto fail;
	}
	if (*fd < 0) {
		al_err_sys(err, AL_ESYS, e, "open %s", path);
		goto fail;
	}
	return 0;
fail:
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	umount2(path, MNT_DETACH);
	unlink(path);
	return -1;
}

/* In the current namespace: no IPv6 on any link now or later, no
 * forwarding, lo up. */
static int ns_basics(al_nl *nl, al_err *err)
{
	if (al_nl_sysctl("net/ipv6/conf/all/disable_ipv6", "1", err) < 0 ||
	    al_nl_sysctl("net/ipv6/conf/default/disable_ipv6", "1", err) < 0 ||
	    al_nl_sysctl("net/ipv4/ip_forward", "0", err) < 0)
		return -1;
	return al_nl_link_up(nl, (int)if_nametoindex("lo"), err);
}

static int ifindex_of(const char *name, al_err *err)
{
	unsigned idx = if_nametoindex(name);
	if (idx == 0)
		return al_err_sys(err, AL_ESYS, errno, "find link %s", name);
	return (int)idx;
}

/* The ns sandbox's side, in its namespace: eth0 with its address, up,
 * default route via the gateway. */
static int guest_side(const al_netslot *s, al_err *err)
{
	int saved = al_nl_enter(s->guest_fd, err);
	if (saved < 0)
		return -1;
	al_nl nl = {0};
	int rc = -1;
	if (al_nl_open(&nl, err) < 0)
		goto out;
	int idx = ifindex_of(AL_NETSLOT_GUEST_IF, err);
	if (idx < 0 ||
	    al_nl_addr_add(&nl, idx, s->addr.guest, AL_NET_SLOT_PREFIX, err) <
		    0 ||
	    al_nl_link_up(&nl, idx, err) < 0 ||
	    al_nl_route_add(&nl, RTN_UNICAST, 0, 0, s->addr.gateway, idx, err) <
		    0)
		goto out;
	rc = 0;
out:
	al_nl_close(&nl);
	if (al_nl_leave(saved, rc < 0 ? NULL : err) < 0)
		rc = -1;
	return rc;
}

static int guest_basics(const al_netslot *s, al_err *err)
{
	int saved = al_nl_enter(s->guest_fd, err);
	if (saved < 0)
		return -1;
	al_nl nl = {0};
	int rc = al_nl_open(&nl, err);
	if (rc == 0)
		rc = ns_basics(&nl, err);
	al_nl_close(&nl);
	if (al_nl_leave(saved, rc < 0 ? NULL : err) < 0)
		rc = -1;
	return rc;
}

static int tap_make(void)
{
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	ifr.ifr_flags = TAP_FLAGS;
	memcpy(ifr.ifr_name, AL_NETSLOT_LINK, sizeof AL_NETSLOT_LINK);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* The slot's side, in its namespace: the link, the gateway's address,
 * AnyIP, the rules. */
static int gw_side(al_netslot *s, const al_netslot_spec *spec, al_err *err)
{
	int saved = al_nl_enter(s->gw_fd, err);
	if (saved < 0)
		return -1;
	al_nl nl = {0};
	int rc = -1;
	al_autofree char *batch = NULL;
	if (al_nl_open(&nl, err) < 0 || ns_basics(&nl, err) < 0)
		goto out;
	if (s->kind == AL_NETSLOT_NS) {
		if (al_nl_veth_add(&nl, AL_NETSLOT_LINK, AL_NETSLOT_GUEST_IF,
				   s->guest_fd, s->addr.guest_mac, err) < 0)
			goto out;
	} else {
		/* Persistent: it outlives this fd until the namespace
		 * goes; QEMU attaches through al_netslot_tap_open. */
		al_autofd int tap = tap_make();
		if (tap < 0 || ioctl(tap, TUNSETPERSIST, 1) < 0) {
			al_err_sys(err, AL_ESYS, errno, "create tap %s",
				   AL_NETSLOT_LINK);
			goto out;
		}
	}
	s->ifindex = ifindex_of(AL_NETSLOT_LINK, err);
	if (s->ifindex < 0 ||
	    al_nl_addr_add(&nl, s->ifindex, s->addr.gateway, AL_NET_SLOT_PREFIX,
			   err) < 0 ||
	    al_nl_link_up(&nl, s->ifindex, err) < 0 ||
	    al_nl_route_add(&nl, RTN_LOCAL, 0, 0, 0, (int)if_nametoindex("lo"),
			    err) < 0)
		goto out;
	al_nft_spec ns = {
		.ifindex = s->ifindex,
		.guest = s->addr.guest,
		.gateway = s->addr.gateway,
		.tproxy_port = AL_NFT_TPROXY_PORT,
		.mac = s->kind == AL_NETSLOT_NS ? s->addr.guest_mac : NULL,
		.deny = spec->deny,
		.ndeny = spec->ndeny,
	};
	memcpy(ns.ifname, AL_NETSLOT_LINK, sizeof AL_NETSLOT_LINK);
	size_t len;
	batch = malloc(AL_NFT_BATCH_MAX);
	if (batch == NULL) {
		al_err_set(err, AL_ENOMEM, 0, "nft batch");
		goto out;
	}
	if (al_nft_build(&ns, batch, AL_NFT_BATCH_MAX, &len, err) < 0 ||
	    al_nft_apply(batch, len, err) < 0)
		goto out;
	rc = 0;
out:
	al_nl_close(&nl);
	if (al_nl_leave(saved, rc < 0 ? NULL : err) < 0)
		rc = -1;
	return rc;
}

int al_netslot_create(const al_netslot_spec *spec, al_netslot *s, al_err *err)
{
	slot_init(s, spec->index, spec->kind, &spec->addr);
	if (slot_path(s->gw_path, spec->dir, spec->index, "gw", err) < 0)
		return -1;
	if (spec->kind == AL_NETSLOT_NS &&
	    slot_path(s->guest_path, spec->dir, spec->index, "guest", err) < 0)
		return -1;
	if (netns_make(s->gw_path, &s->gw_fd, err) < 0)
		goto fail;
	if (spec->kind == AL_NETSLOT_NS &&
	    (netns_make(s->guest_path, &s->guest_fd, err) < 0 ||
	     guest_basics(s, err) < 0))
		goto fail;
	if (gw_side(s, spec, err) < 0)
		goto fail;
	if (spec->kind == AL_NETSLOT_NS && guest_side(s, err) < 0)
		goto fail;
	return 0;
fail:
	al_err_wrap(err, "network slot %u", spec->index);
	al_netslot_close(s);
	al_netslot_remove(spec->dir, spec->index);
	return -1;
}

int al_netslot_open(const char *dir, uint32_t index, al_netslot_kind kind,
		    const al_net_slot_addr *addr, int ifindex, al_netslot *s,
		    al_err *err)
{
	slot_init(s, index, kind, addr);
	if (slot_path(s->gw_path, dir, index, "gw", err) < 0 ||
	    (kind == AL_NETSLOT_NS &&
	     slot_path(s->guest_path, dir, index, "guest", err) < 0))
		return -1;
	s->gw_fd = open(s->gw_path, O_RDONLY | O_CLOEXEC);
	if (s->gw_fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", s->gw_path);
	if (kind == AL_NETSLOT_NS) {
		s->guest_fd = open(s->guest_path, O_RDONLY | O_CLOEXEC);
		if (s->guest_fd < 0) {
			al_err_sys(err, AL_ESYS, errno, "open %s",
				   s->guest_path);
			al_netslot_close(s);
			return -1;
		}
	}
	s->ifindex = ifindex;
	return 0;
}

void al_netslot_close(al_netslot *s)
{
	if (s->gw_fd >= 0)
		close(s->gw_fd);
	if (s->guest_fd >= 0)
		close(s->guest_fd);
	s->gw_fd = -1;
	s->guest_fd = -1;
}

void al_netslot_remove(const char *dir, uint32_t index)
{
	static const char *const parts[] = {"gw", "guest"};
	for (size_t i = 0; i < 2; i++) {
		char path[AL_PATH_MAX];
		if (slot_path(path, dir, index, parts[i], NULL) < 0)
			continue;
		umount2(path, MNT_DETACH);
		unlink(path);
	}
}

int al_netslot_socket(const al_netslot *s, int domain, int type, int proto,
		      al_err *err)
{
	int saved = al_nl_enter(s->gw_fd, err);
	if (saved < 0)
		return -1;
	int fd = socket(domain, type | SOCK_CLOEXEC, proto);
	int e = errno;
	if (al_nl_leave(saved, err) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, e, "socket in slot %u",
				  s->index);
	return fd;
}

int al_netslot_tap_open(const al_netslot *s, al_err *err)
{
	if (s->kind != AL_NETSLOT_VM)
		return al_err_set(err, AL_EINVAL, 0,
				  "slot %u is an ns slot: it has no tap",
				  s->index);
	int saved = al_nl_enter(s->gw_fd, err);
	if (saved < 0)
		return -1;
	int fd = tap_make();
	int e = errno;
	if (al_nl_leave(saved, err) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, e,
				  "attach to the tap of slot %u", s->index);
	return fd;
}

int al_netslot_set_mac(const al_netslot *s, const uint8_t mac[6], al_err *err)
{
	char buf[AL_NFT_MAC_BATCH_MAX];
	size_t len;
	if (al_nft_build_mac(mac, buf, sizeof buf, &len, err) < 0)
		return -1;
	int saved = al_nl_enter(s->gw_fd, err);
	if (saved < 0)
		return -1;
	int rc = al_nft_apply(buf, len, err);
	if (al_nl_leave(saved, rc < 0 ? NULL : err) < 0)
		rc = -1;
	return rc;
}
