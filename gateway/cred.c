/* cred: credential injection (see cred.h for the rules). */
#include "cred.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dnsname.h"
#include "credchan.h"
#include "gw/credcodec.h"
#include "gw/http_internal.h"
#include "policy/policy.h"
#include "proto/agentproto.h"

/* Rewritten values are built in gw/http's output buffer (al_http_out)
 * and wiped before free. */
typedef al_http_out buf;

static void buf_add(buf *b, const char *s, size_t n)
{
	al_http_out_add(b, s, n);
	if (!b->failed)
		b->p[b->len] = '\0';
}

static void buf_free(buf *b)
{
	if (b->p != NULL)
		OPENSSL_cleanse(b->p, b->cap);
	free(b->p);
	*b = (buf){0};
}

/* ---- which credentials apply ---- */

static bool cred_for_host(const al_cred *c, const char *host)
{
	for (size_t i = 0; i < c->nhosts; i++)
		if (al_dnsname_match(host, c->hosts[i]))
			return true;
	return false;
}

const char *gw_cred_path(const gw_credreq *cr, const al_http_req *q)
{
	return cr->guest_path != NULL ? cr->guest_path : q->path;
}

/* src cut to fit dst (cap bytes with the NUL): snprintf's "%s" costs
 * more, six times a request. */
static void copy_cut(char *dst, size_t cap, const char *src)
{
	size_t n = 0;
	for (; n + 1 < cap && src[n] != '\0'; n++)
		dst[n] = src[n];
	dst[n] = '\0';
}

static void audit(gw *g, const gw_credreq *cr, const al_http_req *q,
		  const char *name, const char *action, bool allow, int status,
		  const char *reason)
{
	al_cred_use u = {.status = status, .allow = allow};
	copy_cut(u.name, sizeof u.name,
		 al_cred_name_valid(name) ? name : "unknown");
	copy_cut(u.host, sizeof u.host, q->host);
	copy_cut(u.method, sizeof u.method, q->method);
	copy_cut(u.path, sizeof u.path, gw_cred_path(cr, q));
	copy_cut(u.action, sizeof u.action, action);
	copy_cut(u.reason, sizeof u.reason, reason);
	gw_cred_audit(g, &u);
}

void gw_cred_policy_check(gw *g, bool connection)
{
	if (g->cred_policy == NULL)
		return;
	int64_t now = al_now_ms();
	if (!connection &&
	    now - g->cred_policy_checked < GW_CRED_POLICY_CHECK_MS)
		return;
	g->cred_policy_checked = now;
	al_policy_reload_if_changed(g->cred_policy);
}

/* What credentials.lua says of c in this form ("header",
 * "placeholder"); no policy file: allowed (the host list still holds). */
static bool policy_allows(gw *g, const gw_credreq *cr, const al_cred *c,
			  const al_http_req *q, const char *form,
			  char why[AL_POLICY_REASON_MAX])
{
	if (g->cred_policy == NULL) {
		snprintf(why, AL_POLICY_REASON_MAX, "no credentials policy");
		return true;
	}
	gw_cred_policy_check(g, false);
	const al_gw_config *cfg = &g->cfg;
	al_cred_req r = {
		.credential = c->name,
		.form = form,
		.scope = al_cred_scope_name(c->scope),
		.host = q->host,
		.port = q->port,
		.method = q->method,
		.path = gw_cred_path(cr, q),
		.sandbox = cfg->sandbox,
		.template_name = cfg->template_name[0] ? cfg->template_name
						       : NULL,
		.project = cfg->project[0] ? cfg->project : NULL,
		.metadata = cfg->metadata,
		.n_metadata = cfg->n_metadata,
	};
	al_egress_decision d;
	al_policy_credentials(g->cred_policy, &r, &d);
	copy_cut(why, AL_POLICY_REASON_MAX, d.reason);
	return d.allow;
}

/* Record that c goes with this request. */
static int use(gw_credreq *cr, const al_cred *c)
{
	for (size_t i = 0; i < cr->n_used; i++)
		if (strcmp(cr->used[i].id, c->id) == 0)
			return 0;
	if (cr->n_used >= GW_CRED_PER_REQUEST_MAX)
		return -1;
	gw_cred_used *u = &cr->used[cr->n_used++];
	copy_cut(u->id, sizeof u->id, c->id);
	copy_cut(u->name, sizeof u->name, c->name);
	u->rated = c->rate_requests > 0;
	return 0;
}

/* The context of one head's swaps. */
typedef struct swapctx {
	gw *g;
	gw_credreq *cr;
	const al_cred_set *set;
	const al_http_req *q;
	bool failed; /* too many credentials in one request */
} swapctx;

/* The credential a placeholder named may be swapped in here. */
static const al_cred *swappable(swapctx *x, const char *name)
{
	const al_cred *c = al_cred_set_find(x->set, name);
	if (c == NULL || !cred_for_host(c, x->q->host))
		return NULL;
	char why[AL_POLICY_REASON_MAX];
	if (!policy_allows(x->g, x->cr, c, x->q, "placeholder", why))
		return NULL;
	if (use(x->cr, c) < 0) {
		x->failed = true;
		return NULL;
	}
	return c;
}

/* One byte of a placeholder at s[*i]: literal, or (pct) %XX. */
static int next_byte(const char *s, size_t len, size_t *i, bool pct)
{
	if (*i >= len)
		return -1;
	uint8_t v;
	if (pct && s[*i] == '%' && *i + 2 < len &&
	    al_hex_decode(s + *i + 1, 1, &v) == 0) {
		*i += 3;
		return v;
	}
	return (unsigned char)s[(*i)++];
}

/* A placeholder starting at s[at]: its end and name. */
static bool placeholder_at(const char *s, size_t len, size_t at, bool pct,
			   size_t *end, char name[AL_CRED_NAME_MAX + 1])
{
	size_t i = at;
	for (size_t k = 0; k < AL_CREDSCAN_PREFIX_LEN; k++)
		if (next_byte(s, len, &i, pct) != AL_CREDSCAN_PREFIX[k])
			return false;
	size_t nl = 0;
	for (;;) {
		size_t before = i;
		int c = next_byte(s, len, &i, pct);
		if (c < 0 || !al_credscan_name_char((unsigned char)c)) {
			i = before;
			break;
		}
		if (nl >= AL_CRED_NAME_MAX)
			return false;
		name[nl++] = (char)c;
	}
	name[nl] = '\0';
	*end = i;
	return nl > 0;
}

static void add_pct(buf *b, const char *v, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)v[i];
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		    c == '_' || c == '~') {
			buf_add(b, (const char *)&v[i], 1);
		} else {
			char e[3] = {'%', hex[c >> 4], hex[c & 15]};
			buf_add(b, e, 3);
		}
	}
}

/* Swap the placeholders of s[0..len) that may be swapped here into out.
 * pct: percent-encoded ones too, and the value goes in percent-encoded
 * (a target). shadow gets the same text with a space where each value
 * went: what the guest left, for the scan (the values need none, and
 * the space keeps text on either side of a value apart, as the value
 * does). Returns how many were swapped. */
static int swap_text(swapctx *x, const char *s, size_t len, bool pct, buf *out,
		     buf *shadow)
{
	int n = 0;
	size_t i = 0, copied = 0;
	while (i < len) {
		char name[AL_CRED_NAME_MAX + 1];
		size_t end;
		const al_cred *c;
		const char *a = pct ? s + i : memchr(s + i, 'a', len - i);
		if (a == NULL)
			break; /* no placeholder starts after i */
		i = (size_t)(a - s);
		if ((s[i] == 'a' || (pct && s[i] == '%')) &&
		    placeholder_at(s, len, i, pct, &end, name) &&
		    (c = swappable(x, name)) != NULL) {
			buf_add(out, s + copied, i - copied);
			buf_add(shadow, s + copied, i - copied);
			if (pct)
				add_pct(out, c->value, c->value_len);
			else
				buf_add(out, c->value, c->value_len);
			buf_add(shadow, " ", 1);
			n++;
			i = copied = end;
			continue;
		}
		i++;
	}
	if (n > 0) {
		buf_add(out, s + copied, len - copied);
		buf_add(shadow, s + copied, len - copied);
	}
	return n;
}

/* Authorization: Basic <base64 of user:pass>: placeholders inside; the
 * shadow is the decoded text's (not encoded again: the scan reads it
 * as the upstream will once it decodes the field). */
static int swap_basic(swapctx *x, const char *v, size_t vl, buf *out,
		      buf *shadow)
{
	if (vl < 7 || strncasecmp(v, "basic ", 6) != 0)
		return 0;
	const char *t = v + 6;
	size_t tl = vl - 6;
	if (tl == 0 || tl % 4 != 0 || tl > 4 * 4096)
		return 0;
	for (size_t i = 0; i < tl; i++)
		if (al_credcodec_b64_value((unsigned char)t[i]) < 0 &&
		    !(t[i] == '=' && i >= tl - 2))
			return 0;
	unsigned char *dec = malloc(tl);
	if (dec == NULL)
		return 0;
	int dl = EVP_DecodeBlock(dec, (const unsigned char *)t, (int)tl);
	int n = 0;
	if (dl > 0) {
		dl -= (t[tl - 1] == '=') + (t[tl - 2] == '=');
		buf plain = {0};
		n = swap_text(x, (const char *)dec, (size_t)dl, false, &plain,
			      shadow);
		if (n > 0 && !plain.failed) {
			size_t el = 4 * ((plain.len + 2) / 3) + 1;
			unsigned char *enc = malloc(el);
			if (enc != NULL) {
				int w = EVP_EncodeBlock(
					enc, (unsigned char *)plain.p,
					(int)plain.len);
				buf_add(out, "Basic ", 6);
				buf_add(out, (const char *)enc, (size_t)w);
				OPENSSL_cleanse(enc, el);
				free(enc);
			} else {
				out->failed = true;
			}
		} else if (n > 0) {
			out->failed = true; /* refused, not sent empty */
		}
		buf_free(&plain);
	}
	OPENSSL_cleanse(dec, tl);
	free(dec);
	return n;
}

/* ---- what is left after the swaps ---- */

typedef struct scanctx {
	gw *g;
	const al_cred_set *set;
	const char *host;
	bool body; /* a body: a placeholder for this host may pass */
	int status;
	char why[AL_POLICY_REASON_MAX];
	char name[AL_CRED_NAME_MAX + 1];
} scanctx;

static void on_left(void *arg, const al_credscan_hit *h)
{
	scanctx *x = arg;
	if (x->status != 0)
		return;
	snprintf(x->name, sizeof x->name, "%.64s",
		 al_cred_name_valid(h->name) && !h->truncated ? h->name : "");
	if (x->set == NULL) {
		x->status = 503;
		snprintf(x->why, sizeof x->why,
			 "a placeholder, and no credentials from the"
			 " controller yet");
		return;
	}
	const al_cred *c = h->truncated ? NULL
					: al_cred_set_find(x->set, h->name);
	if (c == NULL) {
		x->status = 403;
		snprintf(x->why, sizeof x->why,
			 "placeholder of an unknown credential");
		return;
	}
	bool here = cred_for_host(c, x->host);
	if (here && x->body)
		return;
	x->status = 403;
	if (!here)
		snprintf(x->why, sizeof x->why,
			 "placeholder of %.60s toward a host not in its list",
			 c->name);
	else if (h->how != 0)
		snprintf(x->why, sizeof x->why,
			 "placeholder of %.60s in an encoding the gateway does"
			 " not swap",
			 c->name);
	else
		snprintf(x->why, sizeof x->why,
			 "placeholder of %.60s not injected (policy)", c->name);
}

/* One string of the head, whole: placeholders left go to on_left. */
static void scan_text(scanctx *x, const char *p, size_t len)
{
	if (x->status != 0)
		return;
	al_credscan s;
	al_credscan_init(&s, on_left, x);
	al_credscan_last(&s, p, len);
}

/* ---- the request head ---- */

void gw_credreq_init(gw_credreq *cr)
{
	*cr = (gw_credreq){0};
}

bool gw_cred_carries(const gw_credreq *cr)
{
	return cr->n_used > 0;
}

static int refuse(gw *g, const gw_credreq *cr, const al_http_req *q, int st,
		  const char *name, const char *action, const char *why,
		  int *status, char out[AL_POLICY_REASON_MAX])
{
	audit(g, cr, q, name, action, false, -1, why);
	*status = st;
	snprintf(out, AL_POLICY_REASON_MAX, "%s", why);
	return -1;
}

/* The header form's "{value}" replaced. */
static void header_value(const al_cred *c, buf *out)
{
	const char *f = c->format[0] ? c->format : "{value}";
	const char *at = strstr(f, "{value}");
	if (at == NULL) {
		out->failed = true;
		return;
	}
	buf_add(out, f, (size_t)(at - f));
	buf_add(out, c->value, c->value_len);
	buf_add(out, at + 7, strlen(at + 7));
}

int gw_cred_head(gw *g, gw_credreq *cr, al_http_req *q, int *status,
		 char why[AL_POLICY_REASON_MAX])
{
	const al_cred_set *set = gw_creds(g);
	swapctx x = {g, cr, set, q, false};
	cr->guest_path = q->path; /* logs and audit never see a value */
	al_err err;
	/* What the guest left after the swaps is scanned (shadow: the
	 * swapped text with the values taken out). */
	scanctx s = {.g = g, .set = set, .host = q->host};
	/* Placeholders in the target. */
	buf t = {0}, ts = {0};
	if (set != NULL &&
	    swap_text(&x, q->path, strlen(q->path), true, &t, &ts) > 0) {
		scan_text(&s, ts.p, ts.len);
		bool failed = t.failed || ts.failed; /* out of memory */
		buf_free(&ts);
		if (failed || t.len > AL_HTTP_TARGET_MAX) {
			buf_free(&t);
			return refuse(g, cr, q, 414, "", "denied_placeholder",
				      "target too long after the swap", status,
				      why);
		}
		free(cr->path);
		cr->path = t.p; /* the relay frees it (with a value) */
		q->path = cr->path;
	} else {
		buf_free(&t);
		buf_free(&ts);
		scan_text(&s, q->path, strlen(q->path));
	}
	/* In header values, and inside Basic auth. */
	for (size_t i = 0; i < q->fields.n; i++) {
		al_http_field *f = &q->fields.f[i];
		scan_text(&s, f->name, f->name_len);
		buf v = {0}, vs = {0};
		int n = 0;
		if (set != NULL &&
		    al_http_name_is(f->name, f->name_len, "authorization"))
			n = swap_basic(&x, f->value, f->value_len, &v, &vs);
		if (set != NULL && n == 0)
			n = swap_text(&x, f->value, f->value_len, false, &v,
				      &vs);
		if (n > 0)
			scan_text(&s, vs.p, vs.len);
		else
			scan_text(&s, f->value, f->value_len);
		int rc = 0;
		if (n > 0)
			rc = v.failed || vs.failed
				     ? -1
				     : al_http_fields_replace_value(&q->fields,
								    i, v.p,
								    v.len,
								    &err);
		buf_free(&v);
		buf_free(&vs);
		if (rc < 0)
			return refuse(g, cr, q, 431, "", "denied_placeholder",
				      "a header cannot take the value", status,
				      why);
	}
	if (x.failed)
		return refuse(g, cr, q, 403, "", "denied_placeholder",
			      "too many credentials in one request", status,
			      why);
	/* Whatever the guest left is refused (the header form's field,
	 * set below, is the gateway's own). */
	if (s.status != 0)
		return refuse(g, cr, q, s.status, s.name, "denied_placeholder",
			      s.why, status, why);
	/* The header form. */
	for (size_t i = 0; set != NULL && i < set->n; i++) {
		const al_cred *c = &set->creds[i];
		if (c->header[0] == '\0' || !cred_for_host(c, q->host))
			continue;
		char pwhy[AL_POLICY_REASON_MAX];
		if (!policy_allows(g, cr, c, q, "header", pwhy)) {
			audit(g, cr, q, c->name, "denied_policy", false, -1,
			      pwhy);
			continue;
		}
		buf v = {0};
		header_value(c, &v);
		int rc = v.failed || use(cr, c) < 0
				 ? -1
				 : al_http_fields_set(&q->fields, c->header,
						      v.p, &err);
		buf_free(&v);
		if (rc < 0)
			return refuse(g, cr, q, 403, c->name, "use",
				      "credential header cannot be set", status,
				      why);
	}
	if (gw_cred_carries(cr) &&
	    al_http_fields_set(&q->fields, "Accept-Encoding", "identity",
			       &err) < 0)
		return refuse(g, cr, q, 431, "", "use", "too many fields",
			      status, why);
	return 0;
}

/* ---- rate limits ---- */

static void take_next(gw *g, gw_credreq *cr);

static void on_taken(void *arg, bool ok, uint32_t retry_after)
{
	gw_credreq *cr = arg;
	cr->take = 0;
	if (!ok) {
		audit(cr->g, cr, cr->q, cr->used[cr->next_take].name,
		      "rate_limited", false, -1, "over the rate limit");
		cr->rate_done(cr->rate_arg, false,
			      retry_after > 0 ? retry_after : 1);
		return;
	}
	cr->next_take++;
	take_next(cr->g, cr);
}

static void take_next(gw *g, gw_credreq *cr)
{
	while (cr->next_take < cr->n_used && !cr->used[cr->next_take].rated)
		cr->next_take++;
	if (cr->next_take == cr->n_used) {
		cr->rate_done(cr->rate_arg, true, 0);
		return;
	}
	cr->take = gw_cred_take(g, cr->used[cr->next_take].id, on_taken, cr);
	if (cr->take == 0) /* too many pending: denied now */
		on_taken(cr, false, 1);
}

bool gw_cred_rate(gw *g, gw_credreq *cr, const al_http_req *q,
		  void (*done)(void *arg, bool ok, uint32_t retry_after),
		  void *arg)
{
	bool any = false;
	for (size_t i = 0; i < cr->n_used; i++)
		any = any || cr->used[i].rated;
	if (!any)
		return false;
	cr->g = g;
	cr->q = q;
	cr->rate_done = done;
	cr->rate_arg = arg;
	cr->next_take = 0;
	take_next(g, cr);
	return true;
}

char *gw_cred_429(uint32_t retry_after, size_t *len)
{
	al_err err;
	size_t ol;
	char *own = al_http_own_response(
		429, "airlock gateway: credential rate limit", true, &ol, &err);
	if (own == NULL)
		return NULL;
	char *eol = strstr(own, "\r\n");
	char ra[48];
	int rl = snprintf(ra, sizeof ra, "Retry-After: %u\r\n", retry_after);
	char *out = malloc(ol + (size_t)rl + 1);
	if (out == NULL || eol == NULL) {
		free(own);
		free(out);
		return NULL;
	}
	size_t first = (size_t)(eol + 2 - own);
	memcpy(out, own, first);
	memcpy(out + first, ra, (size_t)rl);
	memcpy(out + first + (size_t)rl, own + first, ol - first + 1);
	*len = ol + (size_t)rl;
	free(own);
	return out;
}

/* ---- the body ---- */

void gw_cred_body_start(gw_credreq *cr, const char *host)
{
	cr->host = host;
	al_credscan_init(&cr->scan, NULL, NULL);
}

int gw_cred_body(gw *g, gw_credreq *cr, const al_http_req *q, const char *data,
		 size_t len, bool end, int *status,
		 char why[AL_POLICY_REASON_MAX])
{
	scanctx s = {.g = g, .set = gw_creds(g), .host = q->host, .body = true};
	/* The scanner's callback context changes with the set: set it for
	 * this piece. */
	cr->scan.cb = on_left;
	cr->scan.arg = &s;
	if (len > 0)
		al_credscan_feed(&cr->scan, data, len);
	if (end)
		al_credscan_end(&cr->scan);
	cr->scan.arg = NULL;
	if (s.status == 0)
		return 0;
	return refuse(g, cr, q, s.status, s.name, "denied_placeholder", s.why,
		      status, why);
}

/* ---- the response ---- */

static void audit_uses(gw *g, gw_credreq *cr, const al_http_req *q, int st)
{
	if (cr->audited)
		return;
	cr->audited = true;
	for (size_t i = 0; i < cr->n_used; i++)
		audit(g, cr, q, cr->used[i].name, "use", true, st,
		      st < 0 ? "no upstream answer" : "injected");
}

void gw_credreq_end(gw *g, gw_credreq *cr, const al_http_req *q)
{
	if (cr->take != 0)
		gw_cred_take_cancel(g, cr->take);
	cr->take = 0;
	if (q != NULL)
		audit_uses(g, cr, q, -1);
	if (cr->path != NULL) {
		OPENSSL_cleanse(cr->path, strlen(cr->path));
		free(cr->path);
	}
	gw_credreq_init(cr);
}

int gw_cred_response(gw *g, gw_credreq *cr, const al_http_req *q,
		     al_http_resp *resp, al_credmask *m,
		     char why[AL_POLICY_REASON_MAX])
{
	audit_uses(g, cr, q, resp->status);
	if (gw_cred_carries(cr)) {
		const char *ce = al_http_fields_get(&resp->fields,
						    "Content-Encoding");
		if (ce != NULL && strcasecmp(ce, "identity") != 0) {
			snprintf(why, AL_POLICY_REASON_MAX,
				 "content-encoded answer to a request with a"
				 " credential (it cannot be masked)");
			return -1;
		}
	}
	if (m == NULL)
		return 0;
	/* Masking keeps lengths: in place in the response's own copy. */
	al_credmask_string(m, (char *)resp->reason, strlen(resp->reason));
	for (size_t i = 0; i < resp->fields.n; i++) {
		al_http_field *f = &resp->fields.f[i];
		al_credmask_string(m, (char *)f->name, f->name_len);
		al_credmask_string(m, (char *)f->value, f->value_len);
	}
	return 0;
}

int gw_cred_masker(gw *g, al_credmask **m, uint64_t *version, al_credmask **use)
{
	const al_cred_set *set = gw_creds(g);
	*use = NULL;
	if (set == NULL || set->n == 0) {
		al_credmask_free(*m);
		*m = NULL;
		return 0;
	}
	if (*m != NULL && *version == set->version) {
		al_credmask_reset(*m);
		*use = *m;
		return 0;
	}
	al_credmask_free(*m);
	*m = NULL;
	al_credmask_value v[AL_CRED_SET_MAX];
	size_t n = 0;
	for (size_t i = 0; i < set->n && n < AL_CRED_SET_MAX; i++)
		if (set->creds[i].value_len > 0)
			v[n++] = (al_credmask_value){set->creds[i].value,
						     set->creds[i].value_len};
	al_err err;
	*m = al_credmask_new(v, n, &err);
	if (*m == NULL) {
		gw_note(g, "credential masking: %s", err.msg);
		return -1;
	}
	*version = set->version;
	*use = *m;
	return 0;
}
