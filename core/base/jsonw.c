/* jsonw: a flat JSON object into a fixed buffer (jsonw.h). */
#include "base/jsonw.h"

#include <stdio.h>
#include <string.h>

void al_jsonw_start(al_jsonw *w, char *buf, size_t cap)
{
	*w = (al_jsonw){.p = buf, .cap = cap, .failed = cap < 3};
	if (!w->failed)
		w->p[w->len++] = '{';
}

static void put(al_jsonw *w, const char *s, size_t n)
{
	/* Room for the closing brace and the NUL stays. */
	if (w->failed || n > w->cap - w->len - 2) {
		w->failed = true;
		return;
	}
	memcpy(w->p + w->len, s, n);
	w->len += n;
}

static void key(al_jsonw *w, const char *k)
{
	if (w->len > 1)
		put(w, ",", 1);
	put(w, "\"", 1);
	put(w, k, strlen(k));
	put(w, "\":", 2);
}

/* Per byte: PLAIN needs no escape; PRINTABLE also stays as it is in a
 * printable string (0x20..0x7e). A table: the gateway writes a record
 * per injected request. */
enum { PLAIN = 1, PRINTABLE = 2 };
static const unsigned char classes[256] = {
	[0x20 ... 0x21] = PLAIN | PRINTABLE, /* '"' (0x22) and '\\' (0x5c): 0 */
	[0x23 ... 0x5b] = PLAIN | PRINTABLE,
	[0x5d ... 0x7e] = PLAIN | PRINTABLE,
	[0x7f ... 0xff] = PLAIN,
};

/* n bytes of s as a JSON string; printable: bytes outside 0x20..0x7e
 * as '?'. */
static void string(al_jsonw *w, const char *s, size_t n, bool printable)
{
	const unsigned char keep = printable ? PRINTABLE : PLAIN;
	put(w, "\"", 1);
	size_t i = 0;
	while (i < n && !w->failed) {
		size_t from = i;
		while (i < n && (classes[(unsigned char)s[i]] & keep))
			i++;
		put(w, s + from, i - from);
		if (i == n)
			break;
		unsigned char c = (unsigned char)s[i++];
		char e[8];
		if (printable && (c < 0x20 || c >= 0x7f))
			put(w, "?", 1);
		else if (c == '"' || c == '\\')
			put(w, (char[]){'\\', (char)c}, 2);
		else
			put(w, e, (size_t)snprintf(e, sizeof e, "\\u%04x", c));
	}
	put(w, "\"", 1);
}

void al_jsonw_str(al_jsonw *w, const char *k, const char *s)
{
	key(w, k);
	string(w, s, strlen(s), false);
}

void al_jsonw_printable(al_jsonw *w, const char *k, const char *s, size_t max)
{
	key(w, k);
	string(w, s, max > 0 ? strnlen(s, max - 1) : 0, true);
}

/* Digits written from the end (snprintf's "%lld" cost half of a
 * gateway's audit record). */
void al_jsonw_int(al_jsonw *w, const char *k, long long v)
{
	char n[24];
	size_t at = sizeof n;
	unsigned long long m = v < 0 ? 0ULL - (unsigned long long)v
				     : (unsigned long long)v;
	do {
		n[--at] = (char)('0' + m % 10);
		m /= 10;
	} while (m != 0);
	if (v < 0)
		n[--at] = '-';
	key(w, k);
	put(w, n + at, sizeof n - at);
}

void al_jsonw_bool(al_jsonw *w, const char *k, bool v)
{
	key(w, k);
	put(w, v ? "true" : "false", v ? 4 : 5);
}

void al_jsonw_null(al_jsonw *w, const char *k)
{
	key(w, k);
	put(w, "null", 4);
}

long al_jsonw_end(al_jsonw *w)
{
	if (w->failed)
		return -1;
	w->p[w->len++] = '}';
	w->p[w->len] = '\0';
	return (long)w->len;
}
