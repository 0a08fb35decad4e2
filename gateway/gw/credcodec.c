/* gw/credcodec: percent/JSON unescaping and base64 phases, byte by byte. */
#include "gw/credcodec.h"

#include <stdlib.h>
#include <string.h>

#include "gw/http_internal.h"

void al_credcodec_unescape_init(al_credcodec_unescape *u)
{
	*u = (al_credcodec_unescape){0};
}

static void pass_pending(al_credcodec_unescape *u, al_credcodec_emit emit,
			 void *arg)
{
	for (unsigned i = 0; i < u->n; i++)
		emit(arg, u->pend[i], u->at + i, 0);
	u->n = 0;
}

/* A code point from \uXXXX as UTF-8 (surrogates as they are: a view,
 * not a validator). */
static void emit_utf8(unsigned cp, uint64_t at, al_credcodec_emit emit,
		      void *arg)
{
	if (cp < 0x80) {
		emit(arg, (unsigned char)cp, at, AL_CREDCODEC_JSON);
	} else if (cp < 0x800) {
		emit(arg, (unsigned char)(0xc0 | cp >> 6), at,
		     AL_CREDCODEC_JSON);
		emit(arg, (unsigned char)(0x80 | (cp & 0x3f)), at,
		     AL_CREDCODEC_JSON);
	} else {
		emit(arg, (unsigned char)(0xe0 | cp >> 12), at,
		     AL_CREDCODEC_JSON);
		emit(arg, (unsigned char)(0x80 | ((cp >> 6) & 0x3f)), at,
		     AL_CREDCODEC_JSON);
		emit(arg, (unsigned char)(0x80 | (cp & 0x3f)), at,
		     AL_CREDCODEC_JSON);
	}
}

static int json_simple(unsigned char c)
{
	switch (c) {
	case '/':
	case '\\':
	case '"':
		return c;
	case 'b':
		return '\b';
	case 'f':
		return '\f';
	case 'n':
		return '\n';
	case 'r':
		return '\r';
	case 't':
		return '\t';
	default:
		return -1;
	}
}

/* c continues the escape in u: 1 (taken, maybe finished), 0 (not). */
static int escape_more(al_credcodec_unescape *u, unsigned char c,
		       al_credcodec_emit emit, void *arg)
{
	if (u->pend[0] == '%') {
		if (al_hex_digit(c) < 0)
			return 0;
		if (u->n == 1) {
			u->pend[u->n++] = c;
			return 1;
		}
		unsigned v = (unsigned)(al_hex_digit(u->pend[1]) << 4 |
					al_hex_digit(c));
		emit(arg, (unsigned char)v, u->at, AL_CREDCODEC_PERCENT);
		u->n = 0;
		return 1;
	}
	if (u->n == 1) {
		if (c == 'u') {
			u->pend[u->n++] = c;
			return 1;
		}
		int s = json_simple(c);
		if (s < 0)
			return 0;
		emit(arg, (unsigned char)s, u->at, AL_CREDCODEC_JSON);
		u->n = 0;
		return 1;
	}
	if (al_hex_digit(c) < 0)
		return 0;
	u->pend[u->n++] = c;
	if (u->n < 6)
		return 1;
	unsigned cp = 0;
	for (unsigned i = 2; i < 6; i++)
		cp = cp << 4 | (unsigned)al_hex_digit(u->pend[i]);
	emit_utf8(cp, u->at, emit, arg);
	u->n = 0;
	return 1;
}

void al_credcodec_unescape_byte(al_credcodec_unescape *u, unsigned char c,
				uint64_t at, al_credcodec_emit emit, void *arg)
{
	if (u->n > 0) {
		if (escape_more(u, c, emit, arg))
			return;
		pass_pending(u, emit, arg);
	}
	if (c == '%' || c == '\\') {
		u->pend[0] = c;
		u->n = 1;
		u->at = at;
		return;
	}
	emit(arg, c, at, 0);
}

void al_credcodec_unescape_end(al_credcodec_unescape *u, al_credcodec_emit emit,
			       void *arg)
{
	pass_pending(u, emit, arg);
}

uint64_t al_credcodec_unescape_pending(const al_credcodec_unescape *u,
				       uint64_t next)
{
	return u->n > 0 ? u->at : next;
}

/* Both alphabets: '+' and '-' are 62, '/' and '_' are 63 (a table:
 * this is the hottest lookup of the masker). */
static const signed char b64[256] = {
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, 62, -1, 62, -1, 63, 52, 53, 54, 55, 56, 57,
	58, 59, 60, 61, -1, -1, -1, -1, -1, -1, -1, 0,	1,  2,	3,  4,	5,  6,
	7,  8,	9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
	25, -1, -1, -1, -1, 63, -1, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36,
	37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1,
};

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

int al_credcodec_b64_value(unsigned char c)
{
	return b64[c];
}

void al_credcodec_b64_init(al_credcodec_b64 *b, unsigned phase)
{
	*b = (al_credcodec_b64){.phase = phase};
}

static void run_end(al_credcodec_b64 *b, al_credcodec_break brk, void *arg)
{
	bool had = b->run > 0;
	b->run = 0;
	b->bits = 0;
	b->nbits = 0;
	b->crlf = 0;
	if (had)
		brk(arg);
}

void al_credcodec_b64_byte(al_credcodec_b64 *b, unsigned char c, uint64_t at,
			   al_credcodec_emit emit, al_credcodec_break brk,
			   void *arg)
{
	int v = b64[c];
	if (v < 0) {
		if ((c != '\r' && c != '\n') || ++b->crlf > 2)
			run_end(b, brk, arg);
		return;
	}
	b->crlf = 0;
	if (b->run < b->phase) {
		b->run++;
		return;
	}
	b->run = b->phase + 1; /* a run has started: its end is a break */
	if (b->nbits == 0)
		b->first = at;
	b->bits = (b->bits << 6 | (uint32_t)v) & 0xfff;
	b->nbits += 6;
	if (b->nbits < 8)
		return;
	b->nbits -= 8;
	emit(arg, (unsigned char)(b->bits >> b->nbits), b->first,
	     AL_CREDCODEC_BASE64);
	/* What is left (at most 4 bits) is this character's. */
	b->first = at;
}

void al_credcodec_b64_end(al_credcodec_b64 *b, al_credcodec_break brk,
			  void *arg)
{
	run_end(b, brk, arg);
}

uint64_t al_credcodec_b64_pending(const al_credcodec_b64 *b, uint64_t next)
{
	return b->nbits > 0 ? b->first : next;
}

size_t al_credcodec_b64_run(const char *buf, size_t len, size_t *end)
{
	size_t k = 0, i = 0;
	for (; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];
		if (b64[c] >= 0)
			k++;
		else if (c != '\r' && c != '\n')
			break;
	}
	*end = i;
	return k;
}

void al_credcodec_kmp_fail(const unsigned char *p, size_t len, size_t *fail)
{
	fail[0] = 0;
	for (size_t i = 1, k = 0; i < len; i++) {
		while (k > 0 && p[i] != p[k])
			k = fail[k - 1];
		if (p[i] == p[k])
			k++;
		fail[i] = k;
	}
}

typedef struct b64_core {
	unsigned char *v; /* 6-bit values */
	size_t len;	  /* 0: too short for one, in every run */
	size_t *fail;	  /* KMP failure function */
	int first;	  /* the one character of v[0], or -1 (62, 63:
			   * two characters, one per alphabet) */
} b64_core;

struct al_credcodec_b64_cores {
	b64_core *c;
	size_t n;
};

void al_credcodec_b64_cores_free(al_credcodec_b64_cores *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->c[i].v);
		free(c->c[i].fail);
	}
	free(c->c);
	free(c);
}

/* Characters j of the encoding of a zero bytes then t: the ones whose
 * 6 bits lie inside t, from ceil(8a / 6) to floor(8 (a + len) / 6). */
static int core_make(b64_core *k, const unsigned char *t, size_t len,
		     unsigned a)
{
	size_t lo = (8 * a + 5) / 6, hi = 8 * (a + len) / 6;
	if (hi <= lo)
		return 0;
	unsigned char *bytes = calloc(a + len + 2, 1);
	k->v = malloc(hi - lo);
	k->fail = malloc((hi - lo) * sizeof *k->fail);
	if (bytes == NULL || k->v == NULL || k->fail == NULL) {
		free(bytes);
		return -1;
	}
	memcpy(bytes + a, t, len);
	for (size_t j = lo; j < hi; j++) {
		size_t bit = 6 * j;
		unsigned w = (unsigned)bytes[bit / 8] << 8 | bytes[bit / 8 + 1];
		k->v[j - lo] = (unsigned char)(w >> (10 - bit % 8) & 63);
	}
	free(bytes);
	k->len = hi - lo;
	k->first = k->v[0] < 62 ? b64_alphabet[k->v[0]] : -1;
	al_credcodec_kmp_fail(k->v, k->len, k->fail);
	return 0;
}

al_credcodec_b64_cores *
al_credcodec_b64_cores_new(const unsigned char *const *texts,
			   const size_t *lens, size_t n)
{
	al_credcodec_b64_cores *c = calloc(1, sizeof *c);
	if (c == NULL)
		return NULL;
	c->c = calloc(3 * n + 1, sizeof *c->c);
	if (c->c == NULL) {
		free(c);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		for (unsigned a = 0; a < 3; a++)
			if (core_make(&c->c[c->n++], texts[i], lens[i], a) <
			    0) {
				al_credcodec_b64_cores_free(c);
				return NULL;
			}
	return c;
}

/* The index in buf of the last character of k's first occurrence, or
 * len; 0 for a core of no characters (in every run). */
static size_t core_end(const b64_core *k, const char *buf, size_t len)
{
	if (k->len == 0)
		return 0;
	size_t q = 0;
	for (size_t i = 0; i < len; i++) {
		/* With nothing matched, only v[0]'s character moves q:
		 * memchr skips to it (most runs hold none). */
		if (q == 0 && k->first >= 0) {
			const char *at = memchr(buf + i, k->first, len - i);
			if (at == NULL)
				return len;
			i = (size_t)(at - buf);
		}
		int v = b64[(unsigned char)buf[i]];
		if (v < 0)
			continue; /* CR or LF inside the run */
		while (q > 0 && k->v[q] != v)
			q = k->fail[q - 1];
		if (k->v[q] == v && ++q == k->len)
			return i;
	}
	return len;
}

bool al_credcodec_b64_cores_in(const al_credcodec_b64_cores *c, const char *buf,
			       size_t len)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->c[i].len == 0 || core_end(&c->c[i], buf, len) < len)
			return true;
	return false;
}

size_t al_credcodec_b64_cores_first_end(const al_credcodec_b64_cores *c,
					const char *buf, size_t len)
{
	size_t first = len;
	for (size_t i = 0; i < c->n; i++) {
		/* Each core searched only where it would end sooner. */
		size_t e = core_end(&c->c[i], buf, first);
		if (e < first)
			first = e;
	}
	return first;
}

size_t al_credcodec_b64_cores_longest(const al_credcodec_b64_cores *c)
{
	size_t n = 0;
	for (size_t i = 0; i < c->n; i++) {
		if (c->c[i].len == 0)
			return 0;
		if (c->c[i].len > n)
			n = c->c[i].len;
	}
	return n;
}

void al_credcodec_b64_gate_skip(al_credcodec_b64_gate *g, uint64_t to)
{
	g->on = false;
	g->skip_end = to;
	g->resume = true;
}

bool al_credcodec_b64_gate_pass(al_credcodec_b64_gate *g, const char *buf,
				size_t i, size_t len, bool whole, size_t min,
				const al_credcodec_b64_cores *cores,
				uint64_t at)
{
	unsigned char c = (unsigned char)buf[i];
	if (g->resume && at >= g->skip_end) {
		/* Past what the caller let them pass over: read on, as the
		 * caller found, without measuring the run again. */
		g->resume = false;
		g->on = true;
	}
	if (g->on) {
		if (b64[c] < 0 && c != '\r' && c != '\n')
			g->on = false; /* this byte ends every decoder's run */
		return true;
	}
	if (at < g->skip_end || b64[c] < 0)
		return false;
	size_t end;
	size_t k = al_credcodec_b64_run(buf + i, len - i, &end);
	if ((i + end < len || whole) &&
	    (k < min || (cores != NULL &&
			 !al_credcodec_b64_cores_in(cores, buf + i, end)))) {
		g->skip_end = at + end;
		return false;
	}
	g->on = true;
	return true;
}
