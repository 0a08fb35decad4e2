/* Fuzz the network frames' unpackers (core/net/netspec.h): GW_CONFIG (what a
 * gateway is told), GW_ACK (what the shim hears from a gateway that may
 * be compromised), NETWORK and its RESULT. Whatever the bytes, an unpack
 * returns 0 with a result within its contract, which packs and unpacks
 * to itself, or -1 with an error. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "net/netspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_netspec(const al_netspec *ns)
{
	if ((unsigned)ns->mode >= AL_NET_MODE_MAX ||
	    ns->n_allow > AL_NETSPEC_LIST_MAX ||
	    ns->n_deny > AL_NETSPEC_LIST_MAX ||
	    (ns->n_allow > 0 && ns->allow[ns->n_allow] != NULL) ||
	    (ns->n_deny > 0 && ns->deny[ns->n_deny] != NULL))
		abort();
	for (size_t i = 0; i < ns->n_allow + ns->n_deny; i++) {
		const char *p = i < ns->n_allow ? ns->allow[i]
						: ns->deny[i - ns->n_allow];
		char canon[AL_NETSPEC_PATTERN_MAX];
		al_err e = {0};
		/* Canonical already: canonicalising changes nothing. */
		if (al_netspec_pattern_canon(p, strlen(p), canon, &e) < 0 ||
		    strcmp(canon, p) != 0)
			abort();
	}
}

static void same_netspec(const al_netspec *a, const al_netspec *b)
{
	if (a->mode != b->mode || a->n_allow != b->n_allow ||
	    a->n_deny != b->n_deny)
		abort();
	for (size_t i = 0; i < a->n_allow; i++)
		if (strcmp(a->allow[i], b->allow[i]) != 0)
			abort();
	for (size_t i = 0; i < a->n_deny; i++)
		if (strcmp(a->deny[i], b->deny[i]) != 0)
			abort();
}

static void fuzz_config(const uint8_t *data, size_t size)
{
	al_gw_config c, again;
	al_err err = {0};
	if (al_gw_config_unpack(data, size, &c, &err) < 0) {
		if (err.code == AL_OK || c.root != NULL)
			abort();
		return;
	}
	if (!al_id_valid(c.sandbox) || !al_id_valid(c.template_name) ||
	    !al_id_valid(c.project) || c.n_metadata > AL_GW_META_MAX)
		abort();
	check_netspec(&c.network);
	char *s = al_gw_config_pack(&c, &err);
	if (s == NULL || al_gw_config_unpack(s, strlen(s), &again, &err) < 0 ||
	    strcmp(again.sandbox, c.sandbox) != 0 ||
	    strcmp(again.gateway, c.gateway) != 0 || again.build != c.build ||
	    again.n_metadata != c.n_metadata)
		abort();
	same_netspec(&c.network, &again.network);
	free(s);
	al_gw_config_free(&again);
	al_gw_config_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_config(data, size);
	al_err err = {0};
	al_gw_ack a;
	if (al_gw_ack_unpack(data, size, &a, &err) == 0) {
		size_t n = strlen(a.error);
		if ((a.ok && n != 0) || (!a.ok && n == 0))
			abort();
		for (size_t i = 0; i < n; i++)
			if (a.error[i] < 0x20 || a.error[i] >= 0x7f)
				abort();
	} else if (err.code == AL_OK) {
		abort();
	}
	al_netspec ns;
	err.code = AL_OK;
	if (al_net_update_unpack(data, size, &ns, &err) == 0) {
		check_netspec(&ns);
		al_netspec_free(&ns);
	} else if (err.code == AL_OK || ns.allow != NULL || ns.deny != NULL) {
		abort();
	}
	bool gw;
	err.code = AL_OK;
	if (al_net_result_unpack(data, size, &gw, &err) < 0 &&
	    err.code == AL_OK)
		abort();
	return 0;
}
