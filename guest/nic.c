/* nic: see nic.h. */
#include "nic.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if_arp.h>
#include <net/route.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/hex.h"

bool agent_nic_mac_parse(const char *s, uint8_t mac[6])
{
	if (strlen(s) != 17)
		return false;
	for (int i = 0; i < 6; i++) {
		if (al_hex_decode_lower(s + 3 * i, 1, &mac[i]) < 0 ||
		    (i < 5 && s[3 * i + 2] != ':'))
			return false;
	}
	if (mac[0] & 0x01)
		return false;
	for (int i = 0; i < 6; i++)
		if (mac[i] != 0)
			return true;
	return false;
}

static long ifindex_of(const char *name)
{
	char p[96], idx[24];
	snprintf(p, sizeof p, "/sys/class/net/%s/ifindex", name);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, idx, sizeof idx - 1);
	close(fd);
	if (n <= 0)
		return -1;
	idx[n] = '\0';
	return strtol(idx, NULL, 10);
}

bool agent_nic_find(char name[IF_NAMESIZE])
{
	DIR *d = opendir("/sys/class/net");
	if (d == NULL)
		return false;
	long best = -1;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' || strlen(e->d_name) >= IF_NAMESIZE)
			continue;
		char p[96], drv[128];
		snprintf(p, sizeof p, "/sys/class/net/%s/device/driver",
			 e->d_name);
		ssize_t n = readlink(p, drv, sizeof drv - 1);
		if (n <= 0)
			continue;
		drv[n] = '\0';
		const char *base = strrchr(drv, '/');
		if (strcmp(base != NULL ? base + 1 : drv, "virtio_net") != 0)
			continue;
		long i = ifindex_of(e->d_name);
		if (i > 0 && (best < 0 || i < best)) {
			best = i;
			snprintf(name, IF_NAMESIZE, "%s", e->d_name);
		}
	}
	closedir(d);
	return best > 0;
}

/* A socket for interface ioctls and ifr naming the interface, or -1. */
static int nic_socket(const char *name, struct ifreq *ifr, const char **step)
{
	*step = "socket";
	memset(ifr, 0, sizeof *ifr);
	snprintf(ifr->ifr_name, sizeof ifr->ifr_name, "%s", name);
	return socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

int agent_nic_set_mac(const char *name, const uint8_t mac[6], const char **step)
{
	struct ifreq ifr;
	int s = nic_socket(name, &ifr, step);
	if (s < 0)
		return -1;
	*step = "reading its flags";
	int rc = ioctl(s, SIOCGIFFLAGS, &ifr);
	short flags = ifr.ifr_flags;
	if (rc == 0 && (flags & IFF_UP)) {
		*step = "taking it down";
		ifr.ifr_flags = (short)(flags & ~IFF_UP);
		rc = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	if (rc == 0) {
		*step = "setting the MAC";
		ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
		memcpy(ifr.ifr_hwaddr.sa_data, mac, 6);
		rc = ioctl(s, SIOCSIFHWADDR, &ifr);
	}
	if (rc == 0 && (flags & IFF_UP)) {
		*step = "bringing it up";
		ifr.ifr_flags = flags;
		rc = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	if (rc == 0) {
		*step = "reading the MAC back";
		memset(&ifr.ifr_hwaddr, 0, sizeof ifr.ifr_hwaddr);
		rc = ioctl(s, SIOCGIFHWADDR, &ifr);
		if (rc == 0 && memcmp(ifr.ifr_hwaddr.sa_data, mac, 6) != 0) {
			errno = EIO;
			rc = -1;
		}
	}
	int e = errno;
	close(s);
	errno = e;
	return rc;
}

static bool addr_parse(const char *s, size_t len, uint32_t *out)
{
	char buf[16];
	struct in_addr a;
	if (len == 0 || len >= sizeof buf)
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (inet_pton(AF_INET, buf, &a) != 1)
		return false;
	*out = ntohl(a.s_addr);
	return true;
}

bool agent_nic_net_parse(const char *s, al_nic_net *n)
{
	memset(n, 0, sizeof n[0]);
	if (strcmp(s, "none") == 0)
		return true;
	const char *slash = strchr(s, '/'), *comma = strchr(s, ',');
	if (slash == NULL || comma == NULL || comma < slash ||
	    !addr_parse(s, (size_t)(slash - s), &n->addr) ||
	    !addr_parse(comma + 1, strlen(comma + 1), &n->gateway))
		return false;
	int p = 0, digits = 0;
	for (const char *c = slash + 1; c < comma; c++) {
		if (*c < '0' || *c > '9' || ++digits > 2)
			return false;
		p = p * 10 + (*c - '0');
	}
	if (digits == 0 || p < 8 || p > 30)
		return false;
	uint32_t mask = ~0u << (32 - p);
	uint32_t host = n->addr & ~mask, ghost = n->gateway & ~mask;
	/* Two distinct hosts of one prefix, neither its network nor its
	 * broadcast address. */
	if ((n->addr & mask) != (n->gateway & mask) || n->addr == n->gateway ||
	    host == 0 || host == ~mask || ghost == 0 || ghost == ~mask)
		return false;
	n->prefix = p;
	n->on = true;
	return true;
}

static void sin_set(struct sockaddr *sa, uint32_t addr)
{
	struct sockaddr_in *in = (struct sockaddr_in *)(void *)sa;
	memset(in, 0, sizeof *in);
	in->sin_family = AF_INET;
	in->sin_addr.s_addr = htonl(addr);
}

static int resolv_write(uint32_t gateway)
{
	char text[48];
	struct in_addr a = {.s_addr = htonl(gateway)};
	char gw[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &a, gw, sizeof gw);
	int n = snprintf(text, sizeof text, "nameserver %s\n", gw);
	/* Whatever the image had (a symlink to a stub resolver's file
	 * included) goes: the gateway is the only resolver reachable. */
	if (unlink("/etc/resolv.conf") < 0 && errno != ENOENT)
		return -1;
	int fd = open("/etc/resolv.conf",
		      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		      0644);
	if (fd < 0)
		return -1;
	int rc = write(fd, text, (size_t)n) == n ? 0 : -1;
	int e = errno;
	close(fd);
	errno = e;
	return rc;
}

static int link_up(int s, struct ifreq *ifr, const char **step)
{
	*step = "bringing it up";
	int rc = ioctl(s, SIOCGIFFLAGS, ifr);
	ifr->ifr_flags |= IFF_UP | IFF_RUNNING;
	return rc == 0 ? ioctl(s, SIOCSIFFLAGS, ifr) : rc;
}

int agent_nic_up(const char *name, const char **step)
{
	struct ifreq ifr;
	int s = nic_socket(name, &ifr, step);
	if (s < 0)
		return -1;
	int rc = link_up(s, &ifr, step);
	int e = errno;
	close(s);
	errno = e;
	return rc;
}

int agent_nic_net_apply(const char *name, const al_nic_net *n,
			const char **step)
{
	if (!n->on)
		return 0;
	struct ifreq ifr;
	int s = nic_socket(name, &ifr, step);
	if (s < 0)
		return -1;
	*step = "setting the address";
	sin_set(&ifr.ifr_addr, n->addr);
	int rc = ioctl(s, SIOCSIFADDR, &ifr);
	if (rc == 0) {
		*step = "setting the netmask";
		sin_set(&ifr.ifr_netmask, ~0u << (32 - n->prefix));
		rc = ioctl(s, SIOCSIFNETMASK, &ifr);
	}
	if (rc == 0)
		rc = link_up(s, &ifr, step);
	if (rc == 0) {
		*step = "adding the default route";
		struct rtentry rt;
		memset(&rt, 0, sizeof rt);
		sin_set(&rt.rt_dst, 0);
		sin_set(&rt.rt_genmask, 0);
		sin_set(&rt.rt_gateway, n->gateway);
		rt.rt_flags = RTF_UP | RTF_GATEWAY;
		rt.rt_dev = ifr.ifr_name;
		rc = ioctl(s, SIOCADDRT, &rt);
		if (rc < 0 && errno == EEXIST)
			rc = 0;
	}
	int e = errno;
	close(s);
	errno = e;
	if (rc == 0) {
		*step = "writing /etc/resolv.conf";
		rc = resolv_write(n->gateway);
	}
	return rc;
}
