/* jsonw: one flat JSON object written straight into a caller's buffer,
 * for the messages a gateway packs once per request (building json-c
 * objects for them cost more than the rest of the message's work).
 *
 * Keys are the caller's literals, written as they are. Strings are
 * escaped as json-c escapes them ('"', '\\' and control bytes); other
 * bytes pass as they are, so callers pass valid UTF-8 or use
 * al_jsonw_printable. A field that does not fit fails the object. */
#ifndef AL_JSONW_H
#define AL_JSONW_H

#include <stdbool.h>
#include <stddef.h>

typedef struct al_jsonw {
	char *p;
	size_t cap, len;
	bool failed;
} al_jsonw;

/* Start an object in buf (cap bytes). */
void al_jsonw_start(al_jsonw *w, char *buf, size_t cap);
void al_jsonw_str(al_jsonw *w, const char *key, const char *s);
/* s cut to max - 1 bytes, each byte outside printable ASCII as '?'. */
void al_jsonw_printable(al_jsonw *w, const char *key, const char *s,
			size_t max);
void al_jsonw_int(al_jsonw *w, const char *key, long long v);
void al_jsonw_bool(al_jsonw *w, const char *key, bool v);
void al_jsonw_null(al_jsonw *w, const char *key);
/* Close the object and NUL-terminate it: its length, or -1 when it did
 * not fit in cap - 1 bytes. */
long al_jsonw_end(al_jsonw *w);

#endif
