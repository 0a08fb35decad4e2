/* airlock sandbox network ID --mode none|allowlist|open [--allow P]...
 *                            [--deny P]...
 *     PUT /v1/sandboxes/ID/network; prints the answer.
 * airlock sandbox egress ID [--limit N] [--before CURSOR]
 *     one page of the egress log, newest first (its "next" is the
 *     cursor of the page after it). */
#include "cmd_sandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

static int network(cli *c, const char *id, int argc, char **argv)
{
	const char *mode = NULL;
	json_object *allow = json_object_new_array();
	json_object *deny = json_object_new_array();
	for (int i = 0; i < argc; i++) {
		if (i + 1 >= argc)
			goto usage;
		if (strcmp(argv[i], "--mode") == 0)
			mode = argv[++i];
		else if (strcmp(argv[i], "--allow") == 0)
			json_object_array_add(
				allow, json_object_new_string(argv[++i]));
		else if (strcmp(argv[i], "--deny") == 0)
			json_object_array_add(
				deny, json_object_new_string(argv[++i]));
		else
			goto usage;
	}
	if (mode == NULL)
		goto usage;
	json_object *body = json_object_new_object();
	json_object_object_add(body, "mode", json_object_new_string(mode));
	json_object_object_add(body, "allow", allow);
	json_object_object_add(body, "deny", deny);
	char esc[256], path[512];
	cli_url_escape(id, esc, sizeof esc);
	snprintf(path, sizeof path, "/v1/sandboxes/%s/network", esc);
	return cli_send_json(c, "PUT", path, body);
usage:
	json_object_put(allow);
	json_object_put(deny);
	return 100;
}

static int egress(cli *c, const char *id, int argc, char **argv)
{
	char esc[256], path[1024], cur[128] = "";
	const char *limit = "100";
	for (int i = 0; i < argc; i++) {
		if (i + 1 >= argc)
			return 100;
		if (strcmp(argv[i], "--limit") == 0)
			limit = argv[++i];
		else if (strcmp(argv[i], "--before") == 0)
			cli_url_escape(argv[++i], cur, sizeof cur);
		else
			return 100;
	}
	char lim[32];
	cli_url_escape(id, esc, sizeof esc);
	cli_url_escape(limit, lim, sizeof lim);
	snprintf(path, sizeof path, "/v1/sandboxes/%s/egress?limit=%s%s%s", esc,
		 lim, cur[0] ? "&before=" : "", cur);
	membuf m = {0};
	return cli_finish(cli_request(c, "GET", path, NULL, 0, NULL, &m, NULL,
				      NULL),
			  &m);
}

int cli_sandbox(cli *c, int argc, char **argv)
{
	if (argc < 3)
		return 100;
	if (strcmp(argv[1], "network") == 0)
		return network(c, argv[2], argc - 3, argv + 3);
	if (strcmp(argv[1], "egress") == 0)
		return egress(c, argv[2], argc - 3, argv + 3);
	return 100;
}
