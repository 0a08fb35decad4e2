/* cmd_template: `airlock template ...` (build with live progress, ls,
 * show, rm). */
#ifndef AL_CLI_CMD_TEMPLATE_H
#define AL_CLI_CMD_TEMPLATE_H

#include "client.h"

/* argv[0] is "template". Returns the exit code; 100 on bad usage. */
int cli_template(cli *c, int argc, char **argv);

#endif
