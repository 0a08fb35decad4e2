/* shim netctl: the sandbox's network setting and its gateway's control
 * channel. */
#ifndef AL_SHIM_NETCTL_H
#define AL_SHIM_NETCTL_H

#include <poll.h>
#include <stdint.h>

#include "proto/agentproto.h"
#include "shim.h"

/* netctl.c: the sandbox's network setting (s->sb.network) and its
 * gateway's control channel. Whoever launches the gateway hands the
 * shim's end of its fd 6 to shim_netctl_attach (taken over, non-
 * blocking), which sends the first GW_CONFIG at once; a gateway that
 * ends is shim_netctl_detach'ed. NETWORK from a client goes to the
 * gateway as a GW_CONFIG and is answered after its GW_ACK. Without a
 * gateway a change to mode none is only recorded; any other is refused
 * (AL_ESTATE): the sandbox has no way out to let anything through. A
 * gateway that refuses its first config, breaks the protocol or does not
 * answer within SHIM_GW_ACK_MS is detached: its control fd closes, on
 * which it must exit (and the supervisor sees it go). A GW_CREDCHAN_REQ
 * is answered with a fresh credential channel (core/cred/credclient.h) passed
 * by SCM_RIGHTS, at most SHIM_GW_CREDCHAN_BURST at once and
 * SHIM_GW_CREDCHAN_RATE a second; otherwise {"ok":false}. */
#define SHIM_WHO_GW (-5)
void shim_netctl_init(shim *s);
int shim_netctl_attach(shim *s, int fd, const char *gateway_addr, int build,
		       al_err *err);
void shim_netctl_detach(shim *s, const char *why);
/* fd: the control fd of a gateway gateway.c just started (taken over,
 * attached), or -1 for none. */
void shim_netctl_started(shim *s, int fd);
/* 1 while a gateway is attached. */
int shim_netctl_attached(const shim *s);
void shim_netctl_request(shim *s, int client, const al_frame *f);
int shim_netctl_poll(shim *s, struct pollfd *pfd, int *who, int n);
void shim_netctl_event(shim *s, short revents);
/* ms until the pending ACK times out, or -1. */
int shim_netctl_timeout(const shim *s, int64_t now);
void shim_netctl_tick(shim *s, int64_t now);

#endif
