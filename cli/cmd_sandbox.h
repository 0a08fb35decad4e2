/* cmd_sandbox: `airlock sandbox network ...` and `airlock sandbox egress
 * ...` (a sandbox's network setting and its egress log). */
#ifndef AL_CLI_CMD_SANDBOX_H
#define AL_CLI_CMD_SANDBOX_H

#include "client.h"

/* argv[0] is "sandbox". Returns the exit code; 100 on bad usage. */
int cli_sandbox(cli *c, int argc, char **argv);

#endif
