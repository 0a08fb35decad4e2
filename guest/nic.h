/* nic: the vm's network card as the guest init and the agent see it.
 *
 * The host names the MAC a sandbox's NIC must have (core/vm/net.h): the
 * init applies it on GO, the agent on IDENTITY when a standby is claimed.
 * Compiled into both static programs. */
#ifndef AL_GUEST_NIC_H
#define AL_GUEST_NIC_H

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>

/* "xx:xx:xx:xx:xx:xx", lowercase hex, exactly 17 characters, a unicast
 * address that is not all zeros: the only form the host sends. */
bool agent_nic_mac_parse(const char *s, uint8_t mac[6]);

/* The virtio-net interface with the lowest ifindex (the machine has one;
 * without udev the kernel calls it eth0). */
bool agent_nic_find(char name[IF_NAMESIZE]);

/* The NIC's network as the host gives it (GO line, IDENTITY "net"):
 * "a.b.c.d/len,g.g.g.g" (the sandbox's address and prefix, 8..30, and
 * its gateway, another host of the same prefix), or "none": no network,
 * the NIC stays down. Addresses in host order. */
#define AL_NIC_NET_STRLEN 40
typedef struct al_nic_net {
	bool on;
	uint32_t addr, gateway;
	int prefix;
} al_nic_net;
bool agent_nic_net_parse(const char *s, al_nic_net *n);

/* Interface name up with n's address, a default route via the gateway
 * (again: taking the link down for a MAC change drops it) and
 * /etc/resolv.conf naming the gateway, its only resolver. Nothing for
 * "none". -1 with errno, *step naming what failed. */
int agent_nic_net_apply(const char *name, const al_nic_net *n,
			const char **step);

/* Interface name up (the init's lo). -1 with errno and *step. */
int agent_nic_up(const char *name, const char **step);

/* Give interface name the MAC with its link down (taken down and brought
 * back up if something raised it) and read it back. -1 with errno, and
 * *step naming what failed. */
int agent_nic_set_mac(const char *name, const uint8_t mac[6],
		      const char **step);

#endif
