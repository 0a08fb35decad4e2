#include "base/hex.h"

#include <stdbool.h>

int al_hex_digit(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int decode(const char *s, size_t n, uint8_t *out, bool lower)
{
	for (size_t i = 0; i < 2 * n; i++) {
		unsigned char c = (unsigned char)s[i];
		int v = al_hex_digit(c);
		if (v < 0 || (lower && c >= 'A' && c <= 'F'))
			return -1;
		if (i % 2 == 0)
			out[i / 2] = (uint8_t)(v << 4);
		else
			out[i / 2] |= (uint8_t)v;
	}
	return 0;
}

int al_hex_decode(const char *s, size_t n, uint8_t *out)
{
	return decode(s, n, out, false);
}

int al_hex_decode_lower(const char *s, size_t n, uint8_t *out)
{
	return decode(s, n, out, true);
}
