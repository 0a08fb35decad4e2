/* dnsname: see dnsname.h. */
#include "base/dnsname.h"

#include <string.h>

int al_dnsname_canon(const char *in, char *out, size_t out_len, al_err *err)
{
	if (in == NULL)
		return al_err_set(err, AL_EINVAL, 0, "name: missing");
	size_t n = strnlen(in, AL_DNSNAME_MAX + 2);
	if (n > 0 && in[n - 1] == '.')
		n--;
	if (n > AL_DNSNAME_MAX || n + 1 > out_len)
		return al_err_set(err, AL_EINVAL, 0, "name: too long");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];
		if (c >= 0x80)
			return al_err_set(err, AL_EINVAL, 0,
					  "name: not ASCII (convert it to"
					  " punycode first)");
		out[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
	}
	out[n] = '\0';
	if (!al_dnsname_valid(out, n))
		return al_err_set(err, AL_EINVAL, 0,
				  "name: not a DNS name (labels of 1-63 of"
				  " a-z 0-9 - _, 253 bytes at most)");
	return 0;
}

static bool eq_nocase(const char *a, const char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char x = a[i], y = b[i];
		if (y >= 'A' && y <= 'Z')
			y = (char)(y + 32);
		if (x != y)
			return false;
	}
	return true;
}

bool al_dnsname_match_n(const char *name, size_t nl, const char *pat, size_t pl)
{
	if (pl > 0 && pat[pl - 1] == '.')
		pl--;
	if (pl == 0)
		return false;
	if (pl == 1 && pat[0] == '*')
		return nl > 0;
	size_t body = 0; /* where the literal part of pat starts */
	if (pl >= 2 && pat[0] == '*' && pat[1] == '.')
		body = 1; /* keep the dot: ".example.com" */
	if (memchr(pat + body, '*', pl - body) != NULL)
		return false;
	size_t bl = pl - body;
	if (body == 0)
		return nl == bl && eq_nocase(name, pat, bl);
	/* At least one label before the suffix: nl > bl. */
	return nl > bl && eq_nocase(name + nl - bl, pat + body, bl);
}

bool al_dnsname_match(const char *name, const char *pattern)
{
	if (name == NULL || pattern == NULL)
		return false;
	return al_dnsname_match_n(name, strlen(name), pattern, strlen(pattern));
}

bool al_dnsname_match_list(const char *name, const char *const *list, size_t n)
{
	size_t nl = strlen(name);
	for (size_t i = 0; i < n; i++)
		if (al_dnsname_match_n(name, nl, list[i], strlen(list[i])))
			return true;
	return false;
}

bool al_dnsname_valid(const char *s, size_t n)
{
	if (n == 0 || n > AL_DNSNAME_MAX)
		return false;
	size_t label = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '.') {
			if (label == 0)
				return false;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return false;
		if (++label > AL_DNSNAME_LABEL_MAX)
			return false;
	}
	return label > 0;
}
