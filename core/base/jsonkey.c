#include "base/jsonkey.h"

#include <stdint.h>
#include <string.h>

#include <json-c/json.h>
#include <json-c/printbuf.h>

#define ECHO_MAX 64 /* longest member name an error message repeats */

int al_json_key_tame(const char *key)
{
	size_t n = strnlen(key, ECHO_MAX + 1);
	if (n == 0 || n > ECHO_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = key[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-' ||
		      c == '.'))
			return 0;
	}
	return 1;
}

/* An object or array open at the scan position. */
typedef struct frame {
	int object;
	json_object *names;	 /* decoded names seen (object; lazily) */
	char in[ECHO_MAX + 1];	 /* tame name of the member holding it */
	char last[ECHO_MAX + 1]; /* tame name of its latest member */
} frame;

typedef struct scan {
	frame st[AL_JSONKEY_DEPTH_MAX];
	int top;	   /* -1: outside every object and array */
	json_tokener *tok; /* decodes names with escapes */
	char raw[256];	   /* a name without escapes */
} scan;

static int repeated(const frame *f, const char *name, al_err *err)
{
	const char *what = al_json_key_tame(name) ? name : NULL;
	if (what != NULL && f->in[0] != '\0')
		return al_err_set(err, AL_EINVAL, 0,
				  "member '%s' is repeated in '%s' (name each"
				  " member once)",
				  what, f->in);
	if (what != NULL)
		return al_err_set(err, AL_EINVAL, 0,
				  "member '%s' is repeated (name each member"
				  " once)",
				  what);
	if (f->in[0] != '\0')
		return al_err_set(err, AL_EINVAL, 0,
				  "a member name is repeated in '%s' (name each"
				  " member once)",
				  f->in);
	return al_err_set(err, AL_EINVAL, 0,
			  "a member name is repeated (name each member once)");
}

/* The name q[0..n) (quotes included) as json-c names the member: up to
 * a NUL byte (json-c's names are C strings). Without escapes those are
 * the bytes between the quotes; with escapes json-c decodes them (*v
 * then holds the result, to put). NULL when json-c refuses the text. */
static const char *decode_name(scan *s, const char *q, size_t n,
			       json_object **v)
{
	*v = NULL;
	if (n - 2 < sizeof s->raw && memchr(q + 1, '\\', n - 2) == NULL) {
		memcpy(s->raw, q + 1, n - 2);
		s->raw[n - 2] = '\0';
		return s->raw;
	}
	if (s->tok == NULL) {
		s->tok = json_tokener_new_ex(1);
		if (s->tok == NULL)
			return NULL;
		/* As strict as the parse the text went through, and no
		 * more: a name json-c took with bytes that are not UTF-8
		 * (frames from a guest) decodes here too. */
		json_tokener_set_flags(s->tok, JSON_TOKENER_STRICT);
	}
	json_tokener_reset(s->tok);
	if (n <= (size_t)INT32_MAX)
		*v = json_tokener_parse_ex(s->tok, q, (int)n);
	return json_object_get_type(*v) == json_type_string
		       ? json_object_get_string(*v)
		       : NULL;
}

/* The member name q[0..n) of the innermost object. */
static int add_name(scan *s, const char *q, size_t n, al_err *err)
{
	frame *f = &s->st[s->top];
	if (f->names == NULL && (f->names = json_object_new_object()) == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	json_object *v;
	const char *name = decode_name(s, q, n, &v);
	int rc = 0;
	if (name == NULL)
		rc = al_err_set(err, AL_EINVAL, 0,
				"malformed JSON: bad member name");
	else if (json_object_object_get_ex(f->names, name, NULL))
		rc = repeated(f, name, err);
	else if (json_object_object_add(f->names, name, NULL) < 0)
		rc = al_err_set(err, AL_ENOMEM, 0, "out of memory");
	if (rc == 0)
		strcpy(f->last, al_json_key_tame(name) ? name : "");
	json_object_put(v);
	return rc;
}

static int open_frame(scan *s, int object, al_err *err)
{
	if (s->top + 1 == AL_JSONKEY_DEPTH_MAX)
		return al_err_set(err, AL_EINVAL, 0,
				  "malformed JSON: nested too deeply");
	const frame *up = s->top >= 0 ? &s->st[s->top] : NULL;
	frame *f = &s->st[++s->top];
	f->object = object;
	f->names = NULL;
	f->last[0] = '\0';
	strcpy(f->in, up == NULL ? "" : up->object ? up->last : up->in);
	return 0;
}

int al_json_keys_unique(const char *text, size_t len, int wipe, al_err *err)
{
	scan s = {.top = -1};
	int rc = 0, want_name = 0;
	for (size_t i = 0; rc == 0 && i < len; i++) {
		char c = text[i];
		if (c == '"') {
			size_t j = i + 1;
			while (j < len && text[j] != '"')
				j += text[j] == '\\' ? 2 : 1;
			if (j >= len)
				rc = al_err_set(err, AL_EINVAL, 0,
						"malformed JSON: open string");
			else if (want_name)
				rc = add_name(&s, text + i, j - i + 1, err);
			want_name = 0;
			i = j;
		} else if (c == '{' || c == '[') {
			rc = open_frame(&s, c == '{', err);
			want_name = c == '{';
		} else if (c == '}' || c == ']') {
			if (s.top < 0)
				rc = al_err_set(err, AL_EINVAL, 0,
						"malformed JSON: unbalanced");
			else
				json_object_put(s.st[s.top--].names);
			want_name = 0;
		} else if (c == ',') {
			want_name = s.top >= 0 && s.st[s.top].object;
		}
	}
	for (; s.top >= 0; s.top--)
		json_object_put(s.st[s.top].names);
	if (wipe)
		explicit_bzero(s.raw, sizeof s.raw);
	if (s.tok != NULL) {
		if (wipe && s.tok->pb != NULL && s.tok->pb->buf != NULL)
			explicit_bzero(s.tok->pb->buf, (size_t)s.tok->pb->size);
		json_tokener_free(s.tok);
	}
	return rc;
}
