/* nic: see nic.h. */
#include "nic.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if_arp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int hexdigit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

bool al_nic_mac_parse(const char *s, uint8_t mac[6])
{
	if (strlen(s) != 17)
		return false;
	for (int i = 0; i < 6; i++) {
		int hi = hexdigit(s[3 * i]), lo = hexdigit(s[3 * i + 1]);
		if (hi < 0 || lo < 0 || (i < 5 && s[3 * i + 2] != ':'))
			return false;
		mac[i] = (uint8_t)(hi << 4 | lo);
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

bool al_nic_find(char name[IF_NAMESIZE])
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

int al_nic_set_mac(const char *name, const uint8_t mac[6], const char **step)
{
	*step = "socket";
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
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
