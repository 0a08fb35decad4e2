/* jsonkey: the member names of JSON text from outside.
 *
 * json-c keeps the last of two members with the same name, so
 * {"cmd":["id"],"cmd":["echo","x"]} reads as echo to us and may read as
 * id to a layer in front that keeps the first. Every parser of JSON
 * objects from outside refuses a repeated name instead. */
#ifndef AL_JSONKEY_H
#define AL_JSONKEY_H

#include <stddef.h>

#include "base/err.h"

#define AL_JSONKEY_DEPTH_MAX 32 /* nesting the check follows */

/* 0 when no object in text[0..len) names a member twice, comparing
 * names as json-c decodes them ("\u0063md" repeats "cmd"); else -1 with
 * AL_EINVAL naming the member (and the member that holds its object).
 * text must be one value that json-c parsed in strict mode; anything
 * else is never read out of bounds but may be refused. wipe: cleanse the
 * decoder's scratch buffer (text that holds secrets). */
int al_json_keys_unique(const char *text, size_t len, int wipe, al_err *err);

/* 1 when a member name may be echoed in an error message: 1..64 bytes
 * of [A-Za-z0-9_.-]. Others may hold anything (a pasted secret). */
int al_json_key_tame(const char *key);

#endif
