/* shim net: the sandbox's network slot (net.h). */
#include "net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "net/netspec.h"

void shim_net_init(shim_net *n)
{
	memset(n, 0, sizeof *n);
	n->lease.lock_fd = -1;
	n->lease.slot.gw_fd = -1;
	n->lease.slot.guest_fd = -1;
}

int shim_net_wanted(const al_sandbox *sb)
{
	/* The sandbox's mode (the API's "network", canonical in the spec);
	 * none given is the default, allowlist. */
	json_object *mode = NULL;
	if (sb->network != NULL &&
	    json_object_object_get_ex(sb->network, "mode", &mode) &&
	    json_object_is_type(mode, json_type_string))
		return al_net_mode_from_name(json_object_get_string(mode)) !=
		       AL_NET_NONE;
	return 1;
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) * 1e3 +
	       (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

int shim_net_lease(shim_net *n, const al_config *cfg, int kind, al_err *err)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!n->pool_open) {
		if (al_netpool_open(&n->pool, cfg->state_dir, cfg->net_pool,
				    err) < 0) {
			al_err_wrap(err, "network slots");
			return -1;
		}
		n->pool_open = 1;
	}
	if (al_netpool_lease(&n->pool, (al_netslot_kind)kind, &n->lease,
			     &n->prepared, err) < 0)
		return -1;
	n->lease_ms = ms_since(&t0);
	return 0;
}

const al_netslot *shim_net_slot(const shim_net *n)
{
	return n->lease.lock_fd >= 0 ? &n->lease.slot : NULL;
}

int shim_net_fits(const shim_net *n, const al_sandbox *sb)
{
	return (shim_net_slot(n) != NULL) == (shim_net_wanted(sb) != 0);
}

void shim_net_step(const shim_net *n, char *out, size_t len)
{
	/* bench/steps.py reads "name N (sub x ms, ...)": the slot's index
	 * is no step, so it is written "#i". */
	if (shim_net_slot(n) == NULL)
		snprintf(out, len, ", net 0 (no network)");
	else
		snprintf(out, len, ", net %lld (lease %.2f ms, %s slot #%u)",
			 (long long)n->lease_ms, n->lease_ms,
			 n->prepared ? "prepared" : "ready",
			 n->lease.slot.index);
}

void shim_net_unpin(shim_net *n)
{
	if (n->pool_open)
		al_netpool_unpin(&n->pool, &n->lease);
}

void shim_net_release(shim_net *n)
{
	if (n->pool_open)
		al_netpool_release(&n->pool, &n->lease);
}
