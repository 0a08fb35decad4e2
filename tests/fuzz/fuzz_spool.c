/* Fuzz the spool parser (core/sandbox/spool.h): a spool file is a name and a few
 * hundred bytes the controller reads from run/events. Input: the file
 * name up to the first newline, the content after it. Whatever the
 * bytes, al_spool_parse returns 0 with an event of a shim that matches
 * its name (and packs and parses to itself) or -1 with an error. */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "model/sandbox_state.h"
#include "sandbox/spool.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t nlen = nl != NULL ? (size_t)(nl - data) : size;
	char name[128];
	if (nlen >= sizeof name || memchr(data, '\0', nlen) != NULL)
		return 0; /* readdir gives no such names */
	memcpy(name, data, nlen);
	name[nlen] = '\0';
	const uint8_t *body = nl != NULL ? nl + 1 : data + size;
	size_t blen = (size_t)(data + size - body);

	al_spool_entry e;
	al_err err = {0};
	if (al_spool_parse(name, body, blen, &e, &err) < 0) {
		if (err.code == AL_OK)
			abort();
		return 0;
	}
	char want[128];
	snprintf(want, sizeof want, "%s.%" PRIu64, e.e.id, e.seq);
	if (strcmp(want, name) != 0 || strcmp(e.name, name) != 0 ||
	    (e.e.ev != AL_EV_FAIL && e.e.ev != AL_EV_DELETE) ||
	    e.e.at_ms <= 0 || !al_utf8_valid(e.e.detail, strlen(e.e.detail)))
		abort();
	char *s = al_spool_pack(&e, &err);
	al_spool_entry again;
	if (s == NULL || al_spool_parse(name, s, strlen(s), &again, &err) < 0 ||
	    memcmp(&again, &e, sizeof e) != 0)
		abort();
	free(s);
	return 0;
}
