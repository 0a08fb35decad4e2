/* cmd_project: `airlock project ...` and `airlock key ...` (admin keys:
 * projects, their quotas and their API keys). */
#ifndef AL_CLI_CMD_PROJECT_H
#define AL_CLI_CMD_PROJECT_H

#include "client.h"

/* argv[0] is "project" / "key". Returns the exit code; 100 on bad usage. */
int cli_project(cli *c, int argc, char **argv);
int cli_key(cli *c, int argc, char **argv);

#endif
