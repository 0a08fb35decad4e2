/* gw/http and gw/httpbody: the smuggling and framing tricks a hostile
 * guest (or upstream) tries are refused with the right status, normal
 * requests and responses come out re-serialised canonically, and a feed
 * split byte by byte gives the same result as one feed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gw/http.h"
#include "gw/httpbody.h"

#define H "Host: a.example\r\n"

typedef struct outcome {
	int rc;
	int status;
	size_t head_len;
} outcome;

/* Parse s as a request in one feed, then byte by byte: both must agree. */
static outcome parse_req(const char *s, size_t len, bool tls, al_http_req *req)
{
	al_http_parser p;
	al_err err;
	outcome one = {0}, split = {0};
	al_http_req_parser_init(&p, tls);
	one.rc = al_http_req_parse(&p, s, len, req, &one.head_len, &err);
	one.status = p.status;

	al_http_req r2;
	al_http_req_parser_init(&p, tls);
	split.rc = AL_AGAIN;
	for (size_t n = 1; n <= len && split.rc == AL_AGAIN; n++)
		split.rc = al_http_req_parse(&p, s, n, &r2, &split.head_len,
					     &err);
	split.status = p.status;
	assert_int_equal(one.rc, split.rc);
	assert_int_equal(one.status, split.status);
	if (one.rc == 0) {
		assert_int_equal(one.head_len, split.head_len);
		assert_string_equal(req->path, r2.path);
		assert_string_equal(req->host, r2.host);
		al_http_req_free(&r2);
	}
	return one;
}

static outcome req_str(const char *s, al_http_req *req)
{
	return parse_req(s, strlen(s), false, req);
}

static void assert_serialized(const al_http_req *req, bool close,
			      const char *want)
{
	size_t len = 0;
	al_err err;
	char *out = al_http_req_serialize(req, close, &len, &err);
	assert_non_null(out);
	assert_string_equal(out, want);
	assert_int_equal(len, strlen(want));
	free(out);
}

struct reject_case {
	const char *name;
	const char *bytes;
	size_t len; /* 0: strlen */
	bool tls;
	int status;
};

#define BIN(s) s, sizeof s - 1

static void test_smuggling_and_framing_tricks_are_refused(void **state)
{
	(void)state;
	static char long_head[AL_HTTP_REQ_HEAD_MAX + 64];
	static char many[AL_HTTP_REQ_HEAD_MAX];
	static char long_target[AL_HTTP_TARGET_MAX + 64];
	size_t o = (size_t)snprintf(long_head, sizeof long_head,
				    "GET / HTTP/1.1\r\n" H "X-Pad: ");
	memset(long_head + o, 'a', sizeof long_head - o - 5);
	memcpy(long_head + sizeof long_head - 5, "\r\n\r\n", 5);
	o = (size_t)snprintf(many, sizeof many, "GET / HTTP/1.1\r\n" H);
	for (int i = 0; i < AL_HTTP_REQ_FIELDS_MAX; i++)
		o += (size_t)snprintf(many + o, sizeof many - o, "X-%d: v\r\n",
				      i);
	snprintf(many + o, sizeof many - o, "\r\n");
	o = (size_t)snprintf(long_target, sizeof long_target, "GET /");
	memset(long_target + o, 'a', AL_HTTP_TARGET_MAX);
	snprintf(long_target + o + AL_HTTP_TARGET_MAX,
		 sizeof long_target - o - AL_HTTP_TARGET_MAX,
		 " HTTP/1.1\r\n" H "\r\n");

	const struct reject_case cases[] = {
		{"TE and CL",
		 "POST / HTTP/1.1\r\n" H "Content-Length: 5\r\n"
		 "Transfer-Encoding: chunked\r\n\r\n",
		 0, false, 400},
		{"CL and TE",
		 "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n"
		 "Content-Length: 5\r\n\r\n",
		 0, false, 400},
		{"TE chunked,identity",
		 "POST / HTTP/1.1\r\n" H
		 "Transfer-Encoding: chunked, identity\r\n\r\n",
		 0, false, 501},
		{"TE identity,chunked",
		 "POST / HTTP/1.1\r\n" H
		 "Transfer-Encoding: identity, chunked\r\n\r\n",
		 0, false, 501},
		{"TE identity",
		 "POST / HTTP/1.1\r\n" H "Transfer-Encoding: identity\r\n\r\n",
		 0, false, 501},
		{"TE xchunked",
		 "POST / HTTP/1.1\r\n" H "Transfer-Encoding: xchunked\r\n\r\n",
		 0, false, 501},
		{"TE twice",
		 "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n"
		 "Transfer-Encoding: chunked\r\n\r\n",
		 0, false, 400},
		{"TE empty",
		 "POST / HTTP/1.1\r\n" H "Transfer-Encoding:\r\n\r\n", 0, false,
		 501},
		{"TE in HTTP/1.0",
		 "POST / HTTP/1.0\r\n" H "Transfer-Encoding: chunked\r\n\r\n",
		 0, false, 400},
		{"duplicate CL, equal",
		 "POST / HTTP/1.1\r\n" H "Content-Length: 5\r\n"
		 "Content-Length: 5\r\n\r\n",
		 0, false, 400},
		{"CL list",
		 "POST / HTTP/1.1\r\n" H "Content-Length: 5, 5\r\n\r\n", 0,
		 false, 400},
		{"CL with plus",
		 "POST / HTTP/1.1\r\n" H "Content-Length: +5\r\n\r\n", 0, false,
		 400},
		{"CL negative",
		 "POST / HTTP/1.1\r\n" H "Content-Length: -1\r\n\r\n", 0, false,
		 400},
		{"CL hex",
		 "POST / HTTP/1.1\r\n" H "Content-Length: 0x5\r\n\r\n", 0,
		 false, 400},
		{"CL inner space",
		 "POST / HTTP/1.1\r\n" H "Content-Length: 1 2\r\n\r\n", 0,
		 false, 400},
		{"CL empty", "POST / HTTP/1.1\r\n" H "Content-Length:\r\n\r\n",
		 0, false, 400},
		{"CL space before colon",
		 "POST / HTTP/1.1\r\n" H "Content-Length : 5\r\n\r\n", 0, false,
		 400},
		{"CL huge",
		 "POST / HTTP/1.1\r\n" H
		 "Content-Length: 99999999999999999999999\r\n\r\n",
		 0, false, 413},
		{"CL over the cap",
		 "POST / HTTP/1.1\r\n" H
		 "Content-Length: 1099511627777\r\n\r\n",
		 0, false, 413},
		{"obs-fold", "GET / HTTP/1.1\r\n" H "X-A: b\r\n c\r\n\r\n", 0,
		 false, 400},
		{"obs-fold tab", "GET / HTTP/1.1\r\n" H "X-A: b\r\n\tc\r\n\r\n",
		 0, false, 400},
		{"fold as first field", "GET / HTTP/1.1\r\n " H "\r\n", 0,
		 false, 400},
		{"leading CRLF", "\r\nGET / HTTP/1.1\r\n" H "\r\n", 0, false,
		 400},
		{"leading CRLFs", "\r\n\r\nGET / HTTP/1.1\r\n" H "\r\n", 0,
		 false, 400},
		{"no Host", "GET / HTTP/1.1\r\n\r\n", 0, false, 400},
		{"no Host in HTTP/1.0", "GET / HTTP/1.0\r\n\r\n", 0, false,
		 400},
		{"empty Host", "GET / HTTP/1.1\r\nHost:\r\n\r\n", 0, false,
		 400},
		{"duplicate Host",
		 "GET / HTTP/1.1\r\n" H "Host: b.example\r\n\r\n", 0, false,
		 400},
		{"duplicate Host, equal", "GET / HTTP/1.1\r\n" H H "\r\n", 0,
		 false, 400},
		{"Host list",
		 "GET / HTTP/1.1\r\nHost: a.example, b.example\r\n\r\n", 0,
		 false, 400},
		{"absolute-form authority is not Host",
		 "GET http://evil.example/ HTTP/1.1\r\n" H "\r\n", 0, false,
		 400},
		{"absolute-form port is not Host's",
		 "GET http://a.example:8080/ HTTP/1.1\r\n" H "\r\n", 0, false,
		 400},
		{"absolute-form userinfo",
		 "GET http://user@a.example/ HTTP/1.1\r\n" H "\r\n", 0, false,
		 400},
		{"absolute-form userinfo with password",
		 "GET http://a.example:x@evil.example/ HTTP/1.1\r\n" H "\r\n",
		 0, false, 400},
		{"Host userinfo", "GET / HTTP/1.1\r\nHost: u@a.example\r\n\r\n",
		 0, false, 400},
		{"absolute-form ftp",
		 "GET ftp://a.example/ HTTP/1.1\r\n" H "\r\n", 0, false, 400},
		{"https target on plain",
		 "GET https://a.example/ HTTP/1.1\r\n" H "\r\n", 0, false, 400},
		{"http target on TLS",
		 "GET http://a.example/ HTTP/1.1\r\n" H "\r\n", 0, true, 400},
		{"absolute-form no slashes",
		 "GET http:a.example/ HTTP/1.1\r\n" H "\r\n", 0, false, 400},
		{"authority-form", "GET a.example:80 HTTP/1.1\r\n" H "\r\n", 0,
		 false, 400},
		{"asterisk-form", "OPTIONS * HTTP/1.1\r\n" H "\r\n", 0, false,
		 400},
		{"CONNECT", "CONNECT a.example:443 HTTP/1.1\r\n" H "\r\n", 0,
		 false, 405},
		{"connect lowercase",
		 "connect a.example:443 HTTP/1.1\r\n" H "\r\n", 0, false, 400},
		{"head lowercase", "head / HTTP/1.1\r\n" H "\r\n", 0, false,
		 400},
		{"TRACE", "TRACE / HTTP/1.1\r\n" H "\r\n", 0, false, 405},
		{"TRACK", "TRACK / HTTP/1.1\r\n" H "\r\n", 0, false, 405},
		{"Upgrade h2c",
		 "GET / HTTP/1.1\r\n" H
		 "Connection: Upgrade, HTTP2-Settings\r\n"
		 "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n",
		 0, false, 400},
		{"Upgrade websocket",
		 "GET / HTTP/1.1\r\n" H "Upgrade: websocket\r\n\r\n", 0, false,
		 400},
		{"HTTP2-Settings alone",
		 "GET / HTTP/1.1\r\n" H "HTTP2-Settings: AAMAAABk\r\n\r\n", 0,
		 false, 400},
		{"h2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0, false,
		 505},
		{"HTTP/1.2", "GET / HTTP/1.2\r\n" H "\r\n", 0, false, 505},
		{"http/1.1 lowercase", "GET / http/1.1\r\n" H "\r\n", 0, false,
		 400},
		{"HTTP/0.9", "GET /\r\n\r\n", 0, false, 400},
		{"bare LF", "GET / HTTP/1.1\n" H "\n", 0, false, 400},
		{"bare LF in a field",
		 "GET / HTTP/1.1\r\nX: a\nHost: b\r\n\r\n", 0, false, 400},
		{"bare LF head end", "GET / HTTP/1.1\r\n" H "\n", 0, false,
		 400},
		{"bare CR", "GET / HTTP/1.1\r\nX: a\rb\r\n" H "\r\n", 0, false,
		 400},
		{"CR CR LF", "GET / HTTP/1.1\r\n" H "\r\r\n\r\n", 0, false,
		 400},
		{"bare CR ends the head", "GET / HTTP/1.1\r\n" H "\r\r", 0,
		 false, 400},
		{"NUL in a value",
		 BIN("GET / HTTP/1.1\r\n" H "X: a\0b\r\n\r\n"), false, 400},
		{"NUL in the target", BIN("GET /\0 HTTP/1.1\r\n" H "\r\n"),
		 false, 400},
		{"control byte in a value",
		 "GET / HTTP/1.1\r\n" H "X: a\x01\r\n\r\n", 0, false, 400},
		{"DEL in a value", "GET / HTTP/1.1\r\n" H "X: a\x7f\r\n\r\n", 0,
		 false, 400},
		{"space in a name", "GET / HTTP/1.1\r\n" H "X A: b\r\n\r\n", 0,
		 false, 400},
		{"tab before colon",
		 "GET / HTTP/1.1\r\nHost\t: a.example\r\n\r\n", 0, false, 400},
		{"empty name", "GET / HTTP/1.1\r\n" H ": b\r\n\r\n", 0, false,
		 400},
		{"no colon", "GET / HTTP/1.1\r\n" H "Nocolon\r\n\r\n", 0, false,
		 400},
		{"bad name byte", "GET / HTTP/1.1\r\n" H "X\"y: b\r\n\r\n", 0,
		 false, 400},
		{"two spaces in the request line",
		 "GET  / HTTP/1.1\r\n" H "\r\n", 0, false, 400},
		{"trailing space in the request line",
		 "GET / HTTP/1.1 \r\n" H "\r\n", 0, false, 400},
		{"tab in the request line", "GET\t/ HTTP/1.1\r\n" H "\r\n", 0,
		 false, 400},
		{"method not a token", "G(T / HTTP/1.1\r\n" H "\r\n", 0, false,
		 400},
		{"fragment in the target", "GET /a#b HTTP/1.1\r\n" H "\r\n", 0,
		 false, 400},
		{"backslash in the target", "GET /a\\b HTTP/1.1\r\n" H "\r\n",
		 0, false, 400},
		{"bad percent", "GET /a%zz HTTP/1.1\r\n" H "\r\n", 0, false,
		 400},
		{"percent at the end", "GET /a% HTTP/1.1\r\n" H "\r\n", 0,
		 false, 400},
		{"non-ASCII target", "GET /\xc3\xa9 HTTP/1.1\r\n" H "\r\n", 0,
		 false, 400},
		{"Expect other",
		 "POST / HTTP/1.1\r\n" H "Expect: 200-ok\r\n\r\n", 0, false,
		 417},
		{"IPv6 literal", "GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", 0,
		 false, 400},
		{"port 0", "GET / HTTP/1.1\r\nHost: a.example:0\r\n\r\n", 0,
		 false, 400},
		{"port 65536",
		 "GET / HTTP/1.1\r\nHost: a.example:65536\r\n\r\n", 0, false,
		 400},
		{"empty port", "GET / HTTP/1.1\r\nHost: a.example:\r\n\r\n", 0,
		 false, 400},
		{"two ports", "GET / HTTP/1.1\r\nHost: a.example:80:81\r\n\r\n",
		 0, false, 400},
		{"non-ASCII host",
		 "GET / HTTP/1.1\r\nHost: \xc3\xa9.example\r\n\r\n", 0, false,
		 400},
		{"percent in host",
		 "GET / HTTP/1.1\r\nHost: a%2eexample\r\n\r\n", 0, false, 400},
		{"host with a slash",
		 "GET / HTTP/1.1\r\nHost: a.example/x\r\n\r\n", 0, false, 400},
		{"Content_Length",
		 "POST / HTTP/1.1\r\n" H "Content_Length: 5\r\n\r\n", 0, false,
		 400},
		{"Transfer_Encoding",
		 "POST / HTTP/1.1\r\n" H "Transfer_Encoding: chunked\r\n\r\n",
		 0, false, 400},
		{"bad Connection list",
		 "GET / HTTP/1.1\r\n" H "Connection: close x\r\n\r\n", 0, false,
		 400},
		{"head too long", long_head, sizeof long_head, false, 431},
		{"too many fields", many, 0, false, 431},
		{"target too long", long_target, 0, false, 414},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct reject_case *c = &cases[i];
		size_t len = c->len ? c->len : strlen(c->bytes);
		al_http_req req;
		outcome o2 = parse_req(c->bytes, len, c->tls, &req);
		if (o2.rc != -1 || o2.status != c->status)
			fail_msg("%s: rc %d status %d, want -1 and %d", c->name,
				 o2.rc, o2.status, c->status);
	}
}

static void test_get_is_parsed_and_reserialised(void **state)
{
	(void)state;
	al_http_req req;
	const char *s = "GET /a/b?c=d HTTP/1.1\r\nHost: A.Example.\r\n"
			"User-Agent: curl/8\r\nAccept:  */* \r\n\r\nNEXT";
	outcome o = req_str(s, &req);
	assert_int_equal(o.rc, 0);
	assert_int_equal(o.head_len, strlen(s) - 4);
	assert_string_equal(req.method, "GET");
	assert_string_equal(req.path, "/a/b?c=d");
	assert_string_equal(req.host, "a.example");
	assert_int_equal(req.port, 80);
	assert_int_equal(req.version, 11);
	assert_int_equal(req.body, AL_HTTP_BODY_NONE);
	assert_true(req.keep_alive);
	assert_false(req.expect_continue);
	assert_string_equal(al_http_fields_get(&req.fields, "accept"), "*/*");
	assert_serialized(&req, false,
			  "GET /a/b?c=d HTTP/1.1\r\nHost: a.example\r\n"
			  "User-Agent: curl/8\r\nAccept: */*\r\n\r\n");
	assert_serialized(&req, true,
			  "GET /a/b?c=d HTTP/1.1\r\nHost: a.example\r\n"
			  "User-Agent: curl/8\r\nAccept: */*\r\n"
			  "Connection: close\r\n\r\n");
	al_http_req_free(&req);
}

static void test_ports_and_absolute_form(void **state)
{
	(void)state;
	al_http_req req;
	const char *s = "GET / HTTP/1.1\r\nHost: a.example:443\r\n\r\n";
	assert_int_equal(parse_req(s, strlen(s), true, &req).rc, 0);
	assert_int_equal(req.port, 443);
	assert_serialized(&req, false,
			  "GET / HTTP/1.1\r\nHost: a.example\r\n\r\n");
	al_http_req_free(&req);

	s = "GET / HTTP/1.1\r\nHost: a.example:8443\r\n\r\n";
	assert_int_equal(parse_req(s, strlen(s), true, &req).rc, 0);
	assert_int_equal(req.port, 8443);
	assert_serialized(&req, false,
			  "GET / HTTP/1.1\r\nHost: a.example:8443\r\n\r\n");
	al_http_req_free(&req);

	/* Same authority after canonicalising: case, trailing dot, the
	 * scheme's default port. */
	s = "GET HTTPS://A.EXAMPLE.:443/x?y HTTP/1.1\r\nHost: a.example\r\n\r\n";
	assert_int_equal(parse_req(s, strlen(s), true, &req).rc, 0);
	assert_true(req.absolute_form);
	assert_string_equal(req.path, "/x?y");
	assert_serialized(&req, false,
			  "GET /x?y HTTP/1.1\r\nHost: a.example\r\n\r\n");
	al_http_req_free(&req);

	s = "GET http://a.example?q HTTP/1.1\r\nHost: a.example:80\r\n\r\n";
	assert_int_equal(req_str(s, &req).rc, 0);
	assert_string_equal(req.path, "/?q");
	al_http_req_free(&req);

	s = "GET http://a.example HTTP/1.1\r\nHost: a.example\r\n\r\n";
	assert_int_equal(req_str(s, &req).rc, 0);
	assert_string_equal(req.path, "/");
	al_http_req_free(&req);

	s = "GET / HTTP/1.1\r\nHost: 10.0.0.1:8080\r\n\r\n";
	assert_int_equal(req_str(s, &req).rc, 0);
	assert_string_equal(req.host, "10.0.0.1");
	assert_int_equal(req.port, 8080);
	al_http_req_free(&req);
}

static void test_post_with_length_and_pipelining(void **state)
{
	(void)state;
	const char *s = "POST /up HTTP/1.1\r\n" H "Content-Length: 3\r\n\r\nabc"
			"GET /second HTTP/1.1\r\nHost: b.example\r\n\r\n";
	size_t len = strlen(s);
	al_http_req req;
	outcome o = parse_req(s, len, false, &req);
	assert_int_equal(o.rc, 0);
	assert_int_equal(req.body, AL_HTTP_BODY_LENGTH);
	assert_int_equal(req.content_length, 3);
	assert_serialized(&req, false,
			  "POST /up HTTP/1.1\r\nHost: a.example\r\n"
			  "Content-Length: 3\r\n\r\n");

	al_httpbody b;
	al_httpbody_init(&b, req.body, req.content_length);
	size_t used;
	const char *data;
	size_t dl;
	al_err err;
	assert_int_equal(al_httpbody_feed(&b, s + o.head_len, len - o.head_len,
					  &used, &data, &dl, &err),
			 0);
	assert_int_equal(used, 3);
	assert_int_equal(dl, 3);
	assert_memory_equal(data, "abc", 3);
	al_http_req_free(&req);

	/* The second request is its own message, with its own Host. */
	size_t next = o.head_len + used;
	o = parse_req(s + next, len - next, false, &req);
	assert_int_equal(o.rc, 0);
	assert_int_equal(o.head_len, len - next);
	assert_string_equal(req.path, "/second");
	assert_string_equal(req.host, "b.example");
	al_http_req_free(&req);
}

/* A chunked POST, its body decoded up to the last chunk; what follows is
 * the next request, however the body tries to look like one. */
static void test_chunked_post_then_next_request(void **state)
{
	(void)state;
	const char *s =
		"POST /c HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n"
		"Expect: 100-continue\r\n\r\n"
		"23\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n\r\n0\r\n\r\n"
		"GET /next HTTP/1.1\r\n" H "\r\n";
	size_t len = strlen(s);
	al_http_req req;
	outcome o = parse_req(s, len, false, &req);
	assert_int_equal(o.rc, 0);
	assert_int_equal(req.body, AL_HTTP_BODY_CHUNKED);
	assert_true(req.expect_continue);
	assert_serialized(&req, false,
			  "POST /c HTTP/1.1\r\nHost: a.example\r\n"
			  "Transfer-Encoding: chunked\r\n\r\n");
	al_http_req_free(&req);

	al_httpbody b;
	al_httpbody_init(&b, AL_HTTP_BODY_CHUNKED, 0);
	size_t off = o.head_len, used, dl;
	const char *data;
	al_err err;
	int rc;
	do {
		rc = al_httpbody_feed(&b, s + off, len - off, &used, &data, &dl,
				      &err);
		assert_true(rc >= 0);
		if (dl > 0)
			assert_memory_equal(data, "GET /smuggled", 13);
		off += used;
	} while (rc == AL_AGAIN);
	o = parse_req(s + off, len - off, false, &req);
	assert_int_equal(o.rc, 0);
	assert_string_equal(req.path, "/next");
	al_http_req_free(&req);
}

static void test_hop_by_hop_fields_are_consumed(void **state)
{
	(void)state;
	const char *s =
		"PUT /x HTTP/1.1\r\nConnection: close, X-Secret\r\n" H
		"X-Secret: 1\r\nKeep-Alive: 5\r\nProxy-Connection: keep-alive\r\n"
		"Proxy-Authorization: Basic eDp5\r\nTE: trailers\r\n"
		"Trailer: X-T\r\nExpect: 100-Continue\r\nX-Kept: yes\r\n"
		"Transfer-Encoding: Chunked\r\n\r\n";
	al_http_req req;
	assert_int_equal(req_str(s, &req).rc, 0);
	assert_false(req.keep_alive);
	assert_true(req.expect_continue);
	assert_int_equal(req.body, AL_HTTP_BODY_CHUNKED);
	assert_null(al_http_fields_get(&req.fields, "x-secret"));
	assert_serialized(
		&req, true,
		"PUT /x HTTP/1.1\r\nHost: a.example\r\nX-Kept: yes\r\n"
		"Transfer-Encoding: chunked\r\n"
		"Connection: close\r\n\r\n");
	al_http_req_free(&req);

	/* HTTP/1.0: never kept alive; no 100 expected by such a client. */
	s = "GET / HTTP/1.0\r\n" H "Expect: 100-continue\r\n\r\n";
	assert_int_equal(req_str(s, &req).rc, 0);
	assert_int_equal(req.version, 10);
	assert_false(req.keep_alive);
	assert_false(req.expect_continue);
	assert_serialized(&req, false,
			  "GET / HTTP/1.0\r\nHost: a.example\r\n\r\n");
	al_http_req_free(&req);
}

/* A CGI-style upstream reads X_Api_Key as X-Api-Key: the guest's must go
 * when the gateway injects its own. */
static void test_set_field_removes_underscore_spellings(void **state)
{
	(void)state;
	const char *s = "GET / HTTP/1.1\r\n" H "x_api_key: guest\r\n"
			"X-API-KEY: guest2\r\nX-Api: kept\r\n\r\n";
	al_http_req req;
	al_err err;
	assert_int_equal(req_str(s, &req).rc, 0);
	assert_int_equal(al_http_fields_set(&req.fields, "X-Api-Key", "real",
					    &err),
			 0);
	assert_serialized(&req, false,
			  "GET / HTTP/1.1\r\nHost: a.example\r\nX-Api: kept\r\n"
			  "X-Api-Key: real\r\n\r\n");
	al_http_req_free(&req);
}

static void test_own_responses(void **state)
{
	(void)state;
	size_t len;
	al_err err;
	char *r = al_http_own_response(403, "denied by policy", true, &len,
				       &err);
	assert_non_null(r);
	assert_string_equal(r, "HTTP/1.1 403 Forbidden\r\n"
			       "Content-Type: text/plain\r\n"
			       "Content-Length: 17\r\nConnection: close\r\n\r\n"
			       "denied by policy\n");
	assert_int_equal(len, strlen(r));
	free(r);
	r = al_http_own_response(100, NULL, true, &len, &err);
	assert_non_null(r);
	assert_string_equal(r, "HTTP/1.1 100 Continue\r\n\r\n");
	free(r);
	assert_null(al_http_own_response(400, "a\r\nX: y", false, &len, &err));
}

static void test_set_field_replaces_and_refuses_injection(void **state)
{
	(void)state;
	const char *s = "GET / HTTP/1.1\r\n" H "Authorization: Bearer guest\r\n"
			"authorization: Bearer again\r\nAccept: x\r\n\r\n";
	al_http_req req;
	al_err err;
	assert_int_equal(req_str(s, &req).rc, 0);
	assert_int_equal(al_http_fields_set(&req.fields, "Authorization",
					    "Bearer real", &err),
			 0);
	assert_serialized(&req, false,
			  "GET / HTTP/1.1\r\nHost: a.example\r\nAccept: x\r\n"
			  "Authorization: Bearer real\r\n\r\n");
	assert_int_equal(al_http_fields_set(&req.fields, "Authorization",
					    "Bearer x\r\nHost: evil", &err),
			 -1);
	assert_int_equal(al_http_fields_set(&req.fields, "Host", "evil", &err),
			 -1);
	assert_int_equal(al_http_fields_set(&req.fields, "Content-Length", "0",
					    &err),
			 -1);
	assert_int_equal(al_http_fields_set(&req.fields, "X Y", "v", &err), -1);
	assert_int_equal(al_http_fields_set(&req.fields, "Content_Length", "0",
					    &err),
			 -1);
	assert_int_equal(al_http_fields_remove(&req.fields, "accept"), 1);
	assert_serialized(&req, false,
			  "GET / HTTP/1.1\r\nHost: a.example\r\n"
			  "Authorization: Bearer real\r\n\r\n");
	al_http_req_free(&req);
}

/* ---- responses ---- */

static outcome parse_resp(const char *s, const al_http_req *req,
			  al_http_resp *resp)
{
	size_t len = strlen(s);
	al_http_parser p;
	al_err err;
	outcome one = {0}, split = {.rc = AL_AGAIN};
	al_http_resp_parser_init(&p);
	one.rc = al_http_resp_parse(&p, s, len, req, resp, &one.head_len, &err);
	one.status = p.status;
	al_http_resp r2;
	al_http_resp_parser_init(&p);
	for (size_t n = 1; n <= len && split.rc == AL_AGAIN; n++)
		split.rc = al_http_resp_parse(&p, s, n, req, &r2,
					      &split.head_len, &err);
	split.status = p.status;
	assert_int_equal(one.rc, split.rc);
	assert_int_equal(one.status, split.status);
	if (split.rc == 0) {
		assert_int_equal(one.head_len, split.head_len);
		al_http_resp_free(&r2);
	}
	return one;
}

static void assert_resp_serialized(const al_http_resp *resp, bool close,
				   const char *want)
{
	size_t len;
	al_err err;
	char *out = al_http_resp_serialize(resp, close, &len, &err);
	assert_non_null(out);
	assert_string_equal(out, want);
	free(out);
}

static void test_response_framing(void **state)
{
	(void)state;
	al_http_resp r;
	outcome o =
		parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
			   "Alt-Svc: h3=\":443\"\r\nConnection: X-Hop\r\n"
			   "X-Hop: 1\r\nKeep-Alive: timeout=5\r\n"
			   "Set-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\nhello",
			   NULL, &r);
	assert_int_equal(o.rc, 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body, AL_HTTP_BODY_LENGTH);
	assert_int_equal(r.content_length, 5);
	assert_true(r.keep_alive);
	assert_resp_serialized(&r, false,
			       "HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\n"
			       "Set-Cookie: b=2\r\nContent-Length: 5\r\n\r\n");
	al_http_resp_free(&r);

	assert_int_equal(parse_resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: "
				    "chunked\r\n\r\n",
				    NULL, &r)
				 .rc,
			 0);
	assert_int_equal(r.body, AL_HTTP_BODY_CHUNKED);
	assert_resp_serialized(&r, false,
			       "HTTP/1.1 200 OK\r\n"
			       "Transfer-Encoding: chunked\r\n\r\n");
	al_http_resp_free(&r);

	/* No framing: the body runs to the close; the guest must be told. */
	assert_int_equal(parse_resp("HTTP/1.1 200 OK\r\n\r\n", NULL, &r).rc, 0);
	assert_int_equal(r.body, AL_HTTP_BODY_CLOSE);
	assert_false(r.keep_alive);
	assert_resp_serialized(&r, true,
			       "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
	al_http_resp_free(&r);

	/* HTTP/1.0 upstream and a missing reason phrase. */
	assert_int_equal(parse_resp("HTTP/1.0 404\r\nContent-Length: 0\r\n\r\n",
				    NULL, &r)
				 .rc,
			 0);
	assert_int_equal(r.status, 404);
	assert_string_equal(r.reason, "");
	assert_false(r.keep_alive);
	al_http_resp_free(&r);

	/* HEAD and 304: the length is the resource's, no body follows. */
	al_http_req head;
	assert_int_equal(req_str("HEAD / HTTP/1.1\r\n" H "\r\n", &head).rc, 0);
	assert_int_equal(parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 100"
				    "\r\n\r\n",
				    &head, &r)
				 .rc,
			 0);
	assert_int_equal(r.body, AL_HTTP_BODY_NONE);
	assert_true(r.has_length);
	assert_true(r.keep_alive);
	assert_resp_serialized(
		&r, false, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
	al_http_resp_free(&r);
	al_http_req_free(&head);
	assert_int_equal(parse_resp("HTTP/1.1 304 Not Modified\r\nETag: \"x\""
				    "\r\n\r\n",
				    NULL, &r)
				 .rc,
			 0);
	assert_int_equal(r.body, AL_HTTP_BODY_NONE);
	assert_true(r.keep_alive);
	al_http_resp_free(&r);
	assert_int_equal(parse_resp("HTTP/1.1 204 No Content\r\n"
				    "Content-Length: 0\r\n\r\n",
				    NULL, &r)
				 .rc,
			 0);
	assert_int_equal(r.body, AL_HTTP_BODY_NONE);
	al_http_resp_free(&r);

	/* An interim 100 or 103, then the final head. */
	const char *two = "HTTP/1.1 100 Continue\r\n\r\n"
			  "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
	o = parse_resp(two, NULL, &r);
	assert_int_equal(o.rc, 0);
	assert_true(r.interim);
	assert_int_equal(r.body, AL_HTTP_BODY_NONE);
	al_http_resp_free(&r);
	o = parse_resp(two + o.head_len, NULL, &r);
	assert_int_equal(o.rc, 0);
	assert_int_equal(r.status, 201);
	assert_false(r.interim);
	al_http_resp_free(&r);
	assert_int_equal(parse_resp("HTTP/1.1 103 Early Hints\r\nLink: </a>"
				    "\r\n\r\n",
				    NULL, &r)
				 .rc,
			 0);
	assert_true(r.interim);
	assert_resp_serialized(
		&r, true, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n");
	al_http_resp_free(&r);
}

static void test_bad_responses_are_502(void **state)
{
	(void)state;
	al_http_req req10;
	assert_int_equal(req_str("GET / HTTP/1.0\r\n" H "\r\n", &req10).rc, 0);
	static const struct {
		const char *name, *bytes;
	} cases[] = {
		{"TE and CL", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
			      "Transfer-Encoding: chunked\r\n\r\n"},
		{"duplicate CL",
		 "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n"},
		{"CL sign", "HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\n"},
		{"TE gzip",
		 "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"},
		{"TE in HTTP/1.0",
		 "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"},
		{"TE gzip, chunked",
		 "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"},
		{"101",
		 "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n"},
		{"204 with a body length",
		 "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n"},
		{"204 chunked",
		 "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n"},
		{"obs-fold", "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n"},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 0\n\n"},
		{"leading CRLF", "\r\nHTTP/1.1 200 OK\r\n\r\n"},
		{"HTTP/2", "HTTP/2 200\r\n\r\n"},
		{"HTTP/2.0", "HTTP/2.0 200 OK\r\n\r\n"},
		{"two-digit status", "HTTP/1.1 20 OK\r\n\r\n"},
		{"four-digit status", "HTTP/1.1 2000 OK\r\n\r\n"},
		{"status 600", "HTTP/1.1 600 X\r\n\r\n"},
		{"status 099", "HTTP/1.1 099 X\r\n\r\n"},
		{"control in reason", "HTTP/1.1 200 O\x01K\r\n\r\n"},
		{"space before colon",
		 "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n"},
		{"Content_Length",
		 "HTTP/1.1 200 OK\r\nContent_Length: 0\r\n\r\n"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		al_http_resp r;
		outcome o = parse_resp(cases[i].bytes, NULL, &r);
		if (o.rc != -1 || o.status != 502)
			fail_msg("%s: rc %d status %d", cases[i].name, o.rc,
				 o.status);
	}
	/* A server must not send chunked to a 1.0 client (RFC 9112 6.1). */
	al_http_resp r;
	outcome o = parse_resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked"
			       "\r\n\r\n",
			       &req10, &r);
	assert_int_equal(o.rc, -1);
	assert_int_equal(o.status, 502);
	al_http_req_free(&req10);
}

/* ---- bodies ---- */

typedef struct decoded {
	int rc;
	size_t used;
	char data[256];
	size_t data_len;
} decoded;

/* Decode buf feeding at most step bytes at a time (0: all at once). */
static decoded decode(enum al_http_body framing, uint64_t length,
		      const char *buf, size_t len, size_t step)
{
	al_httpbody b;
	al_httpbody_init(&b, framing, length);
	decoded d = {.rc = AL_AGAIN};
	size_t off = 0, avail = step ? 0 : len;
	al_err err;
	while (d.rc == AL_AGAIN) {
		if (step && off == avail) {
			if (avail == len)
				break;
			avail = avail + step > len ? len : avail + step;
		}
		if (!step && off == len)
			break;
		size_t used;
		const char *data;
		size_t dl;
		d.rc = al_httpbody_feed(&b, buf + off, avail - off, &used,
					&data, &dl, &err);
		if (d.rc < 0)
			break;
		assert_true(used > 0 || d.rc == 0);
		assert_true(dl <= used);
		if (dl > 0) {
			assert_ptr_equal(data + dl, buf + off + used);
			assert_true(d.data_len + dl <= sizeof d.data);
			memcpy(d.data + d.data_len, data, dl);
			d.data_len += dl;
		}
		off += used;
	}
	d.used = off;
	assert_int_equal(al_httpbody_done(&b), d.rc == 0);
	return d;
}

static void test_chunked_body_decodes_in_any_split(void **state)
{
	(void)state;
	static const char body[] = "5\r\nhello\r\n6;name=\"v\"\r\n world\r\n"
				   "000A\r\n0123456789\r\n0\r\nX-Trailer: t\r\n"
				   "X-Other: u\r\n\r\nGET / HTTP/1.1\r\n";
	size_t end = sizeof body - 1 - strlen("GET / HTTP/1.1\r\n");
	for (size_t step = 0; step <= 7; step++) {
		decoded d = decode(AL_HTTP_BODY_CHUNKED, 0, body,
				   sizeof body - 1, step);
		assert_int_equal(d.rc, 0);
		assert_int_equal(d.used, end);
		assert_int_equal(d.data_len, 21);
		assert_memory_equal(d.data, "hello world0123456789", 21);
	}
	decoded d = decode(AL_HTTP_BODY_CHUNKED, 0, BIN("0\r\n\r\n"), 1);
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.data_len, 0);
}

static void test_bad_chunked_bodies_are_refused(void **state)
{
	(void)state;
	static const struct {
		const char *name, *bytes;
	} cases[] = {
		{"huge size", "10000000000000000\r\n"},
		{"size over the cap", "10000000001\r\n"},
		{"leading space", " 5\r\nhello\r\n0\r\n\r\n"},
		{"trailing space", "5 \r\nhello\r\n0\r\n\r\n"},
		{"space before ext", "5 ;x\r\nhello\r\n0\r\n\r\n"},
		{"trailing garbage", "5x\r\nhello\r\n0\r\n\r\n"},
		{"plus sign", "+5\r\nhello\r\n0\r\n\r\n"},
		{"minus", "-1\r\n"},
		{"0x prefix", "0x5\r\nhello\r\n0\r\n\r\n"},
		{"empty size", "\r\nhello\r\n"},
		{"bare LF after size", "5\nhello\r\n0\r\n\r\n"},
		{"bare CR after size", "5\rhello\r\n0\r\n\r\n"},
		{"data longer than size", "5\r\nhello!\r\n0\r\n\r\n"},
		{"no CRLF after data", "5\r\nhelloX"},
		{"bare LF after data", "5\r\nhello\n0\r\n\r\n"},
		{"control in ext", "5;a\x01\r\nhello\r\n0\r\n\r\n"},
		{"trailer obs-fold", "0\r\nX: a\r\n b\r\n\r\n"},
		{"trailer space before colon", "0\r\nX : a\r\n\r\n"},
		{"trailer without colon", "0\r\nXa\r\n\r\n"},
		{"trailer bare LF", "0\r\nX: a\n\r\n"},
		{"final bare LF", "0\r\n\n"},
		{"control in a trailer", "0\r\nX: a\x01\r\n\r\n"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		for (size_t step = 0; step <= 1; step++) {
			decoded d = decode(AL_HTTP_BODY_CHUNKED, 0,
					   cases[i].bytes,
					   strlen(cases[i].bytes), step);
			if (d.rc != -1)
				fail_msg("%s (step %zu): rc %d", cases[i].name,
					 step, d.rc);
		}
	}
	/* Bounded extension and trailers. */
	static char big[AL_HTTPBODY_TRAILER_BYTES + 64];
	memset(big, 'a', sizeof big);
	memcpy(big, "1;", 2);
	decoded d = decode(AL_HTTP_BODY_CHUNKED, 0, big, sizeof big, 0);
	assert_int_equal(d.rc, -1);
	memcpy(big, "0\r\nX: ", 6);
	d = decode(AL_HTTP_BODY_CHUNKED, 0, big, sizeof big, 0);
	assert_int_equal(d.rc, -1);
	char many[1024] = "0\r\n";
	for (int i = 0; i <= AL_HTTPBODY_TRAILERS_MAX; i++)
		strcat(many, "X: y\r\n");
	d = decode(AL_HTTP_BODY_CHUNKED, 0, many, strlen(many), 0);
	assert_int_equal(d.rc, -1);
}

static void test_length_close_and_eof(void **state)
{
	(void)state;
	decoded d = decode(AL_HTTP_BODY_LENGTH, 4, BIN("abcdefgh"), 3);
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.used, 4);
	assert_memory_equal(d.data, "abcd", 4);
	d = decode(AL_HTTP_BODY_NONE, 0, BIN("abc"), 0);
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.used, 0);

	al_httpbody b;
	al_err err;
	size_t used, dl;
	const char *data;
	al_httpbody_init(&b, AL_HTTP_BODY_LENGTH, 10);
	assert_int_equal(al_httpbody_feed(&b, "abc", 3, &used, &data, &dl,
					  &err),
			 AL_AGAIN);
	assert_int_equal(al_httpbody_eof(&b, &err), -1);
	al_httpbody_init(&b, AL_HTTP_BODY_CHUNKED, 0);
	assert_int_equal(al_httpbody_feed(&b, "3\r\nab", 5, &used, &data, &dl,
					  &err),
			 AL_AGAIN);
	assert_int_equal(al_httpbody_eof(&b, &err), -1);
	al_httpbody_init(&b, AL_HTTP_BODY_CLOSE, 0);
	assert_int_equal(al_httpbody_feed(&b, "abc", 3, &used, &data, &dl,
					  &err),
			 AL_AGAIN);
	assert_int_equal(dl, 3);
	assert_int_equal(al_httpbody_eof(&b, &err), 0);
	assert_true(al_httpbody_done(&b));

	char head[AL_HTTPBODY_CHUNK_HEAD_MAX];
	assert_int_equal(al_httpbody_chunk_head(0x1f, head), 4);
	assert_string_equal(head, "1f\r\n");
	assert_int_equal(al_httpbody_chunk_head(UINT64_MAX, head), 18);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_smuggling_and_framing_tricks_are_refused),
		cmocka_unit_test(test_get_is_parsed_and_reserialised),
		cmocka_unit_test(test_ports_and_absolute_form),
		cmocka_unit_test(test_post_with_length_and_pipelining),
		cmocka_unit_test(test_chunked_post_then_next_request),
		cmocka_unit_test(test_hop_by_hop_fields_are_consumed),
		cmocka_unit_test(test_set_field_replaces_and_refuses_injection),
		cmocka_unit_test(test_set_field_removes_underscore_spellings),
		cmocka_unit_test(test_own_responses),
		cmocka_unit_test(test_response_framing),
		cmocka_unit_test(test_bad_responses_are_502),
		cmocka_unit_test(test_chunked_body_decodes_in_any_split),
		cmocka_unit_test(test_bad_chunked_bodies_are_refused),
		cmocka_unit_test(test_length_close_and_eof),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
