/* cmd_credential: `airlock credential ...` and `airlock audit`. */
#ifndef AL_CLI_CMD_CREDENTIAL_H
#define AL_CLI_CMD_CREDENTIAL_H

#include "client.h"

/* argv[0] is "credential" / "audit". Returns the exit code; 100 on bad
 * usage. */
int cli_credential(cli *c, int argc, char **argv);
int cli_audit(cli *c, int argc, char **argv);

#endif
