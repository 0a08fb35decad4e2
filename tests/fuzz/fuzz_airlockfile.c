/* Fuzz the Airlockfile parser with arbitrary client bytes, then exercise
 * what a builder reads from the result. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "template/airlockfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int has_dotdot(const char *p)
{
	while (*p != '\0') {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return 1;
		p += n;
		if (*p == '/')
			p++;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	al_err err = {0};
	int line = -1;
	al_airlockfile *af = al_airlockfile_parse((const char *)data, size,
						  &line, &err);
	if (af == NULL) {
		/* A failure always says where, within the input. */
		if (line < 0 || (size_t)line > size + 1 || err.code == AL_OK)
			abort();
		return 0;
	}
	if (line != 0 || af->nsteps == 0 || af->steps[0].kind != AL_AF_FROM)
		abort();
	char key[AL_AF_KEY_HEX] = "";
	for (size_t i = 0; i < af->nsteps; i++) {
		const al_af_step *st = &af->steps[i];
		char next[AL_AF_KEY_HEX];
		if (al_airlockfile_step_key(i == 0 ? NULL : key, st,
					    st->kind == AL_AF_COPY ? "00"
								   : NULL,
					    next, &err) < 0)
			abort();
		memcpy(key, next, sizeof key);
		if (st->kind == AL_AF_COPY) {
			if (st->copy.dest[0] != '/' || st->copy.nsrc == 0)
				abort();
			for (size_t j = 0; j < st->copy.nsrc; j++)
				if (st->copy.src[j][0] == '/' ||
				    has_dotdot(st->copy.src[j]))
					abort();
		}
		if ((st->kind == AL_AF_RUN || st->kind == AL_AF_START ||
		     st->kind == AL_AF_READY) &&
		    (st->cmd.argc == 0 || st->cmd.argv[st->cmd.argc] != NULL))
			abort();
		if (st->workdir == NULL || st->workdir[0] != '/')
			abort();
	}
	char **envp = al_airlockfile_envp(af, af->nenv, &err);
	if (envp == NULL)
		abort();
	free(envp);
	al_airlockfile_free(af);
	return 0;
}
