/* hex: hexadecimal digits, as they come in percent escapes, chunk sizes,
 * MACs and entropy strings. Built into the static guest programs too, so
 * it depends on nothing but libc. */
#ifndef AL_HEX_H
#define AL_HEX_H

#include <stddef.h>
#include <stdint.h>

/* 0..15 for a hex digit (either case), else -1. */
int al_hex_digit(unsigned char c);
/* Decode the 2 * n hex digits at s into out[0..n). 0, or -1 when one of
 * them is not a hex digit (s shorter than 2 * n stops at its NUL). */
int al_hex_decode(const char *s, size_t n, uint8_t *out);
/* al_hex_decode of lowercase digits only: the guest's wire forms (MACs,
 * entropy, seeds) are lowercase, and anything else is refused. */
int al_hex_decode_lower(const char *s, size_t n, uint8_t *out);

#endif
