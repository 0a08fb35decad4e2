/* core/multipart: what a POST /v1/templates body turns into, whichever
 * way the network splits it, and what gets refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/multipart.h"

#define CT                                                                     \
	"multipart/form-data; boundary=------------------------d74496d66958873e"
#define B "------------------------d74496d66958873e"

/* The file part holds CRLFs, "--", a CR not followed by LF, a NUL and a
 * near miss of the delimiter (one character short). */
static const char ctx_bytes[] = "tar\r\n\r\n--\r\x01\0x\r\n-" B
				"\r\n--------------------------d74496d6695887"
				"\r\r\n-";

static size_t body_of(char *out, size_t cap)
{
	size_t n = (size_t)snprintf(
		out, cap,
		"--" B "\r\n"
		"Content-Disposition: form-data; name=\"name\"\r\n"
		"\r\n"
		"mytpl\r\n"
		"--" B "\r\n"
		"Content-Disposition: form-data; name=\"airlockfile\"; "
		"filename=\"Airlockfile\"\r\n"
		"Content-Type: application/octet-stream\r\n"
		"\r\n"
		"FROM scratch\r\nRUN x\r\n\r\n"
		"--" B "\r\n"
		"content-disposition: FORM-DATA; NAME=context; "
		"filename=\"c\\\"t x.tar\"\r\n"
		"Content-Type: application/x-tar\r\n"
		"\r\n");
	memcpy(out + n, ctx_bytes, sizeof ctx_bytes - 1);
	n += sizeof ctx_bytes - 1;
	n += (size_t)snprintf(out + n, cap - n, "\r\n--" B "--\r\n");
	return n;
}

/* Records the callbacks as text: "<name|filename|type>data</>". */
typedef struct rec {
	char buf[8192];
	size_t len;
	int fail_on_data;
} rec;

static void rec_add(rec *r, const char *s, size_t n)
{
	assert_true(r->len + n < sizeof r->buf);
	memcpy(r->buf + r->len, s, n);
	r->len += n;
}

static int on_begin(void *ctx, const char *name, const char *filename,
		    const char *ctype, al_err *err)
{
	(void)err;
	char tmp[1024];
	int n = snprintf(tmp, sizeof tmp, "<%s|%s|%s>", name,
			 filename != NULL ? filename : "-",
			 ctype != NULL ? ctype : "-");
	rec_add(ctx, tmp, (size_t)n);
	return 0;
}

static int on_data(void *ctx, const char *d, size_t n, al_err *err)
{
	rec *r = ctx;
	assert_true(n > 0);
	if (r->fail_on_data)
		return al_err_set(err, AL_ESYS, 0, "disk full");
	rec_add(r, d, n);
	return 0;
}

static int on_end(void *ctx, al_err *err)
{
	(void)err;
	rec_add(ctx, "</>", 3);
	return 0;
}

static const al_multipart_cbs cbs = {on_begin, on_data, on_end};

/* Parse body in pieces cut at cuts[0..ncuts). */
static int parse_split(const char *ct, const char *body, size_t len,
		       const size_t *cuts, size_t ncuts, rec *r, al_err *err)
{
	memset(r, 0, sizeof *r);
	al_multipart *mp = al_multipart_new(ct, &cbs, r, err);
	if (mp == NULL)
		return -1;
	size_t at = 0;
	int rc = 0;
	for (size_t i = 0; i <= ncuts && rc == 0; i++) {
		size_t end = i < ncuts ? cuts[i] : len;
		rc = al_multipart_feed(mp, body + at, end - at, err);
		at = end;
	}
	if (rc == 0)
		rc = al_multipart_finish(mp, err);
	al_multipart_free(mp);
	return rc;
}

static int parse_all(const char *ct, const char *body, size_t len, rec *r,
		     al_err *err)
{
	return parse_split(ct, body, len, NULL, 0, r, err);
}

static void expected(rec *want)
{
	memset(want, 0, sizeof *want);
	const char *a = "<name|-|->mytpl</>"
			"<airlockfile|Airlockfile|application/octet-stream>"
			"FROM scratch\r\nRUN x\r\n</>"
			"<context|c\"t x.tar|application/x-tar>";
	rec_add(want, a, strlen(a));
	rec_add(want, ctx_bytes, sizeof ctx_bytes - 1);
	rec_add(want, "</>", 3);
}

static void test_curl_body(void **state)
{
	(void)state;
	char body[4096];
	size_t len = body_of(body, sizeof body);
	rec r, want;
	al_err err = {0};
	expected(&want);
	if (parse_all(CT, body, len, &r, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(r.len, want.len);
	assert_memory_equal(r.buf, want.buf, want.len);
}

static void test_split_everywhere(void **state)
{
	(void)state;
	char body[4096];
	size_t len = body_of(body, sizeof body);
	rec r, want;
	al_err err = {0};
	expected(&want);
	for (size_t k = 0; k <= len; k++) {
		size_t cut = k;
		assert_int_equal(parse_split(CT, body, len, &cut, 1, &r, &err),
				 0);
		assert_int_equal(r.len, want.len);
		assert_memory_equal(r.buf, want.buf, want.len);
	}
	/* Two cuts around every window of 3 bytes, and one byte at a time. */
	for (size_t k = 0; k + 3 <= len; k++) {
		size_t cuts[2] = {k, k + 3};
		assert_int_equal(parse_split(CT, body, len, cuts, 2, &r, &err),
				 0);
		assert_memory_equal(r.buf, want.buf, want.len);
	}
	size_t *cuts = malloc(len * sizeof *cuts);
	assert_non_null(cuts);
	for (size_t k = 0; k < len; k++)
		cuts[k] = k;
	assert_int_equal(parse_split(CT, body, len, cuts, len, &r, &err), 0);
	assert_int_equal(r.len, want.len);
	assert_memory_equal(r.buf, want.buf, want.len);
	free(cuts);
}

static void test_truncated(void **state)
{
	(void)state;
	char body[4096];
	size_t len = body_of(body, sizeof body);
	/* Complete once the closing "--" is in: the last CRLF is epilogue. */
	size_t complete = len - 2;
	rec r;
	for (size_t k = 0; k < complete; k++) {
		al_err err = {0};
		assert_int_equal(parse_all(CT, body, k, &r, &err), -1);
		assert_int_equal(err.code, AL_EINVAL);
		assert_non_null(strstr(err.msg, "closing boundary"));
	}
	al_err err = {0};
	assert_int_equal(parse_all(CT, body, complete, &r, &err), 0);
}

static void test_boundary_header(void **state)
{
	(void)state;
	char b[AL_MP_BOUNDARY_MAX + 1];
	al_err err = {0};
	assert_int_equal(al_multipart_boundary(
				 "multipart/form-data; boundary=abc", b, &err),
			 0);
	assert_string_equal(b, "abc");
	assert_int_equal(
		al_multipart_boundary("Multipart/Form-Data;charset=utf-8;"
				      " BOUNDARY=\"a b:c?=d\"  ",
				      b, &err),
		0);
	assert_string_equal(b, "a b:c?=d");
	char seventy[128];
	snprintf(seventy, sizeof seventy, "multipart/form-data; boundary=%s",
		 "0123456789012345678901234567890123456789012345678901234567"
		 "890123456789");
	assert_int_equal(al_multipart_boundary(seventy, b, &err), 0);
	assert_int_equal(strlen(b), 70);

	static const char *const bad[] = {
		NULL,
		"",
		"application/json",
		"multipart/mixed; boundary=abc",
		"multipart/form-data",
		"multipart/form-data; charset=utf-8",
		"multipart/form-data; boundary=",
		"multipart/form-data; boundary=\"\"",
		"multipart/form-data; boundary=a@b",
		"multipart/form-data; boundary=\"a\rb\"",
		"multipart/form-data; boundary=\"ab \"",
		"multipart/form-data; boundary=\"abc",
		"multipart/form-data; boundary=a; boundary=b",
		"multipart/form-data; boundary=01234567890123456789012345678"
		"9012345678901234567890123456789012345678901",
		"multipart/form-data boundary=abc",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		al_err e = {0};
		if (al_multipart_boundary(bad[i], b, &e) != -1)
			fail_msg("accepted Content-Type '%s'", bad[i]);
		assert_int_equal(e.code, AL_EINVAL);
		assert_null(al_multipart_new(bad[i], &cbs, NULL, &e));
	}
}

static void expect_bad(const char *body, al_code code, const char *needle)
{
	rec r;
	al_err err = {0};
	if (parse_all("multipart/form-data; boundary=xx", body, strlen(body),
		      &r, &err) != -1)
		fail_msg("accepted body: %s", body);
	assert_int_equal(err.code, code);
	if (strstr(err.msg, needle) == NULL)
		fail_msg("message '%s' lacks '%s'", err.msg, needle);
}

#define CD "Content-Disposition: form-data; name=\"a\"\r\n"

static void test_refused(void **state)
{
	(void)state;
	expect_bad("--xx\r\n\r\nv\r\n--xx--", AL_EINVAL, "no Content-Disp");
	expect_bad("--xx\r\nContent-Disposition: attachment; name=\"a\"\r\n"
		   "\r\nv\r\n--xx--",
		   AL_EINVAL, "form-data");
	expect_bad("--xx\r\nContent-Disposition: form-data; name=\"a\"; "
		   "filename*=UTF-8''x\r\n\r\nv\r\n--xx--",
		   AL_EINVAL, "unsupported Content-Disposition");
	expect_bad("--xx\r\nContent-Disposition: form-data; name=\"a\"; "
		   "size=3\r\n\r\nv\r\n--xx--",
		   AL_EINVAL, "unsupported Content-Disposition");
	expect_bad("--xx\r\nContent-Disposition: form-data; filename=\"a\""
		   "\r\n\r\nv\r\n--xx--",
		   AL_EINVAL, "no name");
	expect_bad("--xx\r\nContent-Disposition: form-data; name=\"\"\r\n"
		   "\r\nv\r\n--xx--",
		   AL_EINVAL, "name is empty");
	expect_bad("--xx\r\nContent-Disposition: form-data; name=\"a\"; "
		   "name=\"b\"\r\n\r\nv\r\n--xx--",
		   AL_EINVAL, "unsupported Content-Disposition");
	expect_bad("--xx\r\n" CD CD "\r\nv\r\n--xx--", AL_EINVAL, "twice");
	expect_bad("--xx\n" CD "\r\nv\r\n--xx--", AL_EINVAL, "CRLF");
	expect_bad("--xx\r\nContent-Disposition: form-data;\n name=\"a\"\r\n"
		   "\r\nv\r\n--xx--",
		   AL_EINVAL, "CRLF");
	expect_bad("--xx\r\nContent-Disposition: form-data;\r\n name=\"a\""
		   "\r\n\r\nv\r\n--xx--",
		   AL_EINVAL, "Content-Disposition");
	expect_bad("--xx\r\n" CD "Content-Transfer-Encoding: base64\r\n\r\n"
		   "dg==\r\n--xx--",
		   AL_EINVAL, "Transfer-Encoding");
	expect_bad("--xx\r\n" CD "\r\nv\r\n--xxjunk\r\n", AL_EINVAL,
		   "not followed by CRLF");
	expect_bad("--xx\r\n" CD "\r\nv\r\n--xx-x", AL_EINVAL,
		   "not followed by CRLF");
	expect_bad("--xx\r\n" CD "\r\nv\r\n--xx\r\n" CD, AL_EINVAL,
		   "closing boundary");

	/* No boundary at all within the first 64 KiB of a huge body. */
	char *big = malloc(AL_MP_PADDING_MAX + 16);
	assert_non_null(big);
	memset(big, 'z', AL_MP_PADDING_MAX + 15);
	big[AL_MP_PADDING_MAX + 15] = '\0';
	expect_bad(big, AL_EINVAL, "no boundary");
	free(big);

	/* A header line over 8 KiB. */
	size_t cap = AL_MP_HEADER_MAX + 256;
	char *h = malloc(cap);
	assert_non_null(h);
	int n = snprintf(h, cap, "--xx\r\nX-Pad: ");
	memset(h + n, 'p', AL_MP_HEADER_MAX);
	snprintf(h + n + AL_MP_HEADER_MAX, cap - (size_t)n - AL_MP_HEADER_MAX,
		 "\r\n" CD "\r\nv\r\n--xx--");
	expect_bad(h, AL_ETOOBIG, "longer than");
	free(h);

	/* 17 headers in a part. */
	char hs[2048] = "--xx\r\n";
	for (int i = 0; i < AL_MP_HEADERS_MAX; i++)
		strcat(hs, "X-A: 1\r\n");
	strcat(hs, CD "\r\nv\r\n--xx--");
	expect_bad(hs, AL_ETOOBIG, "headers");

	/* 17 parts. */
	char parts[4096] = "";
	for (int i = 0; i <= AL_MP_PARTS_MAX; i++)
		strcat(parts, "--xx\r\n" CD "\r\nv\r\n");
	strcat(parts, "--xx--");
	expect_bad(parts, AL_ETOOBIG, "parts");
	/* 16 are fine. */
	parts[0] = '\0';
	for (int i = 0; i < AL_MP_PARTS_MAX; i++)
		strcat(parts, "--xx\r\n" CD "\r\nv\r\n");
	strcat(parts, "--xx--");
	rec r;
	al_err err = {0};
	assert_int_equal(parse_all("multipart/form-data; boundary=xx", parts,
				   strlen(parts), &r, &err),
			 0);
}

static void test_padding_and_callback_error(void **state)
{
	(void)state;
	const char *body = "preamble text\r\n--xx \t\r\n" CD "\r\n"
			   "\r\n--xx--\r\nepilogue";
	rec r;
	al_err err = {0};
	assert_int_equal(parse_all("multipart/form-data; boundary=xx", body,
				   strlen(body), &r, &err),
			 0);
	/* An empty part: begin and end, no data. */
	r.buf[r.len] = '\0';
	assert_string_equal(r.buf, "<a|-|-></>");

	/* A callback's error stops the parse and stays. */
	memset(&r, 0, sizeof r);
	r.fail_on_data = 1;
	const char *b2 = "--xx\r\n" CD "\r\nv\r\n--xx--";
	al_multipart *mp = al_multipart_new("multipart/form-data; boundary=xx",
					    &cbs, &r, &err);
	assert_non_null(mp);
	assert_int_equal(al_multipart_feed(mp, b2, strlen(b2), &err), -1);
	assert_int_equal(err.code, AL_ESYS);
	assert_string_equal(err.msg, "disk full");
	al_err err2 = {0};
	assert_int_equal(al_multipart_feed(mp, "x", 1, &err2), -1);
	assert_int_equal(err2.code, AL_ESYS);
	assert_int_equal(al_multipart_finish(mp, &err2), -1);
	al_multipart_free(mp);
}

static void test_form(void **state)
{
	(void)state;
	char body[4096];
	size_t len = body_of(body, sizeof body);
	char path[] = "/tmp/test_multipart_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	al_mp_field f[3] = {
		{.name = "name", .max = 63, .fd = -1, .required = 1},
		{.name = "airlockfile",
		 .max = 1 << 20,
		 .fd = -1,
		 .required = 1},
		{.name = "context", .max = 1ull << 30, .fd = fd, .required = 1},
	};
	al_err err = {0};
	al_multipart *mp = al_multipart_new_form(CT, f, 3, &err);
	assert_non_null(mp);
	for (size_t i = 0; i < len; i += 7) {
		size_t n = len - i < 7 ? len - i : 7;
		assert_int_equal(al_multipart_feed(mp, body + i, n, &err), 0);
	}
	assert_int_equal(al_multipart_finish(mp, &err), 0);
	al_multipart_free(mp);
	assert_string_equal(f[0].value, "mytpl");
	assert_null(f[0].filename);
	assert_string_equal(f[1].value, "FROM scratch\r\nRUN x\r\n");
	assert_string_equal(f[1].filename, "Airlockfile");
	assert_null(f[2].value);
	assert_int_equal(f[2].len, sizeof ctx_bytes - 1);
	char back[256];
	assert_int_equal(pread(fd, back, sizeof back, 0),
			 (ssize_t)(sizeof ctx_bytes - 1));
	assert_memory_equal(back, ctx_bytes, sizeof ctx_bytes - 1);
	al_mp_fields_free(f, 3);
	close(fd);

	/* Too big, unknown, twice, missing. */
	al_mp_field g[2] = {
		{.name = "name", .max = 4, .fd = -1, .required = 1},
		{.name = "context", .max = 100, .fd = -1, .required = 1},
	};
	const char *big = "--xx\r\nContent-Disposition: form-data; "
			  "name=\"name\"\r\n\r\n12345\r\n--xx--";
	mp = al_multipart_new_form("multipart/form-data; boundary=xx", g, 2,
				   &err);
	assert_int_equal(al_multipart_feed(mp, big, strlen(big), &err), -1);
	assert_int_equal(err.code, AL_ETOOBIG);
	al_multipart_free(mp);
	al_mp_fields_free(g, 2);

	const char *unk = "--xx\r\nContent-Disposition: form-data; "
			  "name=\"secret-looking\"\r\n\r\nx\r\n--xx--";
	mp = al_multipart_new_form("multipart/form-data; boundary=xx", g, 2,
				   &err);
	assert_int_equal(al_multipart_feed(mp, unk, strlen(unk), &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	assert_null(strstr(err.msg, "secret-looking"));
	assert_non_null(strstr(err.msg, "expected name, context"));
	al_multipart_free(mp);
	al_mp_fields_free(g, 2);

	const char *twice = "--xx\r\nContent-Disposition: form-data; "
			    "name=\"name\"\r\n\r\na\r\n"
			    "--xx\r\nContent-Disposition: form-data; "
			    "name=\"name\"\r\n\r\nb\r\n--xx--";
	mp = al_multipart_new_form("multipart/form-data; boundary=xx", g, 2,
				   &err);
	assert_int_equal(al_multipart_feed(mp, twice, strlen(twice), &err), -1);
	assert_non_null(strstr(err.msg, "sent twice"));
	al_multipart_free(mp);
	al_mp_fields_free(g, 2);

	const char *one = "--xx\r\nContent-Disposition: form-data; "
			  "name=\"name\"\r\n\r\nab\r\n--xx--\r\n";
	mp = al_multipart_new_form("multipart/form-data; boundary=xx", g, 2,
				   &err);
	assert_int_equal(al_multipart_feed(mp, one, strlen(one), &err), 0);
	assert_int_equal(al_multipart_finish(mp, &err), -1);
	assert_non_null(strstr(err.msg, "missing form field 'context'"));
	assert_string_equal(g[0].value, "ab");
	al_multipart_free(mp);
	al_mp_fields_free(g, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_curl_body),
		cmocka_unit_test(test_split_everywhere),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_boundary_header),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_padding_and_callback_error),
		cmocka_unit_test(test_form),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
