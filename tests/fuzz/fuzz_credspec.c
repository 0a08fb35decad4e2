/* Fuzz the credential bodies (al_cred_spec_parse): POST /v1/credentials
 * and PUT /v1/credentials/{ref}. Any bytes give a spec whose every field
 * is what the store and the gateways rely on (a valid name, 1..16
 * canonical hosts none "*", a token header, a format with "{value}", a
 * sane rate, a value without NUL/CR/LF), or a clean AL_EINVAL /
 * AL_ETOOBIG. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/credential.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const al_cred_spec *s, int rotate)
{
	const al_cred *c = &s->c;
	size_t n = strlen(c->name);
	if (!rotate &&
	    (n == 0 || n > AL_CRED_NAME_MAX ||
	     strspn(c->name, "abcdefghijklmnopqrstuvwxyz0123456789_-") != n))
		abort();
	if ((s->has_inject || !rotate) &&
	    (c->nhosts < 1 || c->nhosts > AL_CRED_HOSTS_MAX))
		abort();
	for (size_t i = 0; i < c->nhosts; i++)
		if (strcmp(c->hosts[i], "*") == 0 || c->hosts[i][0] == '\0' ||
		    strpbrk(c->hosts[i], " ,{}\"\\") != NULL)
			abort();
	if (strchr(c->header, ':') != NULL || strchr(c->header, ' ') != NULL)
		abort();
	if (strstr(c->format, "{value}") == NULL ||
	    strpbrk(c->format, "\r\n") != NULL)
		abort();
	if (c->rate_requests < 0 || c->rate_requests > AL_CRED_RATE_MAX ||
	    (c->rate_requests > 0) != (c->rate_per_seconds > 0))
		abort();
	if (s->value == NULL || s->value_len == 0 ||
	    s->value_len > AL_CRED_VALUE_MAX ||
	    strlen(s->value) != s->value_len || strpbrk(s->value, "\r\n"))
		abort();
	if (c->scope == AL_CRED_METADATA && s->scope_metadata == NULL)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (int rotate = 0; rotate < 2; rotate++) {
		al_cred_spec s;
		al_err err;
		if (al_cred_spec_parse((const char *)data, size, rotate, &s,
				       &err) < 0) {
			if (err.code != AL_EINVAL && err.code != AL_ETOOBIG &&
			    err.code != AL_ENOMEM)
				abort();
			continue;
		}
		check(&s, rotate);
		al_cred_spec_free(&s);
	}
	return 0;
}
