/* cred: credential injection on relay.c's request and response path.
 *
 * For each request after the egress policy allowed it (gw_cred_head):
 *  - header form: a credential of the set whose own host list matches
 *    the request's host and that names a header gets that header set
 *    to its format with {value} (the guest's fields of that name, '_'
 *    spellings too, are discarded);
 *  - placeholder form: `airlock-cred:<name>` naming such a credential is
 *    swapped for the value in the head only: in the target (plain or
 *    percent-encoded; the value goes in percent-encoded), in a header
 *    value (plain), and inside `Authorization: Basic` (decoded, swapped,
 *    encoded again);
 *  - credentials.lua (g->cred_policy, when the file exists) is asked per
 *    credential and form: anything but allow means not injected; a
 *    changed file applies from the next connection on, and within a
 *    second on connections already open (gw_cred_policy_check);
 *  - after the swaps, and before the header form's field is set, what
 *    the guest left in the head (target, field names and values; of a
 *    swapped text, its shadow: the text with a space for each value) is
 *    scanned
 *    (gw/credscan, every encoding): any placeholder left denies the
 *    request with 403 — it names an unknown credential, one whose hosts
 *    do not include this host, one the policy refused, or is in an
 *    encoding the gateway does not swap (JSON-escaped, base64 outside
 *    Basic, percent-encoded in a header, other case), even in a field
 *    the header form then replaces;
 *  - a request that carries a credential gets Accept-Encoding: identity
 *    and its response must not be content-encoded (502 otherwise: it
 *    could not be masked);
 *  - before the first set came from the controller (gw_creds NULL) a
 *    request with a placeholder anywhere is answered 503; one without
 *    goes out untouched (nothing to inject, nothing to mask).
 * Bodies are never rewritten: the body is scanned as it streams
 * (gw_cred_body); a placeholder in it denies the request unless it names
 * a credential whose hosts include this host, in which case it goes to
 * that host unchanged (it is not the value, and refusing it would break
 * uploads of text that mentions a placeholder to the very service). A
 * denial mid-body cuts the upstream before the body's end, so the
 * upstream never sees a complete request.
 * Rate limits (gw_cred_rate): one token per injected credential that has
 * a limit, from the controller's shared bucket, before the upstream is
 * contacted; a refusal is a 429 with Retry-After from the gateway.
 * Responses (gw_cred_mask_*): while the set holds values, every response
 * head and body is masked (gw/credmask) for every value of the set, not
 * only those this request carried: an upstream may hand back a value it
 * learnt earlier. Bodies are masked whole, at constant memory.
 * Every decision that involves a credential is audited (gw_cred_audit):
 * use (with the upstream status), denied_placeholder, denied_policy,
 * rate_limited. A redirect is passed to the guest as it is: the gateway
 * never follows one, and the guest's next request is decided afresh. */
#ifndef AL_GATEWAY_CRED_H
#define AL_GATEWAY_CRED_H

#include <stdbool.h>
#include <stdint.h>

#include "cred/credproto.h"
#include "gw.h"
#include "gw/credmask.h"
#include "gw/credscan.h"
#include "gw/http.h"

/* Credentials one request may carry. */
#define GW_CRED_PER_REQUEST_MAX 8

typedef struct gw_cred_used {
	char id[AL_CRED_ID_LEN + 1];
	char name[AL_CRED_NAME_MAX + 1];
	bool rated;
} gw_cred_used;

typedef struct gw_credreq {
	gw_cred_used used[GW_CRED_PER_REQUEST_MAX];
	size_t n_used;
	gw *g;
	size_t next_take; /* gw_cred_rate: the next used[] to take for */
	uint32_t take;	  /* a pending gw_cred_take, 0 if none */
	void (*rate_done)(void *arg, bool ok, uint32_t retry_after);
	void *rate_arg;
	char *path;		/* the target after a swap (owned) */
	const char *guest_path; /* the target as the guest sent it */
	const al_http_req *q;	/* gw_cred_rate's request */
	bool audited;
	/* The body's scan and what it found. */
	al_credscan scan;
	const char *host;
	int body_status; /* 0, or the status a placeholder denies with */
	char body_why[AL_POLICY_REASON_MAX];
	char body_name[AL_CRED_NAME_MAX + 1];
} gw_credreq;

void gw_credreq_init(gw_credreq *cr);
/* The request is over (answered, refused or cut): a pending take is
 * cancelled, the uses not yet audited are (status -1). */
void gw_credreq_end(gw *g, gw_credreq *cr, const al_http_req *q);

/* Inject into q (host q->host, already bound to the connection's name).
 * 0: go on; -1: refuse with *status (403, 503, ...) and why (audited and
 * ready for the egress log). */
int gw_cred_head(gw *g, gw_credreq *cr, al_http_req *q, int *status,
		 char why[AL_POLICY_REASON_MAX]);
/* The target as the guest sent it: what logs, audit and policies see
 * (after a swap q->path holds the value). */
const char *gw_cred_path(const gw_credreq *cr, const al_http_req *q);
/* True when a credential was injected. */
bool gw_cred_carries(const gw_credreq *cr);

/* Take the rate-limit tokens of what q carries. false: none needed, go
 * on now; true: done(arg, ok, retry_after) comes later from the loop. */
bool gw_cred_rate(gw *g, gw_credreq *cr, const al_http_req *q,
		  void (*done)(void *arg, bool ok, uint32_t retry_after),
		  void *arg);

/* The request body: scan each decoded piece; end at its end. -1: a
 * placeholder denies (status, why: audited). */
void gw_cred_body_start(gw_credreq *cr, const char *host);
int gw_cred_body(gw *g, gw_credreq *cr, const al_http_req *q, const char *data,
		 size_t len, bool end, int *status,
		 char why[AL_POLICY_REASON_MAX]);

/* The response head: refuse (-1, why) a content-encoded answer to a
 * request that carried a credential; audit the uses with its status;
 * mask its reason and fields with m (NULL: nothing to mask). */
int gw_cred_response(gw *g, gw_credreq *cr, const al_http_req *q,
		     al_http_resp *resp, al_credmask *m,
		     char why[AL_POLICY_REASON_MAX]);

/* Reload credentials.lua if its file changed: at each new connection
 * (connection true), and on requests of connections already open at most
 * every GW_CRED_POLICY_CHECK_MS (a stat per request cost more than the
 * rest of a policy decision). */
#define GW_CRED_POLICY_CHECK_MS 1000
void gw_cred_policy_check(gw *g, bool connection);

/* The masker for the set in use into *use: *m (the relay's, reused) is
 * rebuilt when the set changed since *version; *use NULL when there is
 * nothing to mask. -1 when it cannot be built (the response must not
 * pass). Call between responses only (it starts a new stream). */
int gw_cred_masker(gw *g, al_credmask **m, uint64_t *version,
		   al_credmask **use);

/* A whole 429 with Retry-After (malloc'd, *len bytes). */
char *gw_cred_429(uint32_t retry_after, size_t *len);

#endif
