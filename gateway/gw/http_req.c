/* gw/http requests: the request line, Host and framing rules, and the
 * canonical head written upstream. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dnsname.h"
#include "gw/http.h"
#include "gw/http_internal.h"
#include "gw/urlpath.h"

static unsigned default_port(bool tls)
{
	return tls ? 443u : 80u;
}

/* host [":" port]: a DNS name or IPv4 address, no userinfo, no IPv6. */
static int parse_authority(al_http_parser *p, const char *a, size_t len,
			   unsigned dflt, char host[AL_HTTP_HOST_MAX],
			   unsigned *port, al_err *err)
{
	if (len == 0)
		return al_http_reject(p, 400, err, "empty host");
	if (memchr(a, '@', len) != NULL)
		return al_http_reject(p, 400, err, "userinfo in the authority");
	if (a[0] == '[')
		return al_http_reject(p, 400, err,
				      "IPv6 literal host (no IPv6 egress)");
	const char *colon = memchr(a, ':', len);
	size_t hl = colon != NULL ? (size_t)(colon - a) : len;
	unsigned pt = dflt;
	if (colon != NULL) {
		const char *ps = colon + 1;
		size_t pl = len - hl - 1;
		if (pl == 0 || pl > 5)
			return al_http_reject(p, 400, err, "port of %zu digits",
					      pl);
		pt = 0;
		for (size_t i = 0; i < pl; i++) {
			if (ps[i] < '0' || ps[i] > '9')
				return al_http_reject(p, 400, err,
						      "port is not a number");
			pt = pt * 10 + (unsigned)(ps[i] - '0');
		}
		if (pt == 0 || pt > 65535)
			return al_http_reject(p, 400, err, "port %u", pt);
	}
	char tmp[AL_HTTP_HOST_MAX + 1];
	if (hl == 0 || hl > AL_HTTP_HOST_MAX)
		return al_http_reject(p, 400, err, "host of %zu bytes", hl);
	memcpy(tmp, a, hl);
	tmp[hl] = '\0';
	al_err e = {0};
	if (al_dnsname_canon(tmp, host, AL_HTTP_HOST_MAX, &e) < 0)
		return al_http_reject(p, 400, err, "host: %s", e.msg);
	*port = pt;
	return 0;
}

static int check_target(al_http_parser *p, const char *t, size_t len,
			al_err *err)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)t[i];
		if (c <= 0x20 || c >= 0x7f)
			return al_http_reject(p, 400, err,
					      "byte 0x%02x in the target", c);
		if (c == '#' || c == '\\')
			return al_http_reject(p, 400, err, "'%c' in the target",
					      c);
		if (c == '%' && (i + 2 >= len ||
				 al_hex_digit((unsigned char)t[i + 1]) < 0 ||
				 al_hex_digit((unsigned char)t[i + 2]) < 0))
			return al_http_reject(p, 400, err,
					      "'%%' not followed by two hex"
					      " digits in the target");
	}
	return 0;
}

/* 11, 10, or -1 after refusing (505 for another HTTP/d.d). */
static int parse_version(al_http_parser *p, const char *v, size_t len,
			 al_err *err)
{
	if (len == 8 && memcmp(v, "HTTP/1.1", 8) == 0)
		return 11;
	if (len == 8 && memcmp(v, "HTTP/1.0", 8) == 0)
		return 10;
	if (len == 8 && memcmp(v, "HTTP/", 5) == 0 && v[5] >= '0' &&
	    v[5] <= '9' && v[6] == '.' && v[7] >= '0' && v[7] <= '9')
		return al_http_reject(p, 505, err, "version %.8s", v);
	return al_http_reject(p, 400, err, "no valid HTTP version");
}

/* Absolute-form: scheme "://" authority [path-abempty] ["?" query].
 * path_out gets the origin-form target (in the head's tail room). */
static int parse_absolute(al_http_parser *p, al_http_req *req, const char *t,
			  size_t len, char *path_out, al_err *err)
{
	size_t i = 0;
	while (i < len && t[i] != ':')
		i++;
	bool https = al_http_name_is(t, i, "https");
	if (!https && !al_http_name_is(t, i, "http"))
		return al_http_reject(p, 400, err,
				      "target is neither origin-form nor an"
				      " http(s) absolute-form");
	if (https != p->tls)
		return al_http_reject(p, 400, err,
				      "%s target on a%s connection",
				      https ? "https" : "http",
				      p->tls ? " TLS" : " plain");
	if (len - i < 3 || memcmp(t + i, "://", 3) != 0)
		return al_http_reject(p, 400, err,
				      "absolute-form without \"//\"");
	const char *a = t + i + 3, *end = t + len;
	const char *ae = a;
	while (ae < end && *ae != '/' && *ae != '?')
		ae++;
	if (parse_authority(p, a, (size_t)(ae - a), default_port(p->tls),
			    req->host, &req->port, err) < 0)
		return -1;
	size_t rl = (size_t)(end - ae);
	size_t o = 0;
	if (rl == 0 || *ae == '?')
		path_out[o++] = '/';
	memcpy(path_out + o, ae, rl);
	path_out[o + rl] = '\0';
	req->path = path_out;
	req->absolute_form = true;
	return 0;
}

static int request_line(al_http_parser *p, al_http_req *req,
			const al_http_lines *l, char *path_out, al_err *err)
{
	char *line = l->first;
	size_t len = l->first_len;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)line[i];
		if (c < 0x20 || c == 0x7f)
			return al_http_reject(p, 400, err,
					      "control byte 0x%02x in the"
					      " request line",
					      c);
	}
	char *sp1 = memchr(line, ' ', len);
	if (sp1 == NULL)
		return al_http_reject(p, 400, err, "request line of one word");
	char *t = sp1 + 1;
	char *sp2 = memchr(t, ' ', len - (size_t)(t - line));
	if (sp2 == NULL)
		return al_http_reject(p, 400, err,
				      "request line without a version"
				      " (HTTP/0.9)");
	const char *v = sp2 + 1;
	size_t vl = len - (size_t)(v - line);
	int version = parse_version(p, v, vl, err);
	if (version < 0)
		return -1;
	req->version = version;
	size_t ml = (size_t)(sp1 - line);
	if (ml == 0 || ml > AL_HTTP_METHOD_MAX)
		return al_http_reject(p, 400, err, "method of %zu bytes", ml);
	/* Every registered method is upper case: "head" could be read as
	 * HEAD by the upstream and not by the gateway (a body-less answer
	 * whose Content-Length the gateway would wait for). */
	for (size_t i = 0; i < ml; i++) {
		char c = line[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return al_http_reject(p, 400, err,
					      "method is not an upper-case"
					      " token");
	}
	if (ml == 7 && memcmp(line, "CONNECT", 7) == 0)
		return al_http_reject(p, 405, err,
				      "CONNECT (no tunnels through the"
				      " gateway)");
	/* TRACE echoes the request back, injected credentials included. */
	if (ml == 5 &&
	    (memcmp(line, "TRACE", 5) == 0 || memcmp(line, "TRACK", 5) == 0))
		return al_http_reject(p, 405, err,
				      "%.5s (it would echo the request)", line);
	size_t tl = (size_t)(sp2 - t);
	if (tl == 0)
		return al_http_reject(p, 400, err, "empty target");
	if (tl > AL_HTTP_TARGET_MAX)
		return al_http_reject(p, 414, err, "target of %zu bytes", tl);
	if (check_target(p, t, tl, err) < 0)
		return -1;
	*sp1 = '\0';
	*sp2 = '\0';
	req->method = line;
	if (t[0] == '/')
		req->path = t;
	else if (tl == 1 && t[0] == '*')
		return al_http_reject(p, 400, err, "asterisk-form target");
	else if (parse_absolute(p, req, t, tl, path_out, err) < 0)
		return -1;
	/* The policy judges, and the upstream gets, the normal form. */
	const char *why;
	size_t nl;
	char *path = (char *)req->path;
	if (al_urlpath_normalize(path, strlen(path), &nl, &why) < 0)
		return al_http_reject(p, 400, err, "%s", why);
	return 0;
}

static int header_fields(al_http_parser *p, al_http_req *req, al_http_lines *l,
			 al_err *err)
{
	const al_http_raw *host = NULL, *cl = NULL, *te = NULL, *expect = NULL;
	size_t n_host = 0, n_cl = 0, n_te = 0, n_expect = 0;
	al_http_conn conn = {0};
	bool keep[AL_HTTP_RESP_FIELDS_MAX] = {0};
	for (size_t i = 0; i < l->n; i++) {
		al_http_raw *f = &l->raw[i];
		switch (al_http_name_kind(f->name, f->name_len)) {
		case AL_HTTP_K_HOST:
			host = f;
			n_host++;
			break;
		case AL_HTTP_K_CONTENT_LENGTH:
			cl = f;
			n_cl++;
			break;
		case AL_HTTP_K_TRANSFER_ENCODING:
			te = f;
			n_te++;
			break;
		case AL_HTTP_K_EXPECT:
			expect = f;
			n_expect++;
			break;
		case AL_HTTP_K_CONNECTION:
			if (al_http_conn_parse(f->value, &conn) < 0)
				return al_http_reject(p, 400, err,
						      "Connection is not a"
						      " list of at most %d"
						      " tokens",
						      AL_HTTP_CONN_NAMES_MAX);
			break;
		case AL_HTTP_K_UPGRADE:
			return al_http_reject(p, 400, err,
					      "%s (the gateway offers no"
					      " protocol upgrade)",
					      f->name);
		case AL_HTTP_K_IMITATION:
			return al_http_reject(p, 400, err,
					      "%s (an '_' spelling of a field"
					      " the gateway writes)",
					      f->name);
		case AL_HTTP_K_HOP:
			break; /* consumed */
		case AL_HTTP_K_ALT_SVC:
		case AL_HTTP_K_OTHER:
		default:
			keep[i] = true;
			break;
		}
	}
	if (n_host != 1)
		return al_http_reject(p, 400, err,
				      n_host == 0 ? "no Host"
						  : "more than one Host");
	char hh[AL_HTTP_HOST_MAX];
	unsigned hp = 0;
	if (parse_authority(p, host->value, host->value_len,
			    default_port(p->tls), hh, &hp, err) < 0)
		return -1;
	if (!req->absolute_form) {
		memcpy(req->host, hh, sizeof hh);
		req->port = hp;
	} else if (strcmp(req->host, hh) != 0 || req->port != hp) {
		return al_http_reject(p, 400, err,
				      "target authority %s:%u is not Host"
				      " %s:%u",
				      req->host, req->port, hh, hp);
	}
	if (n_te > 0) {
		if (req->version == 10)
			return al_http_reject(p, 400, err,
					      "Transfer-Encoding in HTTP/1.0");
		if (n_cl > 0)
			return al_http_reject(p, 400, err,
					      "both Transfer-Encoding and"
					      " Content-Length");
		if (n_te > 1)
			return al_http_reject(
				p, 400, err, "more than one Transfer-Encoding");
		if (!al_http_name_is(te->value, te->value_len, "chunked"))
			return al_http_reject(p, 501, err,
					      "transfer coding \"%s\" (only"
					      " chunked alone is accepted)",
					      te->value);
		req->body = AL_HTTP_BODY_CHUNKED;
	} else if (n_cl > 1) {
		return al_http_reject(p, 400, err,
				      "more than one Content-Length");
	} else if (n_cl == 1) {
		bool too_big;
		if (al_http_length_parse(cl->value, cl->value_len,
					 &req->content_length, &too_big) < 0)
			return al_http_reject(p, too_big ? 413 : 400, err,
					      too_big ? "Content-Length too"
							" large"
						      : "Content-Length is not"
							" digits");
		req->body = AL_HTTP_BODY_LENGTH;
	}
	if (n_expect > 1)
		return al_http_reject(p, 417, err, "more than one Expect");
	if (n_expect == 1) {
		if (!al_http_name_is(expect->value, expect->value_len,
				     "100-continue"))
			return al_http_reject(p, 417, err, "expectation \"%s\"",
					      expect->value);
		/* A 1.0 client does not wait for 100 (RFC 9110 10.1.1). */
		req->expect_continue = req->version == 11;
	}
	req->keep_alive = req->version == 11 && !conn.close;
	al_http_fields_keep(&req->fields, l, keep, &conn);
	return 0;
}

int al_http_req_parse(al_http_parser *p, const char *buf, size_t len,
		      al_http_req *req, size_t *head_len, al_err *err)
{
	size_t hl = 0;
	int rc = al_http_scan(p, buf, len, &hl, err);
	if (rc != 0)
		return rc;
	/* The tail room holds an absolute-form's origin-form path: at most
	 * the target plus a leading '/'. */
	al_http_lines l;
	if (al_http_lines_parse(p, buf, hl, hl + 2, AL_HTTP_REQ_FIELDS_MAX, &l,
				err) < 0)
		return -1;
	*req = (al_http_req){.head = l.head, .tls = p->tls};
	if (request_line(p, req, &l, l.head + hl + 1, err) < 0 ||
	    header_fields(p, req, &l, err) < 0) {
		al_http_req_free(req);
		return -1;
	}
	*head_len = hl;
	return 0;
}

void al_http_req_free(al_http_req *req)
{
	al_http_fields_free(&req->fields);
	free(req->head);
	req->head = NULL;
}

char *al_http_req_serialize(const al_http_req *req, bool close, size_t *len,
			    al_err *err)
{
	al_http_out o = {0};
	char num[48];
	al_http_out_str(&o, req->method);
	al_http_out_add(&o, " ", 1);
	al_http_out_str(&o, req->path);
	al_http_out_str(&o, req->version == 10 ? " HTTP/1.0\r\nHost: "
					       : " HTTP/1.1\r\nHost: ");
	al_http_out_str(&o, req->host);
	if (req->port != default_port(req->tls)) {
		snprintf(num, sizeof num, ":%u", req->port);
		al_http_out_str(&o, num);
	}
	al_http_out_add(&o, "\r\n", 2);
	al_http_out_fields(&o, &req->fields);
	if (req->body == AL_HTTP_BODY_LENGTH) {
		snprintf(num, sizeof num, "Content-Length: %" PRIu64 "\r\n",
			 req->content_length);
		al_http_out_str(&o, num);
	} else if (req->body == AL_HTTP_BODY_CHUNKED) {
		al_http_out_str(&o, "Transfer-Encoding: chunked\r\n");
	}
	if (close)
		al_http_out_str(&o, "Connection: close\r\n");
	al_http_out_add(&o, "\r\n", 2);
	return al_http_out_finish(&o, len, err);
}
