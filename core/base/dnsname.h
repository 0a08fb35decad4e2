/* dnsname: the rules of DNS names every layer applies the same way (the
 * API's allow lists, the policies, the gateway's SNI and Host, the CA's
 * leaves, the credential channel): the canonical form and patterns. */
#ifndef AL_DNSNAME_H
#define AL_DNSNAME_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

#define AL_DNSNAME_MAX 253	/* a canonical DNS name, in bytes */
#define AL_DNSNAME_LABEL_MAX 63 /* one label, in bytes */

/* Canonical form of a DNS name: ASCII lowercased, one trailing dot
 * removed; then 1-253 bytes of labels of 1-63 bytes of [a-z0-9_-]. Non-
 * ASCII bytes are refused (the caller converts IDNs to punycode). */
int al_dnsname_canon(const char *in, char *out, size_t out_len, al_err *err);

/* 1 if s[0..n) is a canonical DNS name: labels of 1-63 bytes of
 * [a-z0-9_-] separated by single dots, 253 bytes at most, no trailing dot
 * (what al_dnsname_canon produces). */
bool al_dnsname_valid(const char *s, size_t n);

/* True when the canonical name matches the pattern (compared without case,
 * one trailing dot ignored):
 *   "example.com"   that name only;
 *   "*.example.com" one or more labels before example.com
 *                   (a.example.com, a.b.example.com), not example.com;
 *   "*"             any name.
 * Any other '*' makes a pattern that matches nothing. */
bool al_dnsname_match(const char *name, const char *pattern);
/* The same on counted strings. */
bool al_dnsname_match_n(const char *name, size_t nl, const char *pat,
			size_t pl);
/* True when the name matches one of list[0..n). */
bool al_dnsname_match_list(const char *name, const char *const *list, size_t n);

#endif
