/* Fuzz the gateway's response head parser (gw/http): an upstream is as
 * untrusted as the guest. The first byte picks the request answered (bit
 * 0: HEAD, bit 1: HTTP/1.0). The result is a head, "need more" or a 502;
 * feeding in pieces gives the same result; an accepted head re-serialises
 * into one the parser accepts with the same status and framing, and that
 * one re-serialises to itself. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gw/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int parse(const al_http_req *req, const char *buf, size_t len,
		 size_t step, al_http_resp *resp, size_t *head_len, int *status)
{
	al_http_parser p;
	al_err err;
	al_http_resp_parser_init(&p);
	int rc = AL_AGAIN;
	if (step == 0)
		rc = al_http_resp_parse(&p, buf, len, req, resp, head_len,
					&err);
	for (size_t n = step; step && n < len + step && rc == AL_AGAIN;
	     n += step)
		rc = al_http_resp_parse(&p, buf, n < len ? n : len, req, resp,
					head_len, &err);
	*status = p.status;
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	static const char *const reqs[] = {
		"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n",
		"HEAD / HTTP/1.1\r\nHost: a.example\r\n\r\n",
		"GET / HTTP/1.0\r\nHost: a.example\r\n\r\n",
		"HEAD / HTTP/1.0\r\nHost: a.example\r\n\r\n",
	};
	const char *rs = reqs[data[0] & 3];
	al_http_parser rp;
	al_http_req req;
	size_t rhl;
	al_err err;
	al_http_req_parser_init(&rp, false);
	if (al_http_req_parse(&rp, rs, strlen(rs), &req, &rhl, &err) != 0)
		abort();

	const char *buf = (const char *)data + 1;
	size_t len = size - 1;
	al_http_resp resp, again;
	size_t hl = 0, hl2 = 0;
	int st = 0, st2 = 0;
	int rc = parse(&req, buf, len, 0, &resp, &hl, &st);
	if (rc != 0 && rc != AL_AGAIN && rc != -1)
		abort();
	if (rc == -1 && st != 502)
		abort();
	for (size_t step = 1; step <= 7; step += 3) {
		int rc2 = parse(&req, buf, len, step, &again, &hl2, &st2);
		if (rc2 != rc || (rc == 0 && hl2 != hl))
			abort();
		if (rc2 == 0)
			al_http_resp_free(&again);
	}
	if (rc == 0) {
		if (hl > AL_HTTP_RESP_HEAD_MAX || hl > len)
			abort();
		if (resp.status < 100 || resp.status > 599 ||
		    resp.status == 101 || resp.interim != (resp.status < 200))
			abort();
		size_t out_len = 0;
		char *out = al_http_resp_serialize(&resp, false, &out_len,
						   &err);
		if (out == NULL)
			abort();
		if (out_len <= AL_HTTP_RESP_HEAD_MAX) {
			if (parse(&req, out, out_len, 0, &again, &hl2, &st2) !=
				    0 ||
			    hl2 != out_len || again.status != resp.status ||
			    again.body != resp.body ||
			    again.content_length != resp.content_length ||
			    again.fields.n != resp.fields.n)
				abort();
			size_t out2_len = 0;
			char *out2 = al_http_resp_serialize(&again, false,
							    &out2_len, &err);
			if (out2 == NULL || out2_len != out_len ||
			    memcmp(out, out2, out_len) != 0)
				abort();
			free(out2);
			al_http_resp_free(&again);
		}
		free(out);
		al_http_resp_free(&resp);
	}
	al_http_req_free(&req);
	return 0;
}
