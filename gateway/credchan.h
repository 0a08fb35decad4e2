/* credchan: the gateway's end of the credential channel (fd 7, see
 * core/cred/credproto.h for the messages).
 *
 * The shim opens the channel (connect + CRED_HELLO for this sandbox)
 * before it starts the gateway and hands it over as fd 7; no fd 7 when
 * the controller was down. The controller pushes CRED_SET whenever the
 * sandbox's applicable credentials change: each one replaces the set in
 * use at once (the old values wiped), and is acknowledged. On EOF, an
 * error or no fd 7 at all, the gateway asks the shim on fd 6 for a fresh
 * channel (GW_CREDCHAN_REQ) with backoff, 200 ms doubling to 10 s, and
 * keeps the last set meanwhile.
 *
 * Fail closed: until a first set came, gw_creds() is NULL and the
 * injection (gateway/cred.c) answers 503 to requests that need
 * credentials. Every pending gw_cred_take is denied when the channel
 * goes, or after GW_CRED_TAKE_TIMEOUT_MS without an answer. */
#ifndef AL_GATEWAY_CREDCHAN_H
#define AL_GATEWAY_CREDCHAN_H

#include <stdbool.h>
#include <stdint.h>

#include "cred/credproto.h"
#include "gw.h"

#define GW_CREDCHAN_FD 7
#define GW_CRED_TAKE_TIMEOUT_MS 2000
#define GW_CRED_TAKES_MAX 1024 /* pending at once; more are denied */
#define GW_CRED_AUDIT_MAX 1024 /* queued records; more are dropped */
#define GW_CREDCHAN_BACKOFF_MIN_MS 200
#define GW_CREDCHAN_BACKOFF_MAX_MS 10000

/* Start on fd (GW_CREDCHAN_FD, or -1 when the shim had none: the first
 * re-request is then due at once). -1 on a setup failure. */
int gw_credchan_start(gw *g, int fd, al_err *err);

/* The set in use, or NULL before the first one (fail closed). The
 * pointer and what it points to stay valid until control returns to the
 * loop: copy what must outlive a callback. */
const al_cred_set *gw_creds(gw *g);

/* The answer of one take: ok, or not with the seconds to wait
 * (retry_after, >= 1). A denial without an answer from the controller
 * (timeout, channel gone, too many pending) has retry_after 1. */
typedef void (*gw_cred_take_cb)(void *arg, bool ok, uint32_t retry_after);

/* Ask the controller for one token of credential id's bucket. cb is
 * called exactly once, later, from the loop (never from inside this
 * call), unless gw_cred_take_cancel(handle) comes first. Returns the
 * handle (> 0), or 0 when GW_CRED_TAKES_MAX are pending already: cb is
 * then never called and the caller denies at once. */
uint32_t gw_cred_take(gw *g, const char *id, gw_cred_take_cb cb, void *arg);
/* The caller is going away: its cb will not be called. Unknown or
 * already answered handles are ignored. */
void gw_cred_take_cancel(gw *g, uint32_t handle);

/* control.c: the shim's GW_CREDCHAN answer, with the descriptor that
 * came with it (-1: none); takes fd. */
void gw_credchan_reply(gw *g, bool ok, int fd);

/* Queue one audit record for the controller (sent as CRED_USE). Past
 * GW_CRED_AUDIT_MAX queued (the channel is down or slow), the record is
 * dropped and counted; the count goes out as one record
 * (action "dropped", reason "<n> records dropped") when the queue moves
 * again. Records go out in batches, at most 20 ms late. */
void gw_cred_audit(gw *g, const al_cred_use *u);
/* On the way out: what is queued goes to the socket now, as far as it
 * takes it without waiting. */
void gw_cred_audit_flush(gw *g);

#endif
