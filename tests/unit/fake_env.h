/* An environment of the test's own for al_config_load_from: fake_env
 * is a list of name, value pairs ending in NULL (NULL: empty). */
#ifndef AL_TEST_FAKE_ENV_H
#define AL_TEST_FAKE_ENV_H

#include <stddef.h>
#include <string.h>

static const char *const *fake_env;

static const char *fake_env_lookup(const char *name)
{
	for (size_t i = 0; fake_env != NULL && fake_env[i] != NULL; i += 2)
		if (strcmp(fake_env[i], name) == 0)
			return fake_env[i + 1];
	return NULL;
}

#endif
