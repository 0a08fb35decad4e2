/* gw/http responses: the status line, framing by RFC 9112 6.3, and the
 * canonical head written to the guest. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw/http.h"
#include "gw/http_internal.h"

static int status_line(al_http_parser *p, al_http_resp *resp,
		       const al_http_lines *l, al_err *err)
{
	char *s = l->first;
	size_t len = l->first_len;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return al_http_reject(p, 502, err,
					      "control byte 0x%02x in the"
					      " status line",
					      c);
	}
	if (len < 12 || s[8] != ' ')
		return al_http_reject(p, 502, err, "malformed status line");
	if (memcmp(s, "HTTP/1.1", 8) == 0)
		resp->version = 11;
	else if (memcmp(s, "HTTP/1.0", 8) == 0)
		resp->version = 10;
	else
		return al_http_reject(p, 502, err, "version %.8s", s);
	int status = 0;
	for (int i = 9; i < 12; i++) {
		if (s[i] < '0' || s[i] > '9')
			return al_http_reject(p, 502, err,
					      "status is not 3 digits");
		status = status * 10 + (s[i] - '0');
	}
	if (status < 100 || status > 599)
		return al_http_reject(p, 502, err, "status %d", status);
	/* "HTTP/1.1 200" without SP and reason: unambiguous, accepted. */
	if (len > 12 && s[12] != ' ')
		return al_http_reject(p, 502, err, "status is not 3 digits");
	resp->status = status;
	resp->reason = len > 12 ? s + 13 : "";
	return 0;
}

static int framing(al_http_parser *p, al_http_resp *resp,
		   const al_http_req *req, al_http_lines *l, al_err *err)
{
	const al_http_raw *cl = NULL, *te = NULL;
	size_t n_cl = 0, n_te = 0;
	al_http_conn conn = {0};
	/* Kept: OTHER only. Hop-by-hop and framing are rewritten; Alt-Svc
	 * would send clients to QUIC, which the gateway does not carry. */
	bool keep[AL_HTTP_RESP_FIELDS_MAX] = {0};
	for (size_t i = 0; i < l->n; i++) {
		al_http_raw *f = &l->raw[i];
		enum al_http_kind k = al_http_name_kind(f->name, f->name_len);
		keep[i] = k == AL_HTTP_K_OTHER;
		if (k == AL_HTTP_K_IMITATION)
			return al_http_reject(p, 502, err,
					      "%s (an '_' spelling of a framing"
					      " or hop-by-hop field)",
					      f->name);
		if (k == AL_HTTP_K_CONTENT_LENGTH) {
			cl = f;
			n_cl++;
		} else if (k == AL_HTTP_K_TRANSFER_ENCODING) {
			te = f;
			n_te++;
		} else if (k == AL_HTTP_K_CONNECTION &&
			   al_http_conn_parse(f->value, &conn) < 0) {
			return al_http_reject(p, 502, err,
					      "Connection is not a list of at"
					      " most %d tokens",
					      AL_HTTP_CONN_NAMES_MAX);
		}
	}
	int st = resp->status;
	if (st == 101)
		return al_http_reject(p, 502, err,
				      "101 Switching Protocols (no upgrade"
				      " was asked)");
	bool head = req != NULL && strcmp(req->method, "HEAD") == 0;
	int req_version = req != NULL ? req->version : 11;
	uint64_t length = 0;
	if (n_te > 0) {
		if (n_cl > 0)
			return al_http_reject(p, 502, err,
					      "both Transfer-Encoding and"
					      " Content-Length");
		if (n_te > 1 ||
		    !al_http_name_is(te->value, te->value_len, "chunked"))
			return al_http_reject(p, 502, err,
					      "transfer coding other than"
					      " chunked alone");
		if (req_version == 10)
			return al_http_reject(p, 502, err,
					      "Transfer-Encoding answering"
					      " HTTP/1.0");
		/* Its framing is faulty by definition (RFC 9112 6.1). */
		if (resp->version == 10)
			return al_http_reject(p, 502, err,
					      "Transfer-Encoding in HTTP/1.0");
		if (st < 200 || st == 204)
			return al_http_reject(p, 502, err,
					      "Transfer-Encoding in a %d", st);
	}
	if (n_cl > 1)
		return al_http_reject(p, 502, err,
				      "more than one Content-Length");
	if (n_cl == 1) {
		bool too_big;
		if (al_http_length_parse(cl->value, cl->value_len, &length,
					 &too_big) < 0)
			return al_http_reject(p, 502, err, "Content-Length %s",
					      too_big ? "too large"
						      : "is not digits");
		/* "Content-Length: 0" on a 204 is common and harmless. */
		if ((st < 200 || st == 204) && length != 0)
			return al_http_reject(p, 502, err,
					      "Content-Length in a %d", st);
	}
	resp->interim = st < 200;
	if (st < 200 || st == 204 || st == 304 || head) {
		resp->body = AL_HTTP_BODY_NONE;
		resp->has_length = n_cl == 1 && (st == 304 || head);
		resp->content_length = resp->has_length ? length : 0;
	} else if (n_te > 0) {
		resp->body = AL_HTTP_BODY_CHUNKED;
	} else if (n_cl == 1) {
		resp->body = AL_HTTP_BODY_LENGTH;
		resp->content_length = length;
		resp->has_length = true;
	} else {
		resp->body = AL_HTTP_BODY_CLOSE;
	}
	resp->keep_alive = resp->version == 11 && !conn.close &&
			   resp->body != AL_HTTP_BODY_CLOSE;
	al_http_fields_keep(&resp->fields, l, keep, &conn);
	return 0;
}

int al_http_resp_parse(al_http_parser *p, const char *buf, size_t len,
		       const al_http_req *req, al_http_resp *resp,
		       size_t *head_len, al_err *err)
{
	size_t hl = 0;
	int rc = al_http_scan(p, buf, len, &hl, err);
	if (rc != 0)
		return rc;
	al_http_lines l;
	if (al_http_lines_parse(p, buf, hl, 0, AL_HTTP_RESP_FIELDS_MAX, &l,
				err) < 0)
		return -1;
	*resp = (al_http_resp){.head = l.head};
	if (status_line(p, resp, &l, err) < 0 ||
	    framing(p, resp, req, &l, err) < 0) {
		al_http_resp_free(resp);
		return -1;
	}
	*head_len = hl;
	return 0;
}

void al_http_resp_free(al_http_resp *resp)
{
	al_http_fields_free(&resp->fields);
	free(resp->head);
	resp->head = NULL;
}

char *al_http_resp_serialize(const al_http_resp *resp, bool close, size_t *len,
			     al_err *err)
{
	al_http_out o = {0};
	char num[64];
	snprintf(num, sizeof num, "HTTP/1.1 %03d ", resp->status);
	al_http_out_str(&o, num);
	al_http_out_str(&o, resp->reason);
	al_http_out_add(&o, "\r\n", 2);
	al_http_out_fields(&o, &resp->fields);
	if (!resp->interim) {
		if (resp->has_length) {
			snprintf(num, sizeof num,
				 "Content-Length: %" PRIu64 "\r\n",
				 resp->content_length);
			al_http_out_str(&o, num);
		} else if (resp->body == AL_HTTP_BODY_CHUNKED) {
			al_http_out_str(&o, "Transfer-Encoding: chunked\r\n");
		}
		if (close)
			al_http_out_str(&o, "Connection: close\r\n");
	}
	al_http_out_add(&o, "\r\n", 2);
	return al_http_out_finish(&o, len, err);
}
