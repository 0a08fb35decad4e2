/* gw/urlpath: the one spelling of a request path that the policy judges
 * and the upstream gets.
 *
 * A guest that may reach only /allowed/ of a name must not get further
 * with /allowed/../secret, /allowed/%2e%2e/secret or //secret: the
 * gateway rewrites the path of an origin-form target ("/p?q", already
 * checked by gw/http: visible ASCII, no '#' or '\', every '%' followed by
 * two hex digits) into its normal form, and that string is what the
 * policy sees, what the egress log records and what goes upstream:
 *
 *  - a percent-encoded unreserved character (A-Z a-z 0-9 - . _ ~) is
 *    decoded; every other encoding keeps its '%' and gets upper-case hex;
 *  - runs of '/' become one;
 *  - "." and ".." segments are removed (RFC 3986 5.2.4; ".." above the
 *    root stays at the root), including the ones that were encoded;
 *  - the query ("?..." to the end) is left as it came.
 * Forms that servers read differently from each other are refused, not
 * repaired: an encoded '/' (%2F) or '\' (%5C), an encoded NUL (%00),
 * encoded bytes that are not UTF-8 (overlong forms such as %C0%AE
 * included), a dot segment with parameters ("..;x": Tomcat's ".."), and
 * an encoded '%' that starts another encoding (%252e: decoded twice by
 * some servers).
 *
 * The normal form of a normal form is itself. */
#ifndef AL_GW_URLPATH_H
#define AL_GW_URLPATH_H

#include <stddef.h>

/* Normalise the target t[0..len) (starting with '/') in place: the
 * normal form never grows. 0 with *out_len its length (t[*out_len] is
 * a NUL), or -1 with *why saying what was refused (a static string). */
int al_urlpath_normalize(char *t, size_t len, size_t *out_len,
			 const char **why);

#endif
