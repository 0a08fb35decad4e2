/* airlock project create NAME | ls | show NAME
 * airlock project quota NAME FIELD=N|default... (cpus=N may be a
 *   fraction: cpus=2.5)
 * airlock key create --project P [--role admin|member] --name N
 * airlock key ls [--project P] | rm ID
 *
 * Each prints the API's JSON answer; `key create` prints the new key,
 * which the API shows only this once. */
#include "cmd_project.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

static int get(cli *c, const char *path)
{
	membuf m = {0};
	return cli_finish(cli_request(c, "GET", path, NULL, 0, NULL, &m, NULL,
				      NULL),
			  &m);
}

static int quota(cli *c, const char *name, int argc, char **argv)
{
	char esc[256], path[512];
	cli_url_escape(name, esc, sizeof esc);
	snprintf(path, sizeof path, "/v1/projects/%s/quota", esc);
	return cli_put_settings(c, path, argc, argv);
}

int cli_project(cli *c, int argc, char **argv)
{
	char esc[256], path[512];
	if (argc == 2 && strcmp(argv[1], "ls") == 0)
		return get(c, "/v1/projects");
	if (argc == 3 && strcmp(argv[1], "create") == 0) {
		json_object *body = json_object_new_object();
		json_object_object_add(body, "name",
				       json_object_new_string(argv[2]));
		return cli_send_json(c, "POST", "/v1/projects", body);
	}
	if (argc == 3 && strcmp(argv[1], "show") == 0) {
		cli_url_escape(argv[2], esc, sizeof esc);
		snprintf(path, sizeof path, "/v1/projects/%s", esc);
		return get(c, path);
	}
	if (argc >= 4 && strcmp(argv[1], "quota") == 0)
		return quota(c, argv[2], argc - 3, argv + 3);
	return 100;
}

int cli_key(cli *c, int argc, char **argv)
{
	char esc[256], path[512];
	const char *project = NULL, *role = "member", *name = NULL;
	if (argc >= 2 &&
	    (strcmp(argv[1], "create") == 0 || strcmp(argv[1], "ls") == 0)) {
		int create = argv[1][0] == 'c';
		for (int i = 2; i < argc; i++) {
			if (i + 1 >= argc)
				return 100;
			if (strcmp(argv[i], "--project") == 0)
				project = argv[++i];
			else if (create && strcmp(argv[i], "--role") == 0)
				role = argv[++i];
			else if (create && strcmp(argv[i], "--name") == 0)
				name = argv[++i];
			else
				return 100;
		}
		if (!create) {
			if (project == NULL)
				return get(c, "/v1/keys");
			cli_url_escape(project, esc, sizeof esc);
			snprintf(path, sizeof path, "/v1/keys?project=%s", esc);
			return get(c, path);
		}
		if (project == NULL || name == NULL)
			return 100;
		json_object *body = json_object_new_object();
		json_object_object_add(body, "project",
				       json_object_new_string(project));
		json_object_object_add(body, "role",
				       json_object_new_string(role));
		json_object_object_add(body, "name",
				       json_object_new_string(name));
		return cli_send_json(c, "POST", "/v1/keys", body);
	}
	if (argc == 3 && strcmp(argv[1], "rm") == 0) {
		membuf m = {0};
		cli_url_escape(argv[2], esc, sizeof esc);
		snprintf(path, sizeof path, "/v1/keys/%s", esc);
		return cli_finish(cli_request(c, "DELETE", path, NULL, 0, NULL,
					      &m, NULL, NULL),
				  &m);
	}
	return 100;
}
