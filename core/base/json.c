#include "base/json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/printbuf.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "base/jsonkey.h"

const al_json_map_limits al_json_env_limits = {
	.max_entries = 256,
	.max_key = 255,
	.max_value = 32768,
	.env_names = 1,
};

const al_json_map_limits al_json_metadata_limits = {
	.max_entries = 64,
	.max_key = 128,
	.max_value = 1024,
	.env_names = 0,
};

static int is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Objects and arrays in buf[0..len), not counting brackets in strings.
 * json-c gives each object a table of its own (~800 bytes): a 1 MiB body
 * of {} would hold a worker ~270 MB and seconds of CPU. */
static size_t containers(const char *buf, size_t len)
{
	size_t n = 0;
	bool in_str = false;
	for (size_t i = 0; i < len; i++) {
		char c = buf[i];
		if (in_str && c == '\\')
			i++;
		else if (c == '"')
			in_str = !in_str;
		else if (!in_str && (c == '{' || c == '['))
			n++;
	}
	return n;
}

static json_object *parse_object(const char *buf, size_t len, bool wipe,
				 al_err *err)
{
	if (len > AL_JSON_BODY_MAX) {
		al_err_set(err, AL_ETOOBIG, 0,
			   "request body is larger than %u bytes",
			   AL_JSON_BODY_MAX);
		return NULL;
	}
	size_t i = 0;
	while (i < len && is_ws(buf[i]))
		i++;
	if (i == len)
		return json_object_new_object();
	if (containers(buf, len) > AL_JSON_CONTAINERS_MAX) {
		al_err_set(err, AL_ETOOBIG, 0,
			   "request body has more than %u objects and arrays",
			   AL_JSON_CONTAINERS_MAX);
		return NULL;
	}
	/* json-c stops at a NUL byte; a body containing one is not JSON. */
	if (memchr(buf, '\0', len) != NULL) {
		al_err_set(err, AL_EINVAL, 0, "malformed JSON: NUL byte");
		return NULL;
	}

	json_tokener *tok = json_tokener_new_ex(AL_JSON_DEPTH_MAX);
	if (tok == NULL) {
		al_err_set(err, AL_ENOMEM, 0, "out of memory");
		return NULL;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT |
					    JSON_TOKENER_VALIDATE_UTF8);
	json_object *obj = json_tokener_parse_ex(tok, buf, (int)len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	/* The tokener's scratch buffer holds the last strings it read. */
	if (wipe && tok->pb != NULL && tok->pb->buf != NULL)
		OPENSSL_cleanse(tok->pb->buf, (size_t)tok->pb->size);
	json_tokener_free(tok);

	if (obj == NULL || jerr != json_tokener_success) {
		json_object_put(obj);
		al_err_set(err, AL_EINVAL, 0, "malformed JSON: %s",
			   jerr == json_tokener_continue
				   ? "unexpected end of input"
				   : json_tokener_error_desc(jerr));
		return NULL;
	}
	for (; end < len; end++) {
		if (!is_ws(buf[end])) {
			json_object_put(obj);
			al_err_set(err, AL_EINVAL, 0,
				   "malformed JSON: trailing characters");
			return NULL;
		}
	}
	if (!json_object_is_type(obj, json_type_object)) {
		json_object_put(obj);
		al_err_set(err, AL_EINVAL, 0, "request body must be an object");
		return NULL;
	}
	if (al_json_keys_unique(buf, len, wipe, err) < 0) {
		json_object_put(obj);
		return NULL;
	}
	return obj;
}

json_object *al_json_parse_object(const char *buf, size_t len, al_err *err)
{
	return parse_object(buf, len, false, err);
}

json_object *al_json_parse_object_secret(const char *buf, size_t len,
					 al_err *err)
{
	return parse_object(buf, len, true, err);
}

char *al_json_pack(json_object *o, al_err *err)
{
	const char *t = o != NULL ? al_json_compact(o) : NULL;
	char *s = t != NULL ? strdup(t) : NULL;
	json_object_put(o);
	if (s == NULL)
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory packing");
	return s;
}

int al_json_check_fields(json_object *obj, const char *const *allowed,
			 al_err *err)
{
	json_object_object_foreach(obj, key, val)
	{
		(void)val;
		int ok = 0;
		for (size_t i = 0; allowed[i] != NULL; i++) {
			if (strcmp(allowed[i], key) == 0) {
				ok = 1;
				break;
			}
		}
		if (!ok) {
			if (al_json_key_tame(key))
				return al_err_set(err, AL_EINVAL, 0,
						  "unknown field '%s'", key);
			return al_err_set(err, AL_EINVAL, 0,
					  "unknown field in request");
		}
	}
	return 0;
}

static json_object *member(json_object *obj, const char *key)
{
	json_object *v = NULL;
	if (!json_object_object_get_ex(obj, key, &v))
		return NULL;
	return v; /* JSON null is NULL too: treated as absent */
}

int al_json_settings_parse(const char *buf, size_t len,
			   const char *const *names, size_t n, int64_t max,
			   al_json_setting *out, al_err *err)
{
	return al_json_settings_parse_milli(buf, len, names, NULL, n, max, out,
					    err);
}

int al_json_settings_parse_milli(const char *buf, size_t len,
				 const char *const *names, const int *milli,
				 size_t n, int64_t max, al_json_setting *out,
				 al_err *err)
{
	const char *allowed[17];
	if (n == 0 || n >= sizeof allowed / sizeof allowed[0])
		return al_err_set(err, AL_EINTERNAL, 0, "bad settings table");
	memset(out, 0, n * sizeof *out);
	for (size_t i = 0; i < n; i++)
		allowed[i] = names[i];
	allowed[n] = NULL;

	json_object *o = al_json_parse_object(buf, len, err);
	if (o == NULL)
		return -1;
	int rc = al_json_check_fields(o, allowed, err);
	int any = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		json_object *v = NULL;
		if (!json_object_object_get_ex(o, names[i], &v))
			continue;
		any = 1;
		out[i].set = 1;
		out[i].is_null = v == NULL;
		if (v == NULL)
			continue;
		if ((milli != NULL && milli[i]
			     ? al_json_get_millis(o, names[i], 0, max,
						  &out[i].value, err)
			     : al_json_get_int(o, names[i], 0, max,
					       &out[i].value, err)) < 0)
			rc = -1;
	}
	if (rc == 0 && !any) {
		char list[400];
		size_t w = 0;
		list[0] = '\0';
		for (size_t i = 0; i < n && w < sizeof list; i++)
			w += (size_t)snprintf(list + w, sizeof list - w, "%s%s",
					      i == 0 ? "" : ", ", names[i]);
		rc = al_err_set(err, AL_EINVAL, 0, "name at least one of: %s",
				list);
	}
	json_object_put(o);
	return rc;
}

int al_json_get_str(json_object *obj, const char *key, size_t max_len,
		    const char **out, size_t *out_len, al_err *err)
{
	json_object *v = member(obj, key);
	if (v == NULL)
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return al_err_set(err, AL_EINVAL, 0, "'%s' must be a string",
				  key);
	size_t n = (size_t)json_object_get_string_len(v);
	if (n > max_len)
		return al_err_set(err, AL_EINVAL, 0,
				  "'%s' is longer than %zu bytes", key,
				  max_len);
	*out = json_object_get_string(v);
	if (out_len != NULL)
		*out_len = n;
	else if (memchr(*out, '\0', n) != NULL)
		return al_err_set(err, AL_EINVAL, 0,
				  "'%s' must not contain NUL", key);
	return 1;
}

int al_json_get_millis(json_object *obj, const char *key, int64_t min,
		       int64_t max, int64_t *out, al_err *err)
{
	json_object *v = member(obj, key);
	if (v == NULL)
		return 0;
	int64_t m;
	if (json_object_is_type(v, json_type_int)) {
		int64_t n = json_object_get_int64(v);
		/* Past this the product overflows; any max is below it. */
		m = n > INT64_MAX / 1000 || n < 0 ? -1 : n * 1000;
	} else if (json_object_is_type(v, json_type_double)) {
		/* 0.1 is 100.00000000000001 thousandths as a double: what
		 * rounds to a whole thousandth within 1e-6 was written so. */
		double d = json_object_get_double(v) * 1000.0;
		if (!(d >= 0.0 && d <= 9.0e15)) {
			m = -1;
		} else {
			m = (int64_t)(d + 0.5);
			double off = d - (double)m;
			if (off > 1e-6 || off < -1e-6)
				return al_err_set(err, AL_EINVAL, 0,
						  "'%s' has at most 3 "
						  "decimals",
						  key);
		}
	} else {
		return al_err_set(err, AL_EINVAL, 0,
				  "'%s' must be a number (of CPUs)", key);
	}
	if (m < min || m > max) {
		char lo[AL_MILLIS_STRLEN], hi[AL_MILLIS_STRLEN];
		al_millis_format((uint64_t)min, lo);
		al_millis_format((uint64_t)max, hi);
		return al_err_set(err, AL_EINVAL, 0,
				  "'%s' must be between %s and %s", key, lo,
				  hi);
	}
	*out = m;
	return 1;
}

void al_millis_format(uint64_t millis, char out[AL_MILLIS_STRLEN])
{
	int n = snprintf(out, AL_MILLIS_STRLEN, "%" PRIu64, millis / 1000);
	uint64_t frac = millis % 1000;
	if (frac == 0 || n < 0)
		return;
	char d[5];
	snprintf(d, sizeof d, ".%03" PRIu64, frac);
	/* No trailing zeros: 0.5, not 0.500. */
	size_t l = strlen(d);
	while (d[l - 1] == '0')
		d[--l] = '\0';
	snprintf(out + n, AL_MILLIS_STRLEN - (size_t)n, "%s", d);
}

json_object *al_json_new_millis(uint64_t millis)
{
	if (millis % 1000 == 0)
		return json_object_new_int64((int64_t)(millis / 1000));
	char s[AL_MILLIS_STRLEN];
	al_millis_format(millis, s);
	return json_object_new_double_s((double)millis / 1000.0, s);
}

int al_json_get_int(json_object *obj, const char *key, int64_t min, int64_t max,
		    int64_t *out, al_err *err)
{
	json_object *v = member(obj, key);
	if (v == NULL)
		return 0;
	if (!json_object_is_type(v, json_type_int))
		return al_err_set(err, AL_EINVAL, 0, "'%s' must be an integer",
				  key);
	/* Values beyond int64 saturate, which the range check rejects. */
	int64_t n = json_object_get_int64(v);
	if (n < min || n > max)
		return al_err_set(err, AL_EINVAL, 0,
				  "'%s' must be between %lld and %lld", key,
				  (long long)min, (long long)max);
	*out = n;
	return 1;
}

int al_json_get_bool(json_object *obj, const char *key, int *out, al_err *err)
{
	json_object *v = member(obj, key);
	if (v == NULL)
		return 0;
	if (!json_object_is_type(v, json_type_boolean))
		return al_err_set(err, AL_EINVAL, 0, "'%s' must be a boolean",
				  key);
	*out = json_object_get_boolean(v) ? 1 : 0;
	return 1;
}

static int env_name_valid(const char *k, size_t n)
{
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = k[i];
		int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			    c == '_';
		if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
			return 0;
	}
	return 1;
}

int al_json_get_str_map(json_object *obj, const char *key,
			const al_json_map_limits *lim, json_object **out,
			al_err *err)
{
	json_object *v = member(obj, key);
	if (v == NULL)
		return 0;
	if (!json_object_is_type(v, json_type_object))
		return al_err_set(err, AL_EINVAL, 0,
				  "'%s' must be an object of strings", key);
	if ((size_t)json_object_object_length(v) > lim->max_entries)
		return al_err_set(err, AL_EINVAL, 0,
				  "'%s' has more than %zu entries", key,
				  lim->max_entries);
	json_object_object_foreach(v, k, val)
	{
		size_t kn = strlen(k);
		if (kn == 0 || kn > lim->max_key)
			return al_err_set(err, AL_EINVAL, 0,
					  "'%s' keys must be 1..%zu bytes", key,
					  lim->max_key);
		if (lim->env_names && !env_name_valid(k, kn))
			return al_err_set(err, AL_EINVAL, 0,
					  "'%s' keys must match "
					  "[A-Za-z_][A-Za-z0-9_]*",
					  key);
		for (size_t i = 0; i < kn; i++)
			if ((unsigned char)k[i] < 0x20 || k[i] == 0x7f)
				return al_err_set(err, AL_EINVAL, 0,
						  "'%s' keys must not contain "
						  "control characters",
						  key);
		if (val == NULL || !json_object_is_type(val, json_type_string))
			return al_err_set(err, AL_EINVAL, 0,
					  "'%s' values must be strings", key);
		size_t vn = (size_t)json_object_get_string_len(val);
		if (vn > lim->max_value)
			return al_err_set(err, AL_EINVAL, 0,
					  "'%s' values must be at most %zu "
					  "bytes",
					  key, lim->max_value);
		if (memchr(json_object_get_string(val), '\0', vn) != NULL)
			return al_err_set(err, AL_EINVAL, 0,
					  "'%s' values must not contain NUL",
					  key);
	}
	*out = v;
	return 1;
}

int al_json_get_str_array(json_object *obj, const char *key, size_t min_items,
			  size_t max_items, size_t max_len, json_object **out,
			  al_err *err)
{
	json_object *v = member(obj, key);
	if (v == NULL)
		return 0;
	if (!json_object_is_type(v, json_type_array))
		return al_err_set(err, AL_EINVAL, 0,
				  "'%s' must be an array of strings", key);
	size_t n = json_object_array_length(v);
	if (n < min_items || n > max_items)
		return al_err_set(err, AL_EINVAL, 0,
				  "'%s' must have %zu..%zu items", key,
				  min_items, max_items);
	for (size_t i = 0; i < n; i++) {
		json_object *item = json_object_array_get_idx(v, i);
		if (item == NULL ||
		    !json_object_is_type(item, json_type_string))
			return al_err_set(err, AL_EINVAL, 0,
					  "'%s' items must be strings", key);
		size_t sn = (size_t)json_object_get_string_len(item);
		if (sn > max_len)
			return al_err_set(err, AL_EINVAL, 0,
					  "'%s' items must be at most %zu "
					  "bytes",
					  key, max_len);
		if (memchr(json_object_get_string(item), '\0', sn) != NULL)
			return al_err_set(err, AL_EINVAL, 0,
					  "'%s' items must not contain NUL",
					  key);
	}
	*out = v;
	return 1;
}

/* Length of the sequence starting with lead byte c, 0 if c cannot start
 * one. */
static size_t utf8_seq_len(unsigned char c)
{
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return 2;
	if (c >= 0xe0 && c <= 0xef)
		return 3;
	if (c >= 0xf0 && c <= 0xf4)
		return 4;
	return 0;
}

/* Whether the k-th byte (k >= 1) of a sequence led by lead may be b. */
static int utf8_cont_ok(unsigned char lead, size_t k, unsigned char b)
{
	if ((b & 0xc0) != 0x80)
		return 0;
	if (k != 1)
		return 1;
	/* Second byte ranges exclude overlongs, surrogates, > U+10FFFF. */
	switch (lead) {
	case 0xe0:
		return b >= 0xa0;
	case 0xed:
		return b <= 0x9f;
	case 0xf0:
		return b >= 0x90;
	case 0xf4:
		return b <= 0x8f;
	default:
		return 1;
	}
}

size_t al_utf8_complete_prefix(const void *p, size_t n, int *bad)
{
	const unsigned char *s = p;
	size_t i = 0;

	*bad = 0;
	while (i < n) {
		size_t l = utf8_seq_len(s[i]);
		if (l == 0) {
			*bad = 1;
			return i;
		}
		size_t k;
		for (k = 1; k < l && i + k < n; k++) {
			if (!utf8_cont_ok(s[i], k, s[i + k])) {
				*bad = 1;
				return i;
			}
		}
		if (k < l)
			return i; /* incomplete tail, may complete later */
		i += l;
	}
	return i;
}

int al_utf8_valid(const void *p, size_t n)
{
	int bad = 0;
	return al_utf8_complete_prefix(p, n, &bad) == n && !bad;
}

char *al_base64_encode(const void *p, size_t n)
{
	if (n > ((size_t)1 << 30))
		return NULL;
	size_t outlen = 4 * ((n + 2) / 3) + 1;
	unsigned char *out = malloc(outlen);
	if (out == NULL)
		return NULL;
	/* EVP_EncodeBlock takes an int length; feed it in slices that keep
	 * the 3-byte grouping. */
	size_t o = 0;
	const unsigned char *in = p;
	const size_t slice = 3 * 65536;
	for (size_t i = 0; i < n; i += slice) {
		size_t len = n - i < slice ? n - i : slice;
		o += (size_t)EVP_EncodeBlock(out + o, in + i, (int)len);
	}
	out[o] = '\0';
	return (char *)out;
}

const char *al_json_compact(json_object *obj)
{
	return json_object_to_json_string_ext(
		obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}
