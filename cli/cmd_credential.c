/* airlock credential create NAME --host H [--host H...] [--header H]
 *                   [--format F] [--scope S] [--project P] [--rate N/S]
 *                   [--value-file PATH]
 * airlock credential ls [--project P] | show REF | delete REF
 * airlock credential rotate REF [--value-file PATH] [--host H...]
 *                   [--header H] [--format F] [--rate N/S|none]
 * airlock audit [--credential NAME] [--sandbox ID] [--since T]
 *               [--limit N] [--before CURSOR] [--project P]
 *
 * The value is read from stdin (one trailing newline dropped) or from
 * --value-file, never from the command line: argv is visible to every
 * user of the host. S is global, project, template:NAME, sandbox:ID or
 * metadata:K=V[,K=V...]; REF a credential's id or name. */
#include "cmd_credential.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <openssl/crypto.h>

#define VALUE_MAX 8192

static int get(cli *c, const char *path)
{
	membuf m = {0};
	return cli_finish(cli_request(c, "GET", path, NULL, 0, NULL, &m, NULL,
				      NULL),
			  &m);
}

/* The value from path (NULL: stdin) into buf; -1 with a message. */
static int read_value(const char *path, char buf[VALUE_MAX + 2], size_t *len)
{
	FILE *f = path != NULL ? fopen(path, "r") : stdin;
	if (f == NULL) {
		perror(path);
		return -1;
	}
	size_t n = fread(buf, 1, VALUE_MAX + 1, f);
	if (path != NULL)
		fclose(f);
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n > 0 && buf[n - 1] == '\r')
		n--;
	if (n == 0 || n > VALUE_MAX) {
		fprintf(stderr, "airlock: the value must be 1..%d bytes\n",
			VALUE_MAX);
		return -1;
	}
	buf[n] = '\0';
	*len = n;
	return 0;
}

/* "--scope" S as the API's scope object; NULL if malformed. */
static json_object *scope_object(const char *s)
{
	json_object *o = json_object_new_object();
	if (strcmp(s, "global") == 0 || strcmp(s, "project") == 0) {
		json_object_object_add(o, s, json_object_new_boolean(1));
	} else if (strncmp(s, "template:", 9) == 0) {
		json_object_object_add(o, "template",
				       json_object_new_string(s + 9));
	} else if (strncmp(s, "sandbox:", 8) == 0) {
		json_object_object_add(o, "sandbox",
				       json_object_new_string(s + 8));
	} else if (strncmp(s, "metadata:", 9) == 0) {
		json_object *m = json_object_new_object();
		char *dup = strdup(s + 9), *save = NULL;
		for (char *kv = dup ? strtok_r(dup, ",", &save) : NULL;
		     kv != NULL; kv = strtok_r(NULL, ",", &save)) {
			char *eq = strchr(kv, '=');
			if (eq == NULL)
				continue;
			*eq = '\0';
			json_object_object_add(m, kv,
					       json_object_new_string(eq + 1));
		}
		free(dup);
		json_object_object_add(o, "metadata", m);
	} else {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* The options of create / rotate into body; 100 on bad usage. */
static int options(int argc, char **argv, int create, json_object *body,
		   const char **value_file)
{
	json_object *inject = json_object_new_object(), *hosts = NULL;
	int rc = 0, any_inject = 0;
	for (int i = 0; rc == 0 && i < argc; i++) {
		const char *opt = argv[i],
			   *arg = i + 1 < argc ? argv[i + 1] : NULL;
		if (arg == NULL) {
			rc = 100;
			break;
		}
		i++;
		if (strcmp(opt, "--host") == 0) {
			if (hosts == NULL) {
				hosts = json_object_new_array();
				json_object_object_add(inject, "hosts", hosts);
			}
			json_object_array_add(hosts,
					      json_object_new_string(arg));
			any_inject = 1;
		} else if (strcmp(opt, "--header") == 0 ||
			   strcmp(opt, "--format") == 0) {
			json_object_object_add(inject, opt + 2,
					       json_object_new_string(arg));
			any_inject = 1;
		} else if (strcmp(opt, "--rate") == 0) {
			int n = 0, per = 0;
			if (!create && strcmp(arg, "none") == 0) {
				json_object_object_add(body, "rate_limit",
						       NULL);
				continue;
			}
			if (sscanf(arg, "%d/%d", &n, &per) != 2) {
				rc = 100;
				break;
			}
			json_object *r = json_object_new_object();
			json_object_object_add(r, "requests",
					       json_object_new_int(n));
			json_object_object_add(r, "per_seconds",
					       json_object_new_int(per));
			json_object_object_add(body, "rate_limit", r);
		} else if (create && strcmp(opt, "--scope") == 0) {
			json_object *s = scope_object(arg);
			if (s == NULL)
				rc = 100;
			else
				json_object_object_add(body, "scope", s);
		} else if (create && strcmp(opt, "--project") == 0) {
			json_object_object_add(body, "project",
					       json_object_new_string(arg));
		} else if (strcmp(opt, "--value-file") == 0) {
			*value_file = arg;
		} else {
			rc = 100;
		}
	}
	if (rc == 0 && (any_inject || create))
		json_object_object_add(body, "inject", inject);
	else
		json_object_put(inject);
	return rc;
}

/* create / rotate: the options, then the value, then the request. */
static int send_with_value(cli *c, const char *method, const char *path,
			   json_object *body, int argc, char **argv, int create)
{
	const char *value_file = NULL;
	char value[VALUE_MAX + 2];
	size_t len = 0;
	if (options(argc, argv, create, body, &value_file) != 0) {
		json_object_put(body);
		return 100;
	}
	if (read_value(value_file, value, &len) < 0) {
		json_object_put(body);
		return 1;
	}
	json_object_object_add(body, "value",
			       json_object_new_string_len(value, (int)len));
	OPENSSL_cleanse(value, sizeof value);
	return cli_send_json(c, method, path, body);
}

int cli_credential(cli *c, int argc, char **argv)
{
	char esc[256], path[512];
	if (argc >= 2 && strcmp(argv[1], "ls") == 0) {
		if (argc == 2)
			return get(c, "/v1/credentials");
		if (argc != 4 || strcmp(argv[2], "--project") != 0)
			return 100;
		cli_url_escape(argv[3], esc, sizeof esc);
		snprintf(path, sizeof path, "/v1/credentials?project=%s", esc);
		return get(c, path);
	}
	if (argc < 3)
		return 100;
	cli_url_escape(argv[2], esc, sizeof esc);
	snprintf(path, sizeof path, "/v1/credentials/%s", esc);
	if (argc == 3 && strcmp(argv[1], "show") == 0)
		return get(c, path);
	if (argc == 3 && strcmp(argv[1], "delete") == 0) {
		membuf m = {0};
		return cli_finish(cli_request(c, "DELETE", path, NULL, 0, NULL,
					      &m, NULL, NULL),
				  &m);
	}
	if (strcmp(argv[1], "rotate") == 0)
		return send_with_value(c, "PUT", path, json_object_new_object(),
				       argc - 3, argv + 3, 0);
	if (strcmp(argv[1], "create") == 0) {
		json_object *body = json_object_new_object();
		json_object_object_add(body, "name",
				       json_object_new_string(argv[2]));
		return send_with_value(c, "POST", "/v1/credentials", body,
				       argc - 3, argv + 3, 1);
	}
	return 100;
}

int cli_audit(cli *c, int argc, char **argv)
{
	static const char *const opts[] = {"credential", "sandbox", "since",
					   "limit",	 "before",  "project"};
	char path[2048], esc[512];
	size_t o = (size_t)snprintf(path, sizeof path, "/v1/audit");
	for (int i = 1; i < argc; i += 2) {
		size_t k = 0;
		while (k < 6 && (strncmp(argv[i], "--", 2) != 0 ||
				 strcmp(argv[i] + 2, opts[k]) != 0))
			k++;
		if (k == 6 || i + 1 >= argc)
			return 100;
		cli_url_escape(argv[i + 1], esc, sizeof esc);
		o += (size_t)snprintf(path + o, sizeof path - o, "%c%s=%s",
				      o == 9 ? '?' : '&', opts[k], esc);
		if (o >= sizeof path)
			return 100;
	}
	return get(c, path);
}
