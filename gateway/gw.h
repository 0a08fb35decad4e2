/* gw: the airlock-gateway program's shared state (one process per
 * sandbox, single-threaded, one libevent loop).
 *
 * main.c    start: arguments, environment, the modules below, the
 *           syscall filter, the loop
 * control.c fd 6: GW_CONFIG frames in (the first starts serving), GW_ACK
 *           out
 * decide.c  the policy's decisions and the one function every decision
 *           is logged through
 * proxy.c   fd 5: transparent TCP; which name a connection is for, the
 *           bounds, pass-through for ports other than 80 and 443
 * relay.c   HTTP and HTTPS: TLS termination, the request loop of a
 *           kept-alive connection, upstream dial and forwarding
 * credchan.c fd 7: the credential set, rate-limit tokens, audit records
 *           (credchan.h)
 * The DNS server (fds 3 and 4) is gateway/gw/dnsserv. */
#ifndef AL_GATEWAY_GW_H
#define AL_GATEWAY_GW_H

#include <stdbool.h>
#include <stdint.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "gw/dnsserv.h"
#include "gw/fakeip.h"
#include "gw/resolve.h"
#include "gw/tls.h"
#include "gw/upaddr.h"
#include "gw/uppool.h"
#include "net/egress.h"
#include "net/netspec.h"
#include "policy/policy.h"

struct bufferevent;
struct event_base;
struct evconnlistener;
struct gw_credchan;

/* Bounds of one gateway (all charged to its sandbox). */
#define GW_CONNS_MAX 512	    /* transparent connections open at once */
#define GW_CONNECT_TIMEOUT_MS 10000 /* an upstream TLS handshake */
/* Each resolved address of an upstream gets this long to accept TCP
 * before the next one is tried (dial.c). */
#define GW_CONNECT_ADDR_TIMEOUT_MS 3000
/* Idle upstream connections kept for the next request (gw/uppool):
 * at most this many per gateway, each for at most this long. */
#define GW_UPPOOL_MAX 32
#define GW_UPPOOL_IDLE_MS 15000
/* Bytes queued towards one side before the other side's reading stops. */
#define GW_HIGH_WATER (256u << 10)

typedef struct gw {
	struct event_base *base;
	const char *sandbox; /* argv --sandbox */
	al_policy *policy;
	al_policy *cred_policy;	     /* credentials.lua, NULL when absent */
	int64_t cred_policy_checked; /* al_now_ms of its last reload check */
	al_gw_config cfg;	     /* the last GW_CONFIG accepted */
	bool configured;	     /* a first GW_CONFIG came: serving */
	uint32_t gateway; /* the gateway's address in the slot (fd 3) */
	uint32_t guest;	  /* the guest's: gateway + 1 (net/addr.h) */
	al_fakeip *fakeip;
	al_upaddr *upaddr;
	al_resolver *resolver;
	al_gw_tls *tls;
	al_gw_uppool *uppool; /* idle upstream connections (relay.c) */
	al_egress_writer *egress;
	struct event *flush; /* pending while records wait (decide.c) */
	al_dnsserv *dns;
	struct gw_credchan *credchan; /* credchan.c */
	struct evconnlistener *listener;
	unsigned conns;
	/* A TLS handshake and each request head must be complete within
	 * head_ms; no byte either way for idle_ms closes a connection
	 * (AIRLOCK_GW_HEAD_TIMEOUT_MS, AIRLOCK_GW_IDLE_TIMEOUT_MS). */
	long head_ms, idle_ms;
	unsigned long conns_total, conns_refused;
} gw;

/* ---- decide.c ---- */

/* What the policy says about one egress request of this sandbox (the
 * GW_CONFIG's sandbox, template, project, metadata, mode and lists).
 * Not logged: the caller logs with gw_log. Denies before a config. */
bool gw_decide(gw *g, enum al_egress_proto proto, const char *name,
	       unsigned port, const char *method, const char *path,
	       char reason[AL_POLICY_REASON_MAX]);
/* The one place a decision goes to the egress log. */
void gw_log(gw *g, bool allow, const char *reason, enum al_egress_proto proto,
	    const char *name, unsigned port, const char *method,
	    const char *path);
/* gw_decide, then gw_log of its answer. */
bool gw_decide_log(gw *g, enum al_egress_proto proto, const char *name,
		   unsigned port, const char *method, const char *path);
/* gw/dnsserv's callbacks: the policy for AL_EGRESS_DNS, and the log. */
void gw_dns_decide(void *arg, const char *name, al_dnsserv_decision *out);
void gw_dns_log(void *arg, const al_dnsserv_event *ev);
/* Flush the egress log when due (g->flush calls it), and arm g->flush
 * again while records wait: an idle gateway has no timer running. */
void gw_log_flush(gw *g, bool force);
/* A line on stderr (the shim's log): "airlock-gateway <sandbox>: ...". */
void gw_note(gw *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- what relay.c and splice.c share ---- */

/* A connection is done with: count it out (proxy.c counted it in). */
static inline void gw_conn_closed(gw *g)
{
	if (g->conns > 0)
		g->conns--;
}

/* A relayed side's flow control: reading stops at GW_HIGH_WATER
 * buffered, writing wakes the other side at half of it. (libevent's
 * 16 KiB per read or write wakeup stays: 128 KiB measured a third
 * slower in bulk here, the two hops pipelining less.) */
static inline void gw_bev_flow(struct bufferevent *bev)
{
	bufferevent_setwatermark(bev, EV_READ, 0, GW_HIGH_WATER);
	bufferevent_setwatermark(bev, EV_WRITE, GW_HIGH_WATER / 2, 0);
}

/* ---- control.c ---- */

/* Watch fd 6; first_config is called once, when the first GW_CONFIG
 * has been accepted (before its ACK). Returns -1 on a setup failure. */
int gw_control_start(gw *g, int fd, int (*first_config)(gw *g, al_err *err));

/* ---- proxy.c ---- */

/* Accept on the transparent listener (fd 5). */
int gw_proxy_start(gw *g, int fd, al_err *err);

/* ---- relay.c ---- */

/* Serve one accepted connection to name:port (80: http, 443: https);
 * takes fd. */
void gw_relay_start(gw *g, int fd, const char *name, unsigned port);
/* Pass-through of an allowed name:port; takes fd. */
void gw_splice_start(gw *g, int fd, const char *name, unsigned port);

#endif
