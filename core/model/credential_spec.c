/* The credential API's bodies and names, no SQL (see credential.h). */
#include "model/credential.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base/config.h"
#include "base/json.h"
#include "net/netspec.h"

void al_sandbox_ref_free(al_sandbox_ref *sb)
{
	json_object_put(sb->metadata);
	sb->metadata = NULL;
}

void al_credential_env_name(const char *name, char out[AL_CRED_ENV_MAX])
{
	size_t o = (size_t)snprintf(out, AL_CRED_ENV_MAX, "AIRLOCK_CRED_");
	for (size_t i = 0; name[i] != '\0' && o + 1 < AL_CRED_ENV_MAX; i++) {
		unsigned char c = (unsigned char)name[i];
		out[o++] = isalnum(c) ? (char)toupper(c) : '_';
	}
	out[o] = '\0';
}

static int name_valid(const char *s, size_t n)
{
	return n >= 1 && n <= AL_CRED_NAME_MAX &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

/* RFC 9110 token characters. */
static int token_valid(const char *s, size_t n)
{
	static const char tchar[] = "!#$%&'*+-.^_`|~0123456789"
				    "abcdefghijklmnopqrstuvwxyz"
				    "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
	return n >= 1 && strspn(s, tchar) == n;
}

/* Headers that frame or route the request: the gateway owns them. */
static int header_reserved(const char *h)
{
	static const char *const names[] = {"host",
					    "content-length",
					    "transfer-encoding",
					    "connection",
					    "upgrade",
					    "te",
					    "trailer",
					    "keep-alive",
					    "proxy-connection",
					    "expect",
					    NULL};
	for (size_t i = 0; names[i] != NULL; i++)
		if (strcasecmp(h, names[i]) == 0)
			return 1;
	return 0;
}

/* Visible ASCII and spaces, "{value}" exactly once. */
static int format_valid(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return 0;
	const char *v = strstr(s, "{value}");
	return v != NULL && strstr(v + 1, "{value}") == NULL;
}

static int parse_inject(json_object *o, al_cred *c, al_err *err)
{
	static const char *const fields[] = {"hosts", "header", "format", NULL};
	if (!json_object_is_type(o, json_type_object))
		return al_err_set(err, AL_EINVAL, 0,
				  "'inject' must be an object");
	if (al_json_check_fields(o, fields, err) < 0)
		return -1;
	json_object *hosts = NULL;
	int rc = al_json_get_str_array(o, "hosts", 1, AL_CRED_HOSTS_MAX,
				       AL_CRED_HOST_MAX, &hosts, err);
	if (rc < 0)
		return -1;
	if (rc == 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "'inject.hosts' is required (1..%d host"
				  " names)",
				  AL_CRED_HOSTS_MAX);
	c->nhosts = json_object_array_length(hosts);
	for (size_t i = 0; i < c->nhosts; i++) {
		json_object *h = json_object_array_get_idx(hosts, i);
		char canon[AL_NETSPEC_PATTERN_MAX];
		if (al_netspec_pattern_canon(
			    json_object_get_string(h),
			    (size_t)json_object_get_string_len(h), canon,
			    err) < 0) {
			al_err_wrap(err, "inject.hosts[%zu]: ", i);
			return -1;
		}
		/* Injected toward anything is a leak by design. */
		if (strcmp(canon, "*") == 0)
			return al_err_set(err, AL_EINVAL, 0,
					  "inject.hosts[%zu]: \"*\" is not a"
					  " host (name each, or \"*.domain\")",
					  i);
		snprintf(c->hosts[i], sizeof c->hosts[i], "%s", canon);
	}
	const char *s = NULL;
	size_t n = 0;
	rc = al_json_get_str(o, "header", AL_CRED_HEADER_MAX, &s, &n, err);
	if (rc < 0)
		return -1;
	c->header[0] = '\0';
	if (rc > 0) {
		if (!token_valid(s, n) || header_reserved(s))
			return al_err_set(err, AL_EINVAL, 0,
					  "'inject.header' must be an HTTP"
					  " header name (a token; not Host or"
					  " a framing header)");
		memcpy(c->header, s, n + 1);
	}
	snprintf(c->format, sizeof c->format, "{value}");
	rc = al_json_get_str(o, "format", AL_CRED_FORMAT_MAX, &s, &n, err);
	if (rc < 0)
		return -1;
	if (rc > 0) {
		if (!format_valid(s, n))
			return al_err_set(err, AL_EINVAL, 0,
					  "'inject.format' must contain"
					  " \"{value}\" once (visible ASCII)");
		memcpy(c->format, s, n + 1);
	}
	return 0;
}

static int parse_rate(json_object *o, al_cred *c, al_err *err)
{
	static const char *const fields[] = {"requests", "per_seconds", NULL};
	int64_t req = 0, per = 0;
	if (!json_object_is_type(o, json_type_object))
		return al_err_set(err, AL_EINVAL, 0,
				  "'rate_limit' must be an object or null");
	if (al_json_check_fields(o, fields, err) < 0)
		return -1;
	if (al_json_get_int(o, "requests", 1, AL_CRED_RATE_MAX, &req, err) <=
		    0 ||
	    al_json_get_int(o, "per_seconds", 1, 86400, &per, err) <= 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "'rate_limit' needs 'requests' (1..%d) and"
				  " 'per_seconds' (1..86400)",
				  AL_CRED_RATE_MAX);
	c->rate_requests = (int)req;
	c->rate_per_seconds = (int)per;
	return 0;
}

/* {"global":true} | {"project":true} | {"template":t} | {"sandbox":id} |
 * {"metadata":{...}}: exactly one member. */
static int parse_scope(json_object *o, al_cred_spec *s, al_err *err)
{
	static const char *const msg =
		"'scope' must be one of {\"global\":true}, {\"project\":true},"
		" {\"template\":name}, {\"sandbox\":id}, {\"metadata\":{...}}";
	if (!json_object_is_type(o, json_type_object) ||
	    json_object_object_length(o) != 1)
		return al_err_set(err, AL_EINVAL, 0, "%s", msg);
	json_object_object_foreach(o, k, v)
	{
		int kind = al_cred_scope_from_name(k);
		if (kind < 0)
			return al_err_set(err, AL_EINVAL, 0, "%s", msg);
		s->c.scope = (al_cred_scope)kind;
		switch (s->c.scope) {
		case AL_CRED_GLOBAL:
		case AL_CRED_PROJECT:
			if (!json_object_is_type(v, json_type_boolean) ||
			    !json_object_get_boolean(v))
				return al_err_set(err, AL_EINVAL, 0, "%s", msg);
			break;
		case AL_CRED_TEMPLATE:
		case AL_CRED_SANDBOX:
			if (!json_object_is_type(v, json_type_string) ||
			    !al_id_valid(json_object_get_string(v)))
				return al_err_set(err, AL_EINVAL, 0,
						  "'scope.%s' must be a %s id",
						  k, k);
			snprintf(s->scope_value, sizeof s->scope_value, "%s",
				 json_object_get_string(v));
			break;
		case AL_CRED_METADATA: {
			json_object *m = NULL;
			if (al_json_get_str_map(o, "metadata",
						&al_json_metadata_limits, &m,
						err) <= 0 ||
			    json_object_object_length(m) == 0)
				return al_err_set(err, AL_EINVAL, 0,
						  "'scope.metadata' must be a"
						  " non-empty object of"
						  " strings");
			s->scope_metadata = json_object_get(m);
			break;
		}
		}
	}
	return 0;
}

static int parse_value(json_object *o, al_cred_spec *s, al_err *err)
{
	const char *v = NULL;
	size_t n = 0;
	int rc = al_json_get_str(o, "value", AL_CRED_VALUE_MAX, &v, &n, err);
	if (rc < 0)
		return -1;
	if (rc == 0 || n == 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "'value' is required (1..%d bytes)",
				  AL_CRED_VALUE_MAX);
	/* It goes into request heads: no line breaks, no NUL. */
	if (memchr(v, '\0', n) != NULL || memchr(v, '\r', n) != NULL ||
	    memchr(v, '\n', n) != NULL)
		return al_err_set(err, AL_EINVAL, 0,
				  "'value' must not contain NUL, CR or LF");
	s->value = malloc(n + 1);
	if (s->value == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	memcpy(s->value, v, n + 1);
	s->value_len = n;
	/* json-c's copy goes with the body; not left in freed memory. */
	OPENSSL_cleanse((char *)v, n);
	return 0;
}

int al_cred_spec_parse(const char *buf, size_t len, int rotate,
		       al_cred_spec *out, al_err *err)
{
	static const char *const create_fields[] = {"name",   "value",
						    "scope",  "project",
						    "inject", "rate_limit",
						    NULL};
	static const char *const rotate_fields[] = {"value", "inject",
						    "rate_limit", NULL};
	memset(out, 0, sizeof *out);
	out->c.scope = AL_CRED_PROJECT;
	snprintf(out->c.format, sizeof out->c.format, "{value}");
	if (len > AL_CRED_BODY_MAX)
		return al_err_set(err, AL_ETOOBIG, 0,
				  "body larger than %u bytes",
				  AL_CRED_BODY_MAX);
	json_object *o = al_json_parse_object_secret(buf, len, err);
	if (o == NULL)
		return -1;
	int rc = al_json_check_fields(o, rotate ? rotate_fields : create_fields,
				      err);
	const char *s = NULL;
	size_t n = 0;
	json_object *v = NULL;
	if (rc == 0 && !rotate) {
		int got = al_json_get_str(o, "name", AL_CRED_NAME_MAX, &s, &n,
					  err);
		if (got < 0 || got == 0 || !name_valid(s, n))
			rc = al_err_set(err, AL_EINVAL, 0,
					"'name' is required: 1..%d of"
					" [a-z0-9_-]",
					AL_CRED_NAME_MAX);
		else
			memcpy(out->c.name, s, n + 1);
	}
	if (rc == 0 && !rotate && json_object_object_get_ex(o, "scope", &v))
		rc = parse_scope(v, out, err);
	if (rc == 0 && !rotate) {
		int got = al_json_get_str(o, "project", 63, &s, &n, err);
		if (got < 0)
			rc = -1;
		else if (got > 0 && !al_id_valid(s))
			rc = al_err_set(err, AL_EINVAL, 0,
					"'project' must be a project name");
		else if (got > 0) {
			out->has_project = 1;
			memcpy(out->project, s, n + 1);
		}
	}
	if (rc == 0 && out->has_project && out->c.scope == AL_CRED_GLOBAL)
		rc = al_err_set(err, AL_EINVAL, 0,
				"a global credential has no 'project'");
	if (rc == 0 && json_object_object_get_ex(o, "inject", &v)) {
		out->has_inject = 1;
		rc = parse_inject(v, &out->c, err);
	} else if (rc == 0 && !rotate) {
		rc = al_err_set(err, AL_EINVAL, 0,
				"'inject' is required ({\"hosts\":[...]})");
	}
	if (rc == 0 && json_object_object_get_ex(o, "rate_limit", &v)) {
		out->has_rate = 1;
		if (v != NULL)
			rc = parse_rate(v, &out->c, err);
	}
	if (rc == 0)
		rc = parse_value(o, out, err);
	json_object_put(o);
	if (rc < 0) {
		al_cred_spec_free(out);
		return -1;
	}
	return 0;
}

void al_cred_spec_free(al_cred_spec *s)
{
	al_secret_free(s->value, s->value_len);
	s->value = NULL;
	s->value_len = 0;
	json_object_put(s->scope_metadata);
	s->scope_metadata = NULL;
}
