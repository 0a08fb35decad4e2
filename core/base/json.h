/* json: strict parsing and validation of API request bodies over json-c,
 * plus the small encoders the API needs (UTF-8 checks, base64).
 *
 * Error messages name the field, never its value: request bodies carry
 * environment values and other secrets. */
#ifndef AL_JSON_H
#define AL_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "base/err.h"

#define AL_JSON_BODY_MAX (1u << 20) /* request body limit: 413 above */
#define AL_JSON_DEPTH_MAX 16
#define AL_JSON_CONTAINERS_MAX 4096 /* objects + arrays in a body: 413 */

/* Limits for objects of strings (env, metadata). */
typedef struct al_json_map_limits {
	size_t max_entries;
	size_t max_key;	  /* bytes */
	size_t max_value; /* bytes */
	int env_names;	  /* keys must be [A-Za-z_][A-Za-z0-9_]* */
} al_json_map_limits;

extern const al_json_map_limits al_json_env_limits;
extern const al_json_map_limits al_json_metadata_limits;

/* Parse exactly one JSON object from buf (strict JSON, valid UTF-8, depth
 * <= AL_JSON_DEPTH_MAX, only whitespace after it, no object naming a
 * member twice: al_json_keys_unique). AL_ETOOBIG above
 * AL_JSON_BODY_MAX or AL_JSON_CONTAINERS_MAX, AL_EINVAL when malformed
 * or not an object. An empty
 * body (len 0) parses as {}. Caller puts the result. */
json_object *al_json_parse_object(const char *buf, size_t len, al_err *err);
/* The same for text that holds secrets: the parser's scratch buffer is
 * wiped (OPENSSL_cleanse) before it is freed. The caller wipes buf and
 * the secret strings of the result. */
json_object *al_json_parse_object_secret(const char *buf, size_t len,
					 al_err *err);
/* The compact text of o, malloc'ed; o is put (also on failure). NULL
 * with AL_ENOMEM when o is NULL or memory ran out. */
char *al_json_pack(json_object *o, al_err *err);

/* -1 with AL_EINVAL if obj has a member not in allowed (NULL-terminated). */
int al_json_check_fields(json_object *obj, const char *const *allowed,
			 al_err *err);

/* Typed getters for optional members. Return 1 when present and valid,
 * 0 when absent (or JSON null; *out untouched), -1 with AL_EINVAL when of
 * the wrong type or out of bounds. Borrowed pointers live as long as obj. */
int al_json_get_str(json_object *obj, const char *key, size_t max_len,
		    const char **out, size_t *out_len, al_err *err);
int al_json_get_int(json_object *obj, const char *key, int64_t min, int64_t max,
		    int64_t *out, al_err *err);
int al_json_get_bool(json_object *obj, const char *key, int *out, al_err *err);
/* A number of CPUs (an integer, or a number with at most 3 decimals:
 * 0.5, 1.25) in thousandths, min..max thousandths. */
int al_json_get_millis(json_object *obj, const char *key, int64_t min,
		       int64_t max, int64_t *out, al_err *err);
/* A number of CPUs in thousandths as the API writes it ("0.5", "2",
 * "1.25") into out. */
#define AL_MILLIS_STRLEN 24
void al_millis_format(uint64_t millis, char out[AL_MILLIS_STRLEN]);
/* Thousandths of a CPU as a JSON number the way a client wrote them: 2,
 * 0.5 (never 0.50000000000000001). */
json_object *al_json_new_millis(uint64_t millis);
/* An object whose values are all strings, within lim. */
int al_json_get_str_map(json_object *obj, const char *key,
			const al_json_map_limits *lim, json_object **out,
			al_err *err);
/* An array of min_items..max_items strings, each <= max_len bytes and free
 * of NUL bytes. */
int al_json_get_str_array(json_object *obj, const char *key, size_t min_items,
			  size_t max_items, size_t max_len, json_object **out,
			  al_err *err);

/* A body that changes some of a fixed set of integer settings: an object
 * naming at least one of names[0..n) (no other member), each an integer
 * in 0..max or null (back to the operator's default). out[i] for
 * names[i]. AL_EINVAL (naming the fields) or AL_ETOOBIG. */
typedef struct al_json_setting {
	int set;     /* named in the body */
	int is_null; /* named, and null */
	int64_t value;
} al_json_setting;
int al_json_settings_parse(const char *buf, size_t len,
			   const char *const *names, size_t n, int64_t max,
			   al_json_setting *out, al_err *err);
/* The same where milli[i] marks names[i] a number of CPUs
 * (al_json_get_millis: out[i].value in thousandths, max too). */
int al_json_settings_parse_milli(const char *buf, size_t len,
				 const char *const *names, const int *milli,
				 size_t n, int64_t max, al_json_setting *out,
				 al_err *err);

/* 1 if p[0..n) is well-formed UTF-8 (no overlongs, surrogates, > 10FFFF). */
int al_utf8_valid(const void *p, size_t n);
/* Length of the longest prefix of p[0..n) made of complete, valid UTF-8
 * sequences, such that the rest (at most 3 bytes) is the start of a
 * sequence that may still complete. *bad is set when p holds an invalid
 * sequence (the result is then meaningless). */
size_t al_utf8_complete_prefix(const void *p, size_t n, int *bad);
/* Standard base64 (with padding), NUL-terminated, malloc'ed; NULL on OOM. */
char *al_base64_encode(const void *p, size_t n);

/* Compact serialisation, valid until obj is put. */
const char *al_json_compact(json_object *obj);

#endif
