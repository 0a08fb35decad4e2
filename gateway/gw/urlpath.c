/* gw/urlpath: see urlpath.h. */
#include "gw/urlpath.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/hex.h"

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

/* UTF-8 of encoded bytes (RFC 3629): how many continuation bytes are
 * still due, and the range the next one must be in (the second byte's
 * range rules out overlong forms, surrogates and past U+10FFFF). */
typedef struct utf8 {
	int due;
	unsigned char lo, hi;
} utf8;

/* 0, or -1 when b cannot come next. */
static int utf8_step(utf8 *u, unsigned char b)
{
	if (u->due > 0) {
		if (b < u->lo || b > u->hi)
			return -1;
		u->due--;
		u->lo = 0x80;
		u->hi = 0xbf;
		return 0;
	}
	u->lo = 0x80;
	u->hi = 0xbf;
	if (b < 0x80)
		return 0;
	if (b >= 0xc2 && b <= 0xdf)
		u->due = 1;
	else if (b >= 0xe0 && b <= 0xef) {
		u->due = 2;
		if (b == 0xe0)
			u->lo = 0xa0;
		else if (b == 0xed)
			u->hi = 0x9f;
	} else if (b >= 0xf0 && b <= 0xf4) {
		u->due = 3;
		if (b == 0xf0)
			u->lo = 0x90;
		else if (b == 0xf4)
			u->hi = 0x8f;
	} else {
		return -1;
	}
	return 0;
}

static const char hexdig[] = "0123456789ABCDEF";

/* One segment t[i..end) decoded into out (which is at or behind t + i:
 * the normal form never grows); its length, or -1 with *why. */
static long segment(const char *t, size_t i, size_t end, char *out,
		    const char **why)
{
	utf8 u = {0};
	size_t o = 0;
	while (i < end) {
		unsigned char c = (unsigned char)t[i];
		if (c != '%') {
			if (u.due > 0)
				goto not_utf8;
			out[o++] = (char)c;
			i++;
			continue;
		}
		unsigned char v =
			(unsigned char)(al_hex_digit((unsigned char)t[i + 1])
						<< 4 |
					al_hex_digit((unsigned char)t[i + 2]));
		i += 3;
		if (v == '/' || v == '\\') {
			*why = "an encoded '/' or '\\' in the path";
			return -1;
		}
		if (v == 0) {
			*why = "an encoded NUL in the path";
			return -1;
		}
		if (utf8_step(&u, v) < 0)
			goto not_utf8;
		if (unreserved(v)) {
			out[o++] = (char)v;
			continue;
		}
		out[o++] = '%';
		out[o++] = hexdig[v >> 4];
		out[o++] = hexdig[v & 15];
	}
	if (u.due > 0)
		goto not_utf8;
	return (long)o;
not_utf8:
	*why = "encoded bytes in the path that are not UTF-8";
	return -1;
}

static bool is_dots(const char *s, size_t n)
{
	return (n == 1 && s[0] == '.') ||
	       (n == 2 && s[0] == '.' && s[1] == '.');
}

/* "." or ".." before parameters (";", or its encoding, which some
 * servers decode first): a dot segment to them, not to us. */
static bool dots_with_params(const char *s, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (s[k] == ';' || (s[k] == '%' && k + 2 < n &&
				    s[k + 1] == '3' && s[k + 2] == 'B'))
			return is_dots(s, k);
	return false;
}

int al_urlpath_normalize(char *t, size_t len, size_t *out_len, const char **why)
{
	if (len == 0 || t[0] != '/') {
		*why = "the path does not start with '/'";
		return -1;
	}
	const char *q = memchr(t, '?', len);
	size_t plen = q != NULL ? (size_t)(q - t) : len;
	/* w: the normal form so far, "/seg/seg" (no trailing '/'); each
	 * segment is decoded behind the '/' put at t[w] and kept only if
	 * it is not a dot segment. */
	size_t w = 0, i = 0;
	bool trailing = false;
	while (i < plen) {
		while (i < plen && t[i] == '/')
			i++;
		size_t end = i;
		while (end < plen && t[end] != '/')
			end++;
		t[w] = '/';
		long n = segment(t, i, end, t + w + 1, why);
		if (n < 0)
			return -1;
		const char *seg = t + w + 1;
		bool last = end == plen;
		i = end;
		if (n == 0) {
			trailing = last;
		} else if (is_dots(seg, (size_t)n)) {
			if (n == 2)
				while (w > 0 && t[--w] != '/')
					;
			trailing = last;
		} else if (dots_with_params(seg, (size_t)n)) {
			*why = "a dot segment with parameters in the path";
			return -1;
		} else {
			w += 1 + (size_t)n;
			trailing = false;
		}
	}
	if (w == 0 || trailing)
		t[w++] = '/';
	/* Double encoding, judged on the normal form (which is what a
	 * server decoding twice would decode again). */
	for (size_t k = 0; k + 4 < w; k++)
		if (memcmp(t + k, "%25", 3) == 0 &&
		    al_hex_digit((unsigned char)t[k + 3]) >= 0 &&
		    al_hex_digit((unsigned char)t[k + 4]) >= 0) {
			*why = "an encoded '%' starting another encoding in "
			       "the path";
			return -1;
		}
	size_t qlen = len - plen;
	memmove(t + w, t + plen, qlen);
	t[w + qlen] = '\0';
	*out_len = w + qlen;
	return 0;
}
