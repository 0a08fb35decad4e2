/* gw/credcodec: percent/JSON unescaping and base64 phases, byte by byte. */
#include "gw/credcodec.h"

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

bool al_credcodec_b64_gate_pass(al_credcodec_b64_gate *g, const char *buf,
				size_t i, size_t len, bool whole, size_t min,
				uint64_t at)
{
	unsigned char c = (unsigned char)buf[i];
	if (g->on) {
		if (b64[c] < 0 && c != '\r' && c != '\n')
			g->on = false; /* this byte ends every decoder's run */
		return true;
	}
	if (at < g->skip_end || b64[c] < 0)
		return false;
	size_t end;
	size_t k = al_credcodec_b64_run(buf + i, len - i, &end);
	if ((i + end < len || whole) && k < min) {
		g->skip_end = at + end;
		return false;
	}
	g->on = true;
	return true;
}
