/* Fuzz the gateway's request head parser (gw/http). The first byte picks
 * the connection (odd: TLS), the rest is the guest's bytes. Whatever they
 * are: the result is a head, "need more" or a refusal with one of the
 * documented statuses; feeding the bytes in pieces gives the same result;
 * an accepted head re-serialises into one the parser accepts again with
 * the same meaning, and that one re-serialises to itself; a credential
 * the gateway sets is the only one of its name upstream, whatever the
 * guest sent. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gw/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int parse(bool tls, const char *buf, size_t len, size_t step,
		 al_http_req *req, size_t *head_len, int *status)
{
	al_http_parser p;
	al_err err;
	al_http_req_parser_init(&p, tls);
	int rc = AL_AGAIN;
	if (step == 0)
		rc = al_http_req_parse(&p, buf, len, req, head_len, &err);
	for (size_t n = step; step && n < len + step && rc == AL_AGAIN;
	     n += step)
		rc = al_http_req_parse(&p, buf, n < len ? n : len, req,
				       head_len, &err);
	*status = p.status;
	return rc;
}

static bool status_known(int s)
{
	static const int known[] = {400, 405, 413, 414, 417, 431, 501, 505};
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		if (s == known[i])
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool tls = data[0] & 1;
	const char *buf = (const char *)data + 1;
	size_t len = size - 1;
	al_http_req req, again;
	size_t hl = 0, hl2 = 0;
	int st = 0, st2 = 0;
	int rc = parse(tls, buf, len, 0, &req, &hl, &st);
	if (rc != 0 && rc != AL_AGAIN && rc != -1)
		abort();
	if (rc == -1 && !status_known(st))
		abort();
	for (size_t step = 1; step <= 7; step += 3) {
		int rc2 = parse(tls, buf, len, step, &again, &hl2, &st2);
		if (rc2 != rc || (rc == -1 && st2 != st) ||
		    (rc == 0 && hl2 != hl))
			abort();
		if (rc2 == 0)
			al_http_req_free(&again);
	}
	if (rc != 0)
		return 0;
	if (hl > AL_HTTP_REQ_HEAD_MAX || hl > len)
		abort();

	al_err err;
	size_t out_len = 0;
	char *out = al_http_req_serialize(&req, false, &out_len, &err);
	if (out == NULL)
		abort();
	/* Field lines may grow by the ": " the serialiser writes. */
	if (out_len <= AL_HTTP_REQ_HEAD_MAX) {
		if (parse(tls, out, out_len, 0, &again, &hl2, &st2) != 0 ||
		    hl2 != out_len)
			abort();
		if (strcmp(req.method, again.method) != 0 ||
		    strcmp(req.path, again.path) != 0 ||
		    strcmp(req.host, again.host) != 0 ||
		    req.port != again.port || req.body != again.body ||
		    req.content_length != again.content_length ||
		    req.version != again.version ||
		    req.fields.n != again.fields.n)
			abort();
		size_t out2_len = 0;
		char *out2 = al_http_req_serialize(&again, false, &out2_len,
						   &err);
		if (out2 == NULL || out2_len != out_len ||
		    memcmp(out, out2, out_len) != 0)
			abort();
		free(out2);
		al_http_req_free(&again);
	}
	free(out);

	if (al_http_fields_set(&req.fields, "X-Api-Key", "secret", &err) != 0)
		abort();
	out = al_http_req_serialize(&req, true, &out_len, &err);
	if (out == NULL)
		abort();
	if (out_len <= AL_HTTP_REQ_HEAD_MAX) {
		if (parse(tls, out, out_len, 0, &again, &hl2, &st2) != 0)
			abort();
		const char *v = al_http_fields_get(&again.fields, "x-api-key");
		if (v == NULL || strcmp(v, "secret") != 0 ||
		    al_http_fields_remove(&again.fields, "x-api-key") != 1 ||
		    again.keep_alive)
			abort();
		al_http_req_free(&again);
	}
	free(out);
	al_http_req_free(&req);
	return 0;
}
