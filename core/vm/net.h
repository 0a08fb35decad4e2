/* vmnet: a vm sandbox's network identity.
 *
 * Every vm sandbox has one virtio-net NIC. Its MAC address is derived
 * from the sandbox id, so anything on the host that knows the id (the
 * API, the egress gateway validating a sandbox's source MAC) computes
 * the same address without storing it: byte 0 is 0x02 (locally
 * administered, unicast), bytes 1-5 are the first 5 bytes of
 * SHA-256(id).
 *
 * QEMU's own mac= property is AL_VM_TEMPLATE_MAC for every machine (the
 * device set of a template and its clones must match); the guest sets
 * the sandbox's address itself (guest/init/init.c on GO, the agent on
 * IDENTITY). */
#ifndef AL_VMNET_H
#define AL_VMNET_H

#include <stdint.h>

#include "base/err.h"

struct al_netslot;

/* The MAC QEMU gives the NIC, and the one a template snapshot holds. */
#define AL_VM_TEMPLATE_MAC "52:54:00:12:34:56"
/* "xx:xx:xx:xx:xx:xx" plus the terminating NUL. */
#define AL_VM_MAC_STRLEN 18

/* The MAC of sandbox sandbox_id (al_id_valid()); AL_EINVAL otherwise. */
int al_vm_mac_for_id(const char *sandbox_id, uint8_t mac[6], al_err *err);

/* "02:ab:cd:ef:01:23": lowercase hex, colon separated, NUL terminated. */
void al_vm_mac_format(const uint8_t mac[6], char out[AL_VM_MAC_STRLEN]);

/* The guest's network in the form the GO line and IDENTITY carry
 * (guest/nic.h): "<sandbox addr>/<prefix>,<gateway>" of slot s, or
 * "none" without one. */
#define AL_VM_NET_STRLEN 40
void al_vm_net_format(const struct al_netslot *s, char out[AL_VM_NET_STRLEN]);

#endif
