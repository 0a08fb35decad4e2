/* gw/credmask: a value echoed in any of its forms (plain, percent-
 * encoded, JSON-escaped, base64 at every alignment, base64url) comes out
 * as '*' of the same length, whatever the pieces the stream arrives in;
 * other text is untouched and not held back; memory stays bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "gw/credmask.h"

#define SECRET "ghp_S3cr3t/Value+42"

typedef struct sink {
	char *p;
	size_t len;
} sink;

static void to_sink(void *arg, const char *p, size_t n)
{
	sink *s = arg;
	s->p = realloc(s->p, s->len + n + 1);
	assert_non_null(s->p);
	memcpy(s->p + s->len, p, n);
	s->len += n;
	s->p[s->len] = '\0';
}

/* xorshift32: the same bodies every run. */
static uint32_t next_random(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

static al_credmask *masker(void)
{
	al_credmask_value v[] = {{SECRET, strlen(SECRET)},
				 {"second-token-xyz", 16}};
	al_err err;
	al_credmask *m = al_credmask_new(v, 2, &err);
	assert_non_null(m);
	return m;
}

/* Mask s in one feed and in pieces of 1..9, each way with the last
 * piece fed apart or with the end (al_credmask_feed_end): the same
 * output, of s's length. Returns the output (free it). */
static char *mask(al_credmask *m, const char *s)
{
	size_t len = strlen(s);
	sink one = {0};
	al_credmask_feed(m, s, len, to_sink, &one);
	al_credmask_end(m, to_sink, &one);
	assert_int_equal(one.len, len);
	for (size_t step = 1; step <= 9; step += 2)
		for (int last = 0; last < 2; last++) {
			sink k = {0};
			size_t i = 0;
			for (; i + step < len || (!last && i < len); i += step)
				al_credmask_feed(m, s + i,
						 len - i < step ? len - i
								: step,
						 to_sink, &k);
			if (last)
				al_credmask_feed_end(m, s + i, len - i, to_sink,
						     &k);
			else
				al_credmask_end(m, to_sink, &k);
			assert_int_equal(k.len, len);
			if (len > 0)
				assert_memory_equal(k.p, one.p, len);
			free(k.p);
		}
	sink whole = {0};
	al_credmask_feed_end(m, s, len, to_sink, &whole);
	assert_int_equal(whole.len, len);
	if (len > 0)
		assert_memory_equal(whole.p, one.p, len);
	free(whole.p);
	return one.p != NULL ? one.p : strdup("");
}

static bool has_secret_form(const char *out)
{
	return strstr(out, "S3cr3t") != NULL || strstr(out, "S3cr3") != NULL;
}

static void test_plain_percent_json(void **state)
{
	(void)state;
	al_credmask *m = masker();
	char *o = mask(m, "{\"authorization\":\"Bearer " SECRET "\"}");
	assert_string_equal(o, "{\"authorization\":\"Bearer "
			       "*******************\"}");
	free(o);
	o = mask(m, "q=ghp_S3cr3t%2FValue%2b42&x=1");
	assert_false(has_secret_form(o));
	assert_non_null(strstr(o, "&x=1"));
	assert_int_equal(o[0], 'q');
	free(o);
	o = mask(m, "%67%68%70%5f%53%33cr3t%2fValue%2B42");
	assert_int_equal(strspn(o, "*"), strlen(o));
	free(o);
	o = mask(m, "\"ghp_S3cr3t\\/Value+42\" \"\\u0067hp_S3cr3t/Value+42\"");
	assert_false(has_secret_form(o));
	free(o);
	o = mask(m, "second-token-xyz" SECRET "second-token-xyz");
	assert_int_equal(strspn(o, "*"), strlen(o));
	free(o);
	o = mask(m, "nothing secret ghp_S3cr3t/Valu here");
	assert_string_equal(o, "nothing secret ghp_S3cr3t/Valu here");
	free(o);
	al_credmask_free(m);
}

static void test_base64_every_alignment(void **state)
{
	(void)state;
	al_credmask *m = masker();
	const char *pre[] = {"", "u:", "us:", "Bearer "};
	for (size_t i = 0; i < 4; i++) {
		char plain[128], enc[256], s[300];
		snprintf(plain, sizeof plain, "%s" SECRET " tail", pre[i]);
		EVP_EncodeBlock((unsigned char *)enc,
				(const unsigned char *)plain,
				(int)strlen(plain));
		snprintf(s, sizeof s, "echo: Basic %s.", enc);
		char *o = mask(m, s);
		unsigned char dec[300];
		/* What is left of the base64 no longer decodes to the
		 * value: its characters are masked. */
		const char *e = o + strlen("echo: Basic ");
		size_t el = strcspn(e, "*");
		assert_true(el < strlen(enc));
		assert_non_null(strchr(o, '*'));
		int dl = EVP_DecodeBlock(dec, (const unsigned char *)e,
					 (int)(el - el % 4));
		assert_true(dl >= 0);
		assert_null(memmem(dec, (size_t)dl, "S3cr3t", 6));
		assert_int_equal(o[strlen(o) - 1], '.');
		free(o);
	}
	al_credmask_free(m);
}

/* Long runs seen whole: one that holds a value's base64 (URL-safe, CR
 * and LF inside) is masked, one that cannot decode to a value passes
 * as it is (gw/credcodec's cores). */
static void test_base64_cores_in_long_runs(void **state)
{
	(void)state;
	al_credmask *m = masker();
	char plain[128], enc[256], s[512];
	snprintf(plain, sizeof plain, "x" SECRET " and a tail to make it long");
	int el = EVP_EncodeBlock((unsigned char *)enc,
				 (const unsigned char *)plain,
				 (int)strlen(plain));
	size_t n = 0;
	n += (size_t)snprintf(s + n, sizeof s - n, "data: ");
	for (int i = 0; i < el; i++) {
		char c = enc[i] == '+' ? '-' : enc[i] == '/' ? '_' : enc[i];
		s[n++] = c;
		if (i % 10 == 9) {
			s[n++] = '\r';
			s[n++] = '\n';
		}
	}
	s[n] = '\0';
	/* The run reaching the stream's end (a body's last bytes), then
	 * followed by more text. */
	char *o = mask(m, s);
	assert_int_equal(strlen(o), strlen(s));
	assert_non_null(strchr(o, '*'));
	assert_false(has_secret_form(o));
	free(o);
	snprintf(s + n, sizeof s - n, ";end");
	o = mask(m, s);
	assert_int_equal(strlen(o), strlen(s));
	assert_non_null(strchr(o, '*'));
	assert_memory_equal(o, "data: ", 6);
	assert_string_equal(o + strlen(o) - 4, ";end");
	free(o);
	al_credmask_free(m);

	m = masker();
	char other[300];
	for (size_t i = 0; i < sizeof other - 1; i++)
		other[i] = "AZaz09+/-_"[i % 10];
	other[sizeof other - 1] = '\0';
	snprintf(s, sizeof s, "[%s]", other);
	o = mask(m, s);
	assert_string_equal(o, s);
	free(o);
	al_credmask_free(m);
}

/* A value whose base64 at one alignment starts with 62 ('+' or '-',
 * one per alphabet): '~' is 0x7e, and two bytes before it put its low
 * six bits first. Masked in a long run seen whole, either alphabet. */
static void test_base64_core_of_two_characters(void **state)
{
	(void)state;
	static const char value[] = "~tok_abcdefgh12345678";
	al_credmask_value v[] = {{value, strlen(value)}};
	al_err err;
	al_credmask *m = al_credmask_new(v, 1, &err);
	assert_non_null(m);
	char plain[128], enc[256], s[300];
	snprintf(plain, sizeof plain, "ab%s and a tail to make it long", value);
	int el = EVP_EncodeBlock((unsigned char *)enc,
				 (const unsigned char *)plain,
				 (int)strlen(plain));
	assert_int_equal(enc[3], '+');
	for (int url = 0; url < 2; url++) {
		for (int i = 0; url && i < el; i++)
			enc[i] = enc[i] == '+'	 ? '-'
				 : enc[i] == '/' ? '_'
						 : enc[i];
		snprintf(s, sizeof s, "[%s]", enc);
		char *o = mask(m, s);
		assert_non_null(strchr(o, '*'));
		assert_null(strstr(o, enc + 4));
		assert_string_equal(o + strlen(o) - 1, "]");
		free(o);
	}
	al_credmask_free(m);
}

static void test_nothing_held_after_plain_text(void **state)
{
	(void)state;
	al_credmask *m = masker();
	sink s = {0};
	const char *ev = "data: {\"delta\":\"hello\"}\n\n";
	al_credmask_feed(m, ev, strlen(ev), to_sink, &s);
	/* A streamed event leaves whole: nothing waits for more bytes. */
	assert_int_equal(al_credmask_held(m), 0);
	assert_string_equal(s.p, ev);
	/* A value's beginning is held until it cannot be the value. */
	al_credmask_feed(m, "ghp_S3c", 7, to_sink, &s);
	assert_int_equal(al_credmask_held(m), 7);
	al_credmask_feed(m, "!", 1, to_sink, &s);
	assert_int_equal(al_credmask_held(m), 0);
	al_credmask_end(m, to_sink, &s);
	free(s.p);
	al_credmask_free(m);
}

static void test_bounded_on_hostile_streams(void **state)
{
	(void)state;
	al_credmask *m = masker();
	/* A base64 run that never ends, and the value's prefix over and
	 * over: what is held stays under the ring's bound. */
	char buf[4096];
	size_t max_held = 0, total = 0;
	sink s = {0};
	for (int r = 0; r < 64; r++) {
		for (size_t i = 0; i < sizeof buf; i++)
			buf[i] = "ghp_S3cr3t/Valu"[i % 15];
		al_credmask_feed(m, buf, sizeof buf, to_sink, &s);
		total += sizeof buf;
		if (al_credmask_held(m) > max_held)
			max_held = al_credmask_held(m);
		free(s.p);
		s = (sink){0};
	}
	assert_true(max_held <= 6 * strlen(SECRET) + 64 + 64);
	al_credmask_end(m, to_sink, &s);
	free(s.p);
	al_credmask_free(m);
}

/* The masker skips bytes that cannot be part of a value (short words,
 * binary): each form is still masked in a long stream of them, in any
 * pieces, and as a head's field. */
static void test_every_form_among_skipped_bytes(void **state)
{
	(void)state;
	al_credmask *m = masker();
	char forms[10][128];
	snprintf(forms[0], sizeof forms[0], "%s", SECRET);
	snprintf(forms[1], sizeof forms[1], "%s",
		 "%67%68%70_S3cr3t%2FValue%2B42");
	snprintf(forms[2], sizeof forms[2], "%s",
		 "\\u0067hp_S3cr3t\\/Value+42");
	for (int a = 0; a < 3; a++) {
		char plain[64];
		snprintf(plain, sizeof plain, "%.*s%s", a, "xy", SECRET);
		EVP_EncodeBlock((unsigned char *)forms[3 + a],
				(const unsigned char *)plain,
				(int)strlen(plain));
	}
	snprintf(forms[6], sizeof forms[6], "%s", forms[3]);
	for (char *c = forms[6]; *c; c++)
		*c = *c == '+' ? '-' : *c == '/' ? '_' : *c; /* base64url */
	snprintf(forms[7], sizeof forms[7], "%s", "second-token-xyz");
	/* The first byte raw, the next escaped: read on from the raw one. */
	snprintf(forms[8], sizeof forms[8], "%s", "g%68p_S3cr3t/Value+42");
	snprintf(forms[9], sizeof forms[9], "%s", "g\\u0068p_S3cr3t/Value+42");
	char filler[600];
	for (size_t i = 0; i < sizeof filler - 1; i++)
		filler[i] = i % 7 == 6	  ? ' '
			    : i % 50 < 40 ? "the quick fox "[i % 14]
					  : (char)(0x80 + i % 100);
	filler[sizeof filler - 1] = '\0';
	for (int f = 0; f < 10; f++) {
		char s[1400];
		int w = snprintf(s, sizeof s, "%s %s\r\n%s", filler, forms[f],
				 filler);
		assert_true(w > 0 && (size_t)w < sizeof s);
		char *o = mask(m, s);
		const char *at = strstr(s, forms[f]);
		size_t off = (size_t)(at - s);
		/* The form's bytes are masked, the filler around left. */
		assert_non_null(memchr(o + off, '*', strlen(forms[f])));
		assert_null(memmem(o, strlen(o), forms[f], strlen(forms[f])));
		assert_memory_equal(o, s, strlen(filler));
		assert_string_equal(o + strlen(o) - strlen(filler), filler);
		char *h = strdup(s);
		al_credmask_string(m, h, strlen(h));
		assert_string_equal(h, o);
		free(h);
		free(o);
	}
	/* A field too short to hold any value is left as it is. */
	char h[] = "ghp_S3cr3t";
	al_credmask_string(m, h, strlen(h));
	assert_string_equal(h, "ghp_S3cr3t");
	al_credmask_free(m);
}

/* The last piece of a body fed with its end (al_credmask_feed_end, as
 * the gateway does): a value's base64 that reaches past the ring's room
 * (256 bytes for these values) is still masked, wherever it starts. It
 * was not: a run cut by the room was taken as ending the stream, seen
 * short on both sides of the cut and passed over. */
static void test_base64_across_the_ring_in_a_last_piece(void **state)
{
	(void)state;
	al_credmask *m = masker();
	char enc[64];
	EVP_EncodeBlock((unsigned char *)enc, (const unsigned char *)"x" SECRET,
			(int)strlen("x" SECRET));
	size_t el = strlen(enc);
	for (size_t off = 200; off < 300; off++) {
		char s[400];
		memset(s, '.', sizeof s);
		memcpy(s + off, enc, el);
		sink o = {0};
		al_credmask_feed_end(m, s, sizeof s, to_sink, &o);
		assert_int_equal(o.len, sizeof s);
		assert_null(memmem(o.p, o.len, enc + 4, 8));
		assert_non_null(memchr(o.p + off, '*', el));
		free(o.p);
	}
	al_credmask_free(m);
}

/* SECRET's base64 at raw offsets at[0..n) of one base64 run of 30,000
 * random bytes (an encoded file, CR LF every 76 characters), longer
 * than every piece: masked at each, the same whatever the pieces (byte
 * by byte the decoders never pass over any of it: see mask()), in 16 KiB
 * pieces too, as from TLS records. exact: no other occurrence counted
 * (no value of the masker is among the random bytes). */
static void masked_in_a_long_run(al_credmask *m, const size_t *at, size_t n,
				 bool exact)
{
	enum { RAW = 30000 };
	unsigned char *raw = malloc(RAW);
	assert_non_null(raw);
	uint32_t x = 88675123u;
	for (size_t i = 0; i < RAW; i++)
		raw[i] = (unsigned char)next_random(&x);
	size_t vl = strlen(SECRET);
	for (size_t k = 0; k < n; k++)
		memcpy(raw + at[k], SECRET, vl);
	unsigned char *enc = malloc(RAW * 2);
	char *s = malloc(RAW * 2);
	assert_true(enc != NULL && s != NULL);
	int el = EVP_EncodeBlock(enc, raw, RAW);
	size_t len = 0;
	for (int c = 0; c < el; c++) {
		s[len++] = (char)enc[c];
		if (c % 76 == 75) {
			s[len++] = '\r';
			s[len++] = '\n';
		}
	}
	s[len] = '\0';
	char *o = mask(m, s);
	unsigned long before = al_credmask_count(m);
	sink k = {0};
	for (size_t i = 0; i < len; i += 16384)
		al_credmask_feed(m, s + i, len - i < 16384 ? len - i : 16384,
				 to_sink, &k);
	al_credmask_end(m, to_sink, &k);
	if (exact)
		assert_int_equal(al_credmask_count(m) - before, n);
	else
		assert_true(al_credmask_count(m) - before >= n);
	assert_memory_equal(k.p, o, len);
	for (size_t j = 0; j < n; j++) {
		/* The characters that only the value's bits decide. */
		size_t lo = (8 * at[j] + 5) / 6, hi = 8 * (at[j] + vl) / 6;
		for (size_t c = lo; c < hi; c++)
			assert_int_equal(o[c + 2 * (c / 76)], '*');
	}
	free(k.p);
	free(o);
	free(s);
	free(enc);
	free(raw);
}

/* A value's base64 deep inside a long run, at each byte alignment, far
 * apart and close together (the decoders pass over most of the run
 * between: skip_ahead, and back off where cores come close); with a
 * value of one byte too (an empty core: in every run, nothing passed
 * over). */
static void test_base64_value_inside_a_long_run(void **state)
{
	(void)state;
	al_credmask *m = masker();
	const size_t far[] = {3000, 9001, 15002, 21000, 27001};
	masked_in_a_long_run(m, far, 5, true);
	size_t near[200];
	size_t n = 0;
	for (size_t at = 1000; n < 200; n++) {
		near[n] = at; /* 20-26 bytes apart, 700 more after each 50th */
		at += 20 + n % 7 + (n % 50 == 49 ? 700 : 0);
	}
	masked_in_a_long_run(m, near, n, true);
	al_credmask_free(m);
	al_credmask_value v[] = {{SECRET, strlen(SECRET)}, {"~", 1}};
	al_err err;
	m = al_credmask_new(v, 2, &err);
	assert_non_null(m);
	masked_in_a_long_run(m, far, 5, false);
	masked_in_a_long_run(m, near, n, false);
	al_credmask_free(m);
}

/* A large binary body (no NUL: mask() takes a string), among it every
 * form of a value and base64 stretches one short of and as long as the
 * shortest run that may hold a value (22 characters here), CR/LF among
 * some: fed whole (passed over a stretch at a time) the output is what
 * one byte at a time gives; the forms are masked, nothing else is. */
static void binary_body(al_credmask *m)
{
	static const char b64[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char enc[64];
	EVP_EncodeBlock((unsigned char *)enc, (const unsigned char *)"x" SECRET,
			(int)strlen("x" SECRET));
	const char *forms[] = {SECRET, enc, "%67%68%70_S3cr3t%2FValue%2B42",
			       "second-token-xyz"};
	enum { LEN = 24000 };
	char *s = malloc(LEN + 1);
	assert_non_null(s);
	uint32_t x = 2463534242u;
	size_t at[40], flen[40], nf = 0;
	for (size_t i = 0; i < LEN;) {
		next_random(&x);
		if (x % 97 == 0 && i + 80 < LEN && nf < 40) {
			const char *f = forms[nf % 4];
			s[i++] = ' ';
			at[nf] = i;
			flen[nf] = strlen(f);
			memcpy(s + i, f, flen[nf]);
			i += flen[nf++];
			s[i++] = ' ';
		} else if (x % 89 == 0 && i + 40 < LEN) {
			size_t n = 21 + x % 2, crlf = x % 3 == 0 ? 5 : 0;
			s[i++] = ' ';
			for (size_t k = 0; k < n; k++) {
				if (crlf != 0 && k == crlf)
					s[i++] = '\n';
				s[i++] = b64[(x >> 8) % 64 ^ k % 64];
			}
			s[i++] = ' ';
		} else {
			s[i++] = (char)(1 + x % 255);
		}
	}
	s[LEN] = '\0';
	assert_true(nf >= 8);
	char *o = mask(m, s);
	size_t next = 0;
	for (size_t f = 0; f < nf; f++) {
		assert_memory_equal(o + next, s + next, at[f] - next);
		assert_non_null(memchr(o + at[f], '*', flen[f]));
		next = at[f] + flen[f];
	}
	assert_memory_equal(o + next, s + next, LEN - next);
	assert_null(memmem(o, LEN, "S3cr3t", 6));
	assert_null(memmem(o, LEN, "second-token", 12));
	free(o);
	free(s);
}

/* With the two values, and with so many more that their first bytes are
 * looked up in the table, not searched 16 at a time. */
static void test_binary_body_as_fed_byte_by_byte(void **state)
{
	(void)state;
	al_credmask *m = masker();
	binary_body(m);
	al_credmask_free(m);
	al_credmask_value v[] = {{SECRET, strlen(SECRET)},
				 {"second-token-xyz", 16},
				 {"token-3-aaaaaaaaaaaa", 20},
				 {"Key-4-bbbbbbbbbbbb", 18},
				 {"1token-5-cccccccccc", 19},
				 {"Ztoken-6-dddddddddd", 19},
				 {"_token-7-eeeeeeeeee", 19}};
	al_err err;
	m = al_credmask_new(v, sizeof v / sizeof v[0], &err);
	assert_non_null(m);
	binary_body(m);
	al_credmask_free(m);
}

static void test_string_in_place_and_bad_values(void **state)
{
	(void)state;
	al_credmask *m = masker();
	char h[] = "X-Echo: " SECRET;
	al_credmask_string(m, h, strlen(h));
	assert_string_equal(h, "X-Echo: *******************");
	assert_true(al_credmask_count(m) >= 1);
	al_credmask_free(m);
	al_err err;
	al_credmask_value empty = {"", 0};
	assert_null(al_credmask_new(&empty, 1, &err));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_percent_json),
		cmocka_unit_test(test_base64_every_alignment),
		cmocka_unit_test(test_base64_cores_in_long_runs),
		cmocka_unit_test(test_base64_core_of_two_characters),
		cmocka_unit_test(test_nothing_held_after_plain_text),
		cmocka_unit_test(test_bounded_on_hostile_streams),
		cmocka_unit_test(test_every_form_among_skipped_bytes),
		cmocka_unit_test(test_base64_across_the_ring_in_a_last_piece),
		cmocka_unit_test(test_base64_value_inside_a_long_run),
		cmocka_unit_test(test_binary_body_as_fed_byte_by_byte),
		cmocka_unit_test(test_string_in_place_and_bad_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
