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
bool al_nic_mac_parse(const char *s, uint8_t mac[6]);

/* The virtio-net interface with the lowest ifindex (the machine has one;
 * without udev the kernel calls it eth0). */
bool al_nic_find(char name[IF_NAMESIZE]);

/* Give interface name the MAC with its link down (taken down and brought
 * back up if something raised it) and read it back. -1 with errno, and
 * *step naming what failed. */
int al_nic_set_mac(const char *name, const uint8_t mac[6], const char **step);

#endif
