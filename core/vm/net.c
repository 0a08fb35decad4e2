/* vmnet: a vm sandbox's MAC address, derived from its id (vm/net.h). */
#include "vm/net.h"

#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/config.h"
#include "net/slot.h"

int al_vm_mac_for_id(const char *sandbox_id, uint8_t mac[6], al_err *err)
{
	if (mac == NULL || !al_id_valid(sandbox_id))
		return al_err_set(err, AL_EINVAL, 0, "invalid sandbox id");
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (EVP_Digest(sandbox_id, strlen(sandbox_id), md, &mdlen, EVP_sha256(),
		       NULL) != 1 ||
	    mdlen < 5)
		return al_err_set(err, AL_EINTERNAL, 0,
				  "SHA-256 of the sandbox id failed");
	/* Locally administered (bit 1) and unicast (bit 0 clear): never a
	 * vendor's address, never a multicast group. */
	mac[0] = 0x02;
	memcpy(mac + 1, md, 5);
	return 0;
}

void al_vm_mac_format(const uint8_t mac[6], char out[AL_VM_MAC_STRLEN])
{
	snprintf(out, AL_VM_MAC_STRLEN, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0],
		 mac[1], mac[2], mac[3], mac[4], mac[5]);
}

void al_vm_net_format(const struct al_netslot *s, char out[AL_VM_NET_STRLEN])
{
	if (s == NULL) {
		snprintf(out, AL_VM_NET_STRLEN, "none");
		return;
	}
	char addr[AL_NET_ADDR_STRLEN], gw[AL_NET_ADDR_STRLEN];
	al_net_addr_format(s->addr.guest, addr);
	al_net_addr_format(s->addr.gateway, gw);
	snprintf(out, AL_VM_NET_STRLEN, "%s/%d,%s", addr, AL_NET_SLOT_PREFIX,
		 gw);
}
