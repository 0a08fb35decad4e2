/* Fuzz the API request-body validation: arbitrary bytes through the create
 * and exec parsers must give a request that holds its documented bounds or
 * a clean AL_EINVAL / AL_EPATH / AL_ETOOBIG (a member named twice is one),
 * and the UTF-8 helpers must agree with each other. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/json.h"
#include "base/jsonkey.h"
#include "base/path.h"
#include "sandbox/sandbox_req.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_str_map(json_object *m, const al_json_map_limits *lim)
{
	if (m == NULL)
		return;
	if (!json_object_is_type(m, json_type_object) ||
	    (size_t)json_object_object_length(m) > lim->max_entries)
		abort();
	json_object_object_foreach(m, k, v)
	{
		if (strlen(k) == 0 || strlen(k) > lim->max_key)
			abort();
		if (!json_object_is_type(v, json_type_string) ||
		    (size_t)json_object_get_string_len(v) > lim->max_value)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	al_err err;

	al_create_req c;
	if (al_create_req_parse(buf, size, 300, 86400, &c, &err) == 0) {
		if (c.timeout_s < 1 || c.timeout_s > 86400 ||
		    c.template_name == NULL || c.template_name[0] == '\0' ||
		    strlen(c.template_name) > 63 ||
		    (c.project != NULL && !al_id_valid(c.project)) ||
		    (c.cpu_millis != 0 && (c.cpu_millis < AL_CPU_MILLIS_MIN ||
					   c.cpu_millis > AL_CPU_MILLIS_LIMIT)))
			abort();
		check_str_map(c.env, &al_json_env_limits);
		check_str_map(c.metadata, &al_json_metadata_limits);
		al_create_req_free(&c);
	} else if (err.code != AL_EINVAL && err.code != AL_ETOOBIG) {
		abort();
	}

	al_exec_req e;
	if (al_exec_req_parse(buf, size, &e, &err) == 0) {
		if (e.cmd == NULL || json_object_array_length(e.cmd) < 1)
			abort();
		/* No cwd ("") leaves it to the template's WORKDIR. */
		if (e.cwd[0] != '\0' &&
		    (al_path_check(e.cwd, &err) != 0 || e.cwd[0] != '/' ||
		     strstr(e.cwd, "//") != NULL))
			abort();
		if (e.user != NULL &&
		    (e.user[0] == '\0' || strlen(e.user) > 64 ||
		     strchr(e.user, ' ') != NULL))
			abort();
		if (e.timeout_s < 1 || e.timeout_s > AL_EXEC_TIMEOUT_MAX)
			abort();
		check_str_map(e.env, &al_json_env_limits);
		al_exec_req_free(&e);
	} else if (err.code != AL_EINVAL && err.code != AL_EPATH &&
		   err.code != AL_ETOOBIG) {
		abort();
	}

	/* The repeated-member scan on bytes that need not be JSON. */
	if (al_json_keys_unique(buf, size, 0, &err) < 0 &&
	    err.code != AL_EINVAL && err.code != AL_ENOMEM)
		abort();

	/* The prefix rule: a valid, complete prefix and at most 3 held
	 * bytes; whole input valid iff prefix is all and nothing bad. */
	int bad = 0;
	size_t ok = al_utf8_complete_prefix(data, size, &bad);
	if (ok > size || !al_utf8_valid(data, ok))
		abort();
	if (!bad && size - ok > 3)
		abort();
	if (al_utf8_valid(data, size) != (!bad && ok == size))
		abort();
	return 0;
}
