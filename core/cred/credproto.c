/* credproto: see credproto.h. */
#include "cred/credproto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base/config.h"
#include "base/dnsname.h"
#include "base/json.h"
#include "base/jsonw.h"
#include "net/netspec.h"
#include "proto/agentproto.h"

static const char *const scope_names[AL_CRED_SCOPES] = {
	[AL_CRED_GLOBAL] = "global",	 [AL_CRED_PROJECT] = "project",
	[AL_CRED_TEMPLATE] = "template", [AL_CRED_METADATA] = "metadata",
	[AL_CRED_SANDBOX] = "sandbox",
};

const char *al_cred_scope_name(al_cred_scope s)
{
	return (unsigned)s < AL_CRED_SCOPES ? scope_names[s] : "unknown";
}

int al_cred_scope_from_name(const char *name)
{
	for (int i = 0; name != NULL && i < AL_CRED_SCOPES; i++)
		if (strcmp(name, scope_names[i]) == 0)
			return i;
	return -1;
}

/* ---- alphabets ---- */

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9');
}

static bool word_valid(const char *s, size_t max, bool alnum_first)
{
	if (s == NULL || s[0] == '\0' || (alnum_first && !is_alnum(s[0])))
		return false;
	size_t i = 0;
	for (; s[i] != '\0'; i++)
		if (i + 1 >= max || !(is_alnum(s[i]) || s[i] == '.' ||
				      s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

bool al_cred_id_valid(const char *s)
{
	return word_valid(s, AL_CRED_ID_LEN + 1, false);
}

bool al_cred_name_valid(const char *s)
{
	return word_valid(s, AL_CRED_NAME_MAX + 1, true);
}

bool al_cred_value_valid(const char *s, size_t n)
{
	if (s == NULL || n == 0 || n > AL_CRED_VALUE_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

bool al_cred_host_valid(const char *s)
{
	if (s == NULL)
		return false;
	if (s[0] == '*' && s[1] == '.')
		s += 2;
	return al_dnsname_valid(s, strlen(s));
}

bool al_cred_header_valid(const char *s)
{
	static const char tchar[] = "!#$%&'*+-.^_`|~";
	if (s == NULL || s[0] == '\0')
		return false;
	for (size_t i = 0; s[i] != '\0'; i++)
		if (i >= AL_CRED_HEADER_MAX ||
		    !(is_alnum(s[i]) || strchr(tchar, s[i]) != NULL))
			return false;
	return true;
}

bool al_cred_format_valid(const char *s)
{
	if (s == NULL)
		return false;
	size_t n = strlen(s);
	if (n > AL_CRED_FORMAT_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return false;
	const char *v = strstr(s, "{value}");
	return v != NULL && strstr(v + 1, "{value}") == NULL;
}

/* ---- sets ---- */

static void cred_wipe(al_cred *c)
{
	if (c->value != NULL) {
		OPENSSL_cleanse(c->value, c->value_len);
		free(c->value);
	}
	c->value = NULL;
	c->value_len = 0;
}

void al_cred_set_free(al_cred_set *s)
{
	for (size_t i = 0; s->creds != NULL && i < s->n; i++)
		cred_wipe(&s->creds[i]);
	free(s->creds);
	memset(s, 0, sizeof *s);
}

const al_cred *al_cred_set_find(const al_cred_set *s, const char *name)
{
	for (size_t i = 0; s != NULL && name != NULL && i < s->n; i++)
		if (strcmp(s->creds[i].name, name) == 0)
			return &s->creds[i];
	return NULL;
}

const al_cred *al_cred_set_find_id(const al_cred_set *s, const char *id)
{
	for (size_t i = 0; s != NULL && id != NULL && i < s->n; i++)
		if (strcmp(s->creds[i].id, id) == 0)
			return &s->creds[i];
	return NULL;
}

const char *al_cred_invalid(const al_cred *c)
{
	if (!al_cred_id_valid(c->id))
		return "id";
	if (!al_cred_name_valid(c->name))
		return "name";
	if (c->value == NULL || strlen(c->value) != c->value_len ||
	    !al_cred_value_valid(c->value, c->value_len))
		return "value";
	if (c->nhosts == 0 || c->nhosts > AL_CRED_HOSTS_MAX)
		return "hosts";
	for (size_t i = 0; i < c->nhosts; i++)
		if (!al_cred_host_valid(c->hosts[i]))
			return "hosts";
	if (c->header[0] != '\0' && !al_cred_header_valid(c->header))
		return "header";
	if (!al_cred_format_valid(c->format))
		return "format";
	if (c->rate_requests < 0 || c->rate_per_seconds < 0 ||
	    c->rate_requests > AL_CRED_RATE_MAX ||
	    c->rate_per_seconds > AL_CRED_RATE_MAX ||
	    (c->rate_requests == 0) != (c->rate_per_seconds == 0))
		return "rate";
	if ((unsigned)c->scope >= AL_CRED_SCOPES)
		return "scope";
	return NULL;
}

int al_cred_set_add(al_cred_set *s, const al_cred *c, al_err *err)
{
	const char *bad = al_cred_invalid(c);
	if (bad != NULL)
		return al_err_set(err, AL_EINVAL, 0, "credential: invalid %s",
				  bad);
	if (al_cred_set_find(s, c->name) != NULL)
		return al_err_set(err, AL_EINVAL, 0,
				  "credential: name twice in one set");
	if (s->n >= AL_CRED_SET_MAX)
		return al_err_set(err, AL_ETOOBIG, 0,
				  "credential set: more than %d",
				  AL_CRED_SET_MAX);
	al_cred *grown = realloc(s->creds, (s->n + 1) * sizeof *grown);
	if (grown == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	s->creds = grown;
	al_cred *d = &s->creds[s->n];
	*d = *c;
	d->value = malloc(c->value_len + 1);
	if (d->value == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	memcpy(d->value, c->value, c->value_len + 1);
	s->n++;
	return 0;
}

/* ---- helpers ---- */

static char *oom(al_err *err)
{
	al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory packing");
	return NULL;
}

/* Parse, check the members, hand the object to the caller. */
static json_object *parse(const void *payload, size_t len,
			  const char *const *fields, const char *what,
			  al_err *err)
{
	json_object *o = al_json_parse_object(payload, len, err);
	if (o != NULL && al_json_check_fields(o, fields, err) < 0) {
		json_object_put(o);
		o = NULL;
	}
	if (o == NULL)
		al_err_wrap(err, "%s: ", what);
	return o;
}

/* A required string member within max-1 bytes, passing valid, into out. */
static int str_field(json_object *o, const char *key, size_t max,
		     bool (*valid)(const char *), char *out, al_err *err)
{
	const char *v = NULL;
	int r = al_json_get_str(o, key, max - 1, &v, NULL, err);
	if (r < 0)
		return -1;
	if (r == 0 || (valid != NULL && !valid(v)))
		return al_err_set(err, AL_EINVAL, 0,
				  "'%s' is missing or invalid", key);
	snprintf(out, max, "%s", v);
	return 0;
}

static int uint_field(json_object *o, const char *key, int64_t max,
		      uint64_t *out, al_err *err)
{
	int64_t v = 0;
	int r = al_json_get_int(o, key, 0, max, &v, err);
	if (r < 0)
		return -1;
	if (r == 0)
		return al_err_set(err, AL_EINVAL, 0, "'%s' is required", key);
	*out = (uint64_t)v;
	return 0;
}

static bool id_ok(const char *s)
{
	return al_id_valid(s) != 0;
}

/* ---- CRED_HELLO ---- */

char *al_cred_hello_pack(const char *sandbox, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o == NULL)
		return oom(err);
	json_object_object_add(o, "sandbox", json_object_new_string(sandbox));
	return al_json_pack(o, err);
}

int al_cred_hello_unpack(const void *payload, size_t len, char sandbox[64],
			 al_err *err)
{
	static const char *const fields[] = {"sandbox", NULL};
	json_object *o = parse(payload, len, fields, "CRED_HELLO", err);
	if (o == NULL)
		return -1;
	int r = str_field(o, "sandbox", 64, id_ok, sandbox, err);
	json_object_put(o);
	return r;
}

/* ---- CRED_SET ---- */

static json_object *cred_to_json(const al_cred *c, json_object **value)
{
	json_object *o = json_object_new_object();
	json_object *hosts = json_object_new_array();
	*value = json_object_new_string_len(c->value, (int)c->value_len);
	if (o == NULL || hosts == NULL || *value == NULL) {
		json_object_put(o);
		json_object_put(hosts);
		json_object_put(*value);
		*value = NULL;
		return NULL;
	}
	json_object_object_add(o, "id", json_object_new_string(c->id));
	json_object_object_add(o, "name", json_object_new_string(c->name));
	json_object_object_add(o, "value", *value);
	for (size_t i = 0; i < c->nhosts; i++)
		json_object_array_add(hosts,
				      json_object_new_string(c->hosts[i]));
	json_object_object_add(o, "hosts", hosts);
	json_object_object_add(o, "header",
			       c->header[0] != '\0'
				       ? json_object_new_string(c->header)
				       : NULL);
	json_object_object_add(o, "format", json_object_new_string(c->format));
	json_object *rate = NULL;
	if (c->rate_requests > 0) {
		rate = json_object_new_object();
		json_object_object_add(rate, "requests",
				       json_object_new_int64(c->rate_requests));
		json_object_object_add(
			rate, "per_seconds",
			json_object_new_int64(c->rate_per_seconds));
	}
	json_object_object_add(o, "rate", rate);
	json_object_object_add(
		o, "scope",
		json_object_new_string(al_cred_scope_name(c->scope)));
	return o;
}

/* Wipe the text of a json string in place (it held a value). */
static void wipe_json_string(json_object *s)
{
	if (s != NULL && json_object_is_type(s, json_type_string))
		OPENSSL_cleanse((char *)json_object_get_string(s),
				(size_t)json_object_get_string_len(s));
}

char *al_cred_set_pack(const al_cred_set *s, al_err *err)
{
	json_object *o = json_object_new_object();
	json_object *arr = json_object_new_array();
	json_object *values[AL_CRED_SET_MAX] = {0};
	char *out = NULL;
	bool too_big = false;
	if (o == NULL || arr == NULL) {
		json_object_put(o);
		json_object_put(arr);
		return oom(err);
	}
	json_object_object_add(o, "version",
			       json_object_new_int64((int64_t)s->version));
	json_object_object_add(o, "creds", arr);
	size_t n = s->n < AL_CRED_SET_MAX ? s->n : AL_CRED_SET_MAX;
	for (size_t i = 0; i < n; i++) {
		json_object *c = cred_to_json(&s->creds[i], &values[i]);
		if (c == NULL || json_object_array_add(arr, c) < 0) {
			json_object_put(c);
			goto done;
		}
	}
	const char *t = al_json_compact(o);
	size_t tlen = t != NULL ? strlen(t) : 0;
	if (t != NULL && tlen <= AL_FRAME_MAX_PAYLOAD)
		out = strdup(t);
	if (t != NULL)
		OPENSSL_cleanse((char *)t, tlen);
	too_big = t != NULL && tlen > AL_FRAME_MAX_PAYLOAD;
done:
	for (size_t i = 0; i < n; i++)
		wipe_json_string(values[i]);
	json_object_put(o);
	if (too_big)
		al_err_set(err, AL_ETOOBIG, 0,
			   "credential set: larger than a frame");
	else if (out == NULL)
		oom(err);
	return out;
}

static int cred_from_json(json_object *c, al_cred *out, al_err *err)
{
	static const char *const fields[] = {"id",    "name",	"value",
					     "hosts", "header", "format",
					     "rate",  "scope",	NULL};
	static const char *const rate_fields[] = {"requests", "per_seconds",
						  NULL};
	memset(out, 0, sizeof *out);
	if (!json_object_is_type(c, json_type_object))
		return al_err_set(err, AL_EINVAL, 0, "creds[] are objects");
	if (al_json_check_fields(c, fields, err) < 0 ||
	    str_field(c, "id", AL_CRED_ID_LEN + 1, al_cred_id_valid, out->id,
		      err) < 0 ||
	    str_field(c, "name", AL_CRED_NAME_MAX + 1, al_cred_name_valid,
		      out->name, err) < 0 ||
	    str_field(c, "format", AL_CRED_FORMAT_MAX + 1, al_cred_format_valid,
		      out->format, err) < 0)
		return -1;
	const char *v = NULL;
	size_t vlen = 0;
	if (al_json_get_str(c, "value", AL_CRED_VALUE_MAX, &v, &vlen, err) !=
		    1 ||
	    !al_cred_value_valid(v, vlen))
		return al_err_set(err, AL_EINVAL, 0,
				  "'value' is missing or invalid");
	json_object *hosts = NULL;
	if (al_json_get_str_array(c, "hosts", 1, AL_CRED_HOSTS_MAX,
				  AL_CRED_HOST_MAX, &hosts, err) != 1)
		return al_err_set(err, AL_EINVAL, 0,
				  "'hosts' is missing or invalid");
	out->nhosts = json_object_array_length(hosts);
	for (size_t i = 0; i < out->nhosts; i++) {
		const char *h = json_object_get_string(
			json_object_array_get_idx(hosts, i));
		if (!al_cred_host_valid(h))
			return al_err_set(err, AL_EINVAL, 0,
					  "'hosts' has an invalid name");
		snprintf(out->hosts[i], sizeof out->hosts[i], "%s", h);
	}
	const char *h = NULL;
	int r = al_json_get_str(c, "header", AL_CRED_HEADER_MAX, &h, NULL, err);
	if (r < 0 || (r == 1 && !al_cred_header_valid(h)))
		return al_err_set(err, AL_EINVAL, 0, "'header' is invalid");
	if (r == 1)
		snprintf(out->header, sizeof out->header, "%s", h);
	json_object *rate = NULL;
	if (json_object_object_get_ex(c, "rate", &rate) && rate != NULL) {
		uint64_t req = 0, per = 0;
		if (!json_object_is_type(rate, json_type_object) ||
		    al_json_check_fields(rate, rate_fields, err) < 0 ||
		    uint_field(rate, "requests", AL_CRED_RATE_MAX, &req, err) <
			    0 ||
		    uint_field(rate, "per_seconds", AL_CRED_RATE_MAX, &per,
			       err) < 0 ||
		    req == 0 || per == 0)
			return al_err_set(err, AL_EINVAL, 0,
					  "'rate' is invalid");
		out->rate_requests = (int)req;
		out->rate_per_seconds = (int)per;
	}
	const char *scope = NULL;
	if (al_json_get_str(c, "scope", 16, &scope, NULL, err) != 1 ||
	    al_cred_scope_from_name(scope) < 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "'scope' is missing or invalid");
	out->scope = (al_cred_scope)al_cred_scope_from_name(scope);
	out->value = (char *)v; /* borrowed until al_cred_set_add copies */
	out->value_len = vlen;
	return 0;
}

int al_cred_set_unpack(const void *payload, size_t len, al_cred_set *out,
		       al_err *err)
{
	static const char *const fields[] = {"version", "creds", NULL};
	memset(out, 0, sizeof *out);
	json_object *o = al_json_parse_object_secret(payload, len, err);
	if (o == NULL) {
		al_err_wrap(err, "CRED_SET: ");
		return -1;
	}
	int r = al_json_check_fields(o, fields, err);
	uint64_t version = 0;
	if (r == 0)
		r = uint_field(o, "version", INT64_MAX, &version, err);
	json_object *arr = NULL;
	if (r == 0 && (!json_object_object_get_ex(o, "creds", &arr) ||
		       !json_object_is_type(arr, json_type_array) ||
		       json_object_array_length(arr) > AL_CRED_SET_MAX))
		r = al_err_set(err, AL_EINVAL, 0,
			       "'creds' must be an array of at most %d",
			       AL_CRED_SET_MAX);
	size_t n = r == 0 ? json_object_array_length(arr) : 0;
	for (size_t i = 0; r == 0 && i < n; i++) {
		al_cred c;
		json_object *e = json_object_array_get_idx(arr, i);
		r = cred_from_json(e, &c, err);
		if (r == 0)
			r = al_cred_set_add(out, &c, err);
	}
	bool is_arr = json_object_is_type(arr, json_type_array);
	for (size_t i = 0; is_arr && i < json_object_array_length(arr); i++) {
		json_object *e = json_object_array_get_idx(arr, i), *v = NULL;
		if (json_object_is_type(e, json_type_object) &&
		    json_object_object_get_ex(e, "value", &v))
			wipe_json_string(v);
	}
	json_object_put(o);
	if (r < 0) {
		al_cred_set_free(out);
		al_err_wrap(err, "CRED_SET: ");
		return -1;
	}
	out->version = version;
	return 0;
}

/* ---- small messages ---- */

char *al_cred_set_ack_pack(uint64_t version, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o == NULL)
		return oom(err);
	json_object_object_add(o, "version",
			       json_object_new_int64((int64_t)version));
	return al_json_pack(o, err);
}

int al_cred_set_ack_unpack(const void *payload, size_t len, uint64_t *version,
			   al_err *err)
{
	static const char *const fields[] = {"version", NULL};
	json_object *o = parse(payload, len, fields, "CRED_SET_ACK", err);
	if (o == NULL)
		return -1;
	int r = uint_field(o, "version", INT64_MAX, version, err);
	json_object_put(o);
	return r;
}

char *al_cred_take_pack(const al_cred_take *t, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o == NULL)
		return oom(err);
	json_object_object_add(o, "req", json_object_new_int64(t->req));
	json_object_object_add(o, "id", json_object_new_string(t->id));
	return al_json_pack(o, err);
}

int al_cred_take_unpack(const void *payload, size_t len, al_cred_take *out,
			al_err *err)
{
	static const char *const fields[] = {"req", "id", NULL};
	memset(out, 0, sizeof *out);
	json_object *o = parse(payload, len, fields, "CRED_TAKE", err);
	if (o == NULL)
		return -1;
	uint64_t req = 0;
	int r = uint_field(o, "req", UINT32_MAX, &req, err);
	if (r == 0)
		r = str_field(o, "id", AL_CRED_ID_LEN + 1, al_cred_id_valid,
			      out->id, err);
	out->req = (uint32_t)req;
	json_object_put(o);
	return r;
}

char *al_cred_grant_pack(const al_cred_grant *g, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o == NULL)
		return oom(err);
	json_object_object_add(o, "req", json_object_new_int64(g->req));
	json_object_object_add(o, "ok", json_object_new_boolean(g->ok));
	json_object_object_add(o, "retry_after",
			       json_object_new_int64(g->ok ? 0
							   : g->retry_after));
	return al_json_pack(o, err);
}

int al_cred_grant_unpack(const void *payload, size_t len, al_cred_grant *out,
			 al_err *err)
{
	static const char *const fields[] = {"req", "ok", "retry_after", NULL};
	memset(out, 0, sizeof *out);
	json_object *o = parse(payload, len, fields, "CRED_GRANT", err);
	if (o == NULL)
		return -1;
	uint64_t req = 0, retry = 0;
	int ok = 0;
	int r = uint_field(o, "req", UINT32_MAX, &req, err);
	if (r == 0 && al_json_get_bool(o, "ok", &ok, err) != 1)
		r = al_err_set(err, AL_EINVAL, 0, "'ok' is required");
	if (r == 0)
		r = uint_field(o, "retry_after", AL_CRED_RETRY_AFTER_MAX,
			       &retry, err);
	out->req = (uint32_t)req;
	out->ok = ok != 0;
	out->retry_after = out->ok ? 0 : (uint32_t)retry;
	json_object_put(o);
	return r;
}

static bool printable_valid(const char *s)
{
	for (; *s != '\0'; s++)
		if (*s < 0x20 || *s >= 0x7f)
			return false;
	return true;
}

static bool action_valid(const char *s)
{
	if (s[0] == '\0')
		return false;
	for (; *s != '\0'; s++)
		if (!((*s >= 'a' && *s <= 'z') || *s == '_'))
			return false;
	return true;
}

static bool use_host_valid(const char *s)
{
	return s[0] == '\0' || al_dnsname_valid(s, strlen(s));
}

/* Packed per request by the gateway: written directly (jsonw), not
 * through json-c objects. Room for every field escaped at worst. */
#define USE_PACK_MAX                                                           \
	(6 * (AL_CRED_NAME_MAX + AL_CRED_HOST_MAX + AL_CRED_USE_FIELD_MAX) +   \
	 2 * (2 * AL_CRED_USE_FIELD_MAX + AL_CRED_USE_PATH_MAX) + 128)

char *al_cred_use_pack(const al_cred_use *u, al_err *err)
{
	char buf[USE_PACK_MAX];
	al_jsonw w;
	al_jsonw_start(&w, buf, sizeof buf);
	al_jsonw_str(&w, "name", u->name);
	al_jsonw_str(&w, "host", u->host);
	al_jsonw_printable(&w, "method", u->method, AL_CRED_USE_FIELD_MAX);
	al_jsonw_printable(&w, "path", u->path, AL_CRED_USE_PATH_MAX);
	if (u->status >= 100 && u->status <= 599)
		al_jsonw_int(&w, "status", u->status);
	else
		al_jsonw_null(&w, "status");
	al_jsonw_str(&w, "action", u->action);
	al_jsonw_str(&w, "decision", u->allow ? "allow" : "deny");
	al_jsonw_printable(&w, "reason", u->reason, AL_CRED_USE_FIELD_MAX);
	if (al_jsonw_end(&w) < 0) {
		al_err_set(err, AL_ETOOBIG, 0, "CRED_USE longer than its room");
		return NULL;
	}
	char *t = strdup(buf);
	if (t == NULL)
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory packing");
	return t;
}

int al_cred_use_unpack(const void *payload, size_t len, al_cred_use *out,
		       al_err *err)
{
	static const char *const fields[] = {"name",	 "host",   "method",
					     "path",	 "status", "action",
					     "decision", "reason", NULL};
	memset(out, 0, sizeof *out);
	out->status = -1;
	json_object *o = parse(payload, len, fields, "CRED_USE", err);
	if (o == NULL)
		return -1;
	char decision[8];
	int64_t status = -1;
	int r = 0;
	if (str_field(o, "name", AL_CRED_NAME_MAX + 1, al_cred_name_valid,
		      out->name, err) < 0 ||
	    str_field(o, "host", AL_CRED_HOST_MAX + 1, use_host_valid,
		      out->host, err) < 0 ||
	    str_field(o, "method", AL_CRED_USE_FIELD_MAX, printable_valid,
		      out->method, err) < 0 ||
	    str_field(o, "path", AL_CRED_USE_PATH_MAX, printable_valid,
		      out->path, err) < 0 ||
	    str_field(o, "action", AL_CRED_USE_FIELD_MAX, action_valid,
		      out->action, err) < 0 ||
	    str_field(o, "decision", sizeof decision, NULL, decision, err) <
		    0 ||
	    str_field(o, "reason", AL_CRED_USE_FIELD_MAX, printable_valid,
		      out->reason, err) < 0 ||
	    al_json_get_int(o, "status", 100, 599, &status, err) < 0)
		r = -1;
	if (r == 0 && strcmp(decision, "allow") != 0 &&
	    strcmp(decision, "deny") != 0)
		r = al_err_set(err, AL_EINVAL, 0,
			       "'decision' is allow or deny");
	out->allow = r == 0 && strcmp(decision, "allow") == 0;
	out->status = (int)status;
	json_object_put(o);
	if (r < 0)
		al_err_wrap(err, "CRED_USE: ");
	return r;
}

char *al_cred_refresh_pack(const char *project, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o == NULL)
		return oom(err);
	json_object_object_add(o, "project",
			       project != NULL && project[0] != '\0'
				       ? json_object_new_string(project)
				       : NULL);
	return al_json_pack(o, err);
}

int al_cred_refresh_unpack(const void *payload, size_t len, char project[64],
			   al_err *err)
{
	static const char *const fields[] = {"project", NULL};
	project[0] = '\0';
	json_object *o = parse(payload, len, fields, "CRED_REFRESH", err);
	if (o == NULL)
		return -1;
	json_object *p = NULL;
	int r = 0;
	if (!json_object_object_get_ex(o, "project", &p))
		r = al_err_set(err, AL_EINVAL, 0,
			       "CRED_REFRESH: 'project' is required");
	else if (p != NULL)
		r = str_field(o, "project", 64, id_ok, project, err);
	json_object_put(o);
	return r;
}

char *al_cred_refresh_done_pack(const al_cred_refresh_done *d, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o == NULL)
		return oom(err);
	json_object_object_add(o, "pushed", json_object_new_int64(d->pushed));
	json_object_object_add(o, "acked", json_object_new_int64(d->acked));
	return al_json_pack(o, err);
}

int al_cred_refresh_done_unpack(const void *payload, size_t len,
				al_cred_refresh_done *out, al_err *err)
{
	static const char *const fields[] = {"pushed", "acked", NULL};
	memset(out, 0, sizeof *out);
	json_object *o = parse(payload, len, fields, "CRED_REFRESH_DONE", err);
	if (o == NULL)
		return -1;
	uint64_t pushed = 0, acked = 0;
	int r = uint_field(o, "pushed", UINT32_MAX, &pushed, err);
	if (r == 0)
		r = uint_field(o, "acked", UINT32_MAX, &acked, err);
	if (r == 0 && acked > pushed)
		r = al_err_set(err, AL_EINVAL, 0,
			       "CRED_REFRESH_DONE: more acked than pushed");
	out->pushed = (uint32_t)pushed;
	out->acked = (uint32_t)acked;
	json_object_put(o);
	return r;
}

int al_gw_credchan_req_unpack(const void *payload, size_t len, al_err *err)
{
	(void)payload;
	if (len != 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "GW_CREDCHAN_REQ carries no payload");
	return 0;
}

char *al_gw_credchan_pack(bool ok, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o == NULL)
		return oom(err);
	json_object_object_add(o, "ok", json_object_new_boolean(ok));
	return al_json_pack(o, err);
}

int al_gw_credchan_unpack(const void *payload, size_t len, bool *ok,
			  al_err *err)
{
	static const char *const fields[] = {"ok", NULL};
	json_object *o = parse(payload, len, fields, "GW_CREDCHAN", err);
	if (o == NULL)
		return -1;
	int v = 0;
	int r = al_json_get_bool(o, "ok", &v, err) == 1
			? 0
			: al_err_set(err, AL_EINVAL, 0,
				     "GW_CREDCHAN: 'ok' is required");
	*ok = r == 0 && v != 0;
	json_object_put(o);
	return r;
}
