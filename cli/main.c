/* airlock: command line for Airlock users and operators.
 *
 *   airlock health
 *   airlock templates
 *   airlock create [-t TEMPLATE] [--timeout S]      prints the sandbox id
 *   airlock ls | get ID | rm ID
 *   airlock exec ID [--timeout S] -- CMD [ARG...]  streams output, exits
 *                                                  with the command's code
 *   airlock put ID LOCAL_FILE REMOTE_PATH
 *   airlock cat ID REMOTE_PATH
 *   airlock files ID REMOTE_DIR
 *   airlock sandbox network ID --mode M [--allow P]... [--deny P]...
 *   airlock sandbox egress ID [--limit N] [--before CURSOR]
 *   airlock template build DIR [--name N] [--no-cache]
 *   airlock template ls | show NAME | rm NAME
 *   airlock template pool NAME BOUND=N|default...
 *   airlock project create NAME | ls | show NAME       (admin keys)
 *   airlock project quota NAME FIELD=N|default...
 *   airlock key create --project P [--role R] --name N | ls | rm ID
 *   airlock credential create NAME --host H... [--header H] [--format F]
 *                      [--scope S] [--project P] [--rate N/S]
 *                      [--value-file F]          (value: stdin or F)
 *   airlock credential ls [--project P] | show REF | delete REF |
 *                      rotate REF [--value-file F] [options as create]
 *   airlock audit [--credential N] [--sandbox ID] [--since T] [--limit N]
 *                 [--before CURSOR] [--project P]
 *
 * AIRLOCK_URL (default http://127.0.0.1:8080) and AIRLOCK_API_KEY (default:
 * the contents of $AIRLOCK_STATE/api-key, or ./var/api-key).
 * Exit codes: the command's own in exec; 0 ok, 1 API error, 100 usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <json-c/json.h>
#include <openssl/evp.h>

#include "client.h"
#include "cmd_credential.h"
#include "cmd_project.h"
#include "cmd_sandbox.h"
#include "cmd_template.h"
#include "sse.h"

typedef struct exec_ctx {
	sse_parser p;
	int exit_code;
} exec_ctx;

static void write_b64(FILE *f, const char *b64)
{
	size_t n = strlen(b64);
	unsigned char *out = malloc(n / 4 * 3 + 3);
	if (out == NULL)
		return;
	int len = EVP_DecodeBlock(out, (const unsigned char *)b64, (int)n);
	if (len > 0) {
		/* DecodeBlock counts padding bytes as data. */
		while (n > 0 && b64[n - 1] == '=' && len > 0) {
			n--;
			len--;
		}
		fwrite(out, 1, (size_t)len, f);
	}
	free(out);
}

static void on_event(const char *event, const char *data, void *ud)
{
	exec_ctx *x = ud;
	json_object *o = json_tokener_parse(data);
	json_object *v = NULL;
	if (o == NULL)
		return;
	FILE *f = strcmp(event, "stderr") == 0 ? stderr : stdout;
	if (strcmp(event, "stdout") == 0 || strcmp(event, "stderr") == 0) {
		if (json_object_object_get_ex(o, "data", &v))
			fputs(json_object_get_string(v), f);
		else if (json_object_object_get_ex(o, "data_b64", &v))
			write_b64(f, json_object_get_string(v));
		fflush(f);
	} else if (strcmp(event, "exit") == 0) {
		if (json_object_object_get_ex(o, "exit_code", &v))
			x->exit_code = json_object_get_int(v);
		else
			x->exit_code = 128 + 9;
	} else if (strcmp(event, "error") == 0) {
		fprintf(stderr, "airlock: %s\n", data);
		x->exit_code = 1;
	}
	json_object_put(o);
}

static size_t exec_sink(char *p, size_t sz, size_t n, void *ud)
{
	exec_ctx *x = ud;
	if (cli_sse_feed(&x->p, p, sz * n) < 0)
		return 0;
	return sz * n;
}

static int cmd_exec(cli *c, const char *id, int timeout, int argc, char **argv)
{
	json_object *req = json_object_new_object();
	json_object *cmd = json_object_new_array();
	for (int i = 0; i < argc; i++)
		json_object_array_add(cmd, json_object_new_string(argv[i]));
	json_object_object_add(req, "cmd", cmd);
	if (timeout > 0)
		json_object_object_add(req, "timeout",
				       json_object_new_int(timeout));
	const char *body = json_object_to_json_string(req);
	char path[4096];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/exec", id);
	exec_ctx x = {.exit_code = -1};
	cli_sse_init(&x.p, on_event, &x);
	membuf m = {0};
	long st = cli_request(c, "POST", path, body, strlen(body),
			      "text/event-stream", &m, exec_sink, &x);
	json_object_put(req);
	cli_sse_free(&x.p);
	if (st < 0)
		return 1;
	if (st >= 400) {
		fprintf(stderr, "airlock: exec failed with HTTP %ld\n", st);
		return 1;
	}
	return x.exit_code >= 0 ? x.exit_code : 1;
}

static int usage(void)
{
	fputs("usage: airlock health | templates | create [-t TEMPLATE] "
	      "[--timeout S] | ls | get ID | rm ID |\n"
	      "       exec ID [--timeout S] -- CMD [ARG...] | "
	      "put ID LOCAL REMOTE | cat ID REMOTE | files ID DIR |\n"
	      "       sandbox network ID --mode none|allowlist|open "
	      "[--allow P]... [--deny P]... |\n"
	      "       sandbox egress ID [--limit N] [--before CURSOR] |\n"
	      "       template build DIR [--name N] [--no-cache] | "
	      "template ls | template show NAME | template rm NAME |\n"
	      "       template pool NAME ns_min|ns_max|vm_min|vm_max=N|default... |\n"
	      "       project create NAME | project ls | project show NAME | "
	      "project quota NAME FIELD=N|default... |\n"
	      "       key create --project P [--role admin|member] --name N | "
	      "key ls [--project P] | key rm ID |\n"
	      "       credential create NAME --host H [--host H...] "
	      "[--header H] [--format F]\n"
	      "         [--scope global|project|template:T|sandbox:ID|"
	      "metadata:K=V,...] [--project P]\n"
	      "         [--rate N/SECONDS] [--value-file F] (value on stdin "
	      "otherwise) |\n"
	      "       credential ls [--project P] | credential show REF | "
	      "credential delete REF |\n"
	      "       credential rotate REF [--value-file F] [--host H...] "
	      "[--rate N/S|none] |\n"
	      "       audit [--credential N] [--sandbox ID] [--since T] "
	      "[--limit N] [--before C] [--project P]\n",
	      stderr);
	return 100;
}

int main(int argc, char **argv)
{
	cli c = {0};
	const char *u = getenv("AIRLOCK_URL");
	snprintf(c.url, sizeof c.url, "%s",
		 u != NULL ? u : "http://127.0.0.1:8080");
	if (argc < 2)
		return usage();
	const char *cmd = argv[1];
	if (strcmp(cmd, "health") != 0 && cli_load_key(&c) < 0) {
		fputs("airlock: no API key: set AIRLOCK_API_KEY or "
		      "AIRLOCK_STATE\n",
		      stderr);
		return 100;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	membuf m = {0};
	char path[4096], esc[3000];
	int rc;
	if (strcmp(cmd, "health") == 0) {
		rc = cli_finish(cli_request(&c, "GET", "/v1/health", NULL, 0,
					    NULL, &m, NULL, NULL),
				&m);
	} else if (strcmp(cmd, "templates") == 0) {
		rc = cli_finish(cli_request(&c, "GET", "/v1/templates", NULL, 0,
					    NULL, &m, NULL, NULL),
				&m);
	} else if (strcmp(cmd, "create") == 0) {
		const char *tmpl = "minimal";
		int timeout = 0;
		for (int i = 2; i < argc; i++) {
			if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
				tmpl = argv[++i];
			else if (strcmp(argv[i], "--timeout") == 0 &&
				 i + 1 < argc)
				timeout = atoi(argv[++i]);
			else
				return usage();
		}
		json_object *req = json_object_new_object();
		json_object_object_add(req, "template",
				       json_object_new_string(tmpl));
		if (timeout > 0)
			json_object_object_add(req, "timeout",
					       json_object_new_int(timeout));
		const char *body = json_object_to_json_string(req);
		rc = cli_finish(cli_request(&c, "POST", "/v1/sandboxes", body,
					    strlen(body), NULL, &m, NULL, NULL),
				&m);
		json_object_put(req);
	} else if (strcmp(cmd, "template") == 0) {
		rc = cli_template(&c, argc - 1, argv + 1);
		if (rc == 100)
			rc = usage();
	} else if (strcmp(cmd, "project") == 0 || strcmp(cmd, "key") == 0) {
		rc = cmd[0] == 'p' ? cli_project(&c, argc - 1, argv + 1)
				   : cli_key(&c, argc - 1, argv + 1);
		if (rc == 100)
			rc = usage();
	} else if (strcmp(cmd, "credential") == 0 ||
		   strcmp(cmd, "audit") == 0) {
		rc = cmd[0] == 'c' ? cli_credential(&c, argc - 1, argv + 1)
				   : cli_audit(&c, argc - 1, argv + 1);
		if (rc == 100)
			rc = usage();
	} else if (strcmp(cmd, "sandbox") == 0) {
		rc = cli_sandbox(&c, argc - 1, argv + 1);
		if (rc == 100)
			rc = usage();
	} else if (strcmp(cmd, "ls") == 0) {
		rc = cli_finish(cli_request(&c, "GET", "/v1/sandboxes", NULL, 0,
					    NULL, &m, NULL, NULL),
				&m);
	} else if ((strcmp(cmd, "get") == 0 || strcmp(cmd, "rm") == 0) &&
		   argc == 3) {
		cli_url_escape(argv[2], esc, sizeof esc);
		snprintf(path, sizeof path, "/v1/sandboxes/%s", esc);
		rc = cli_finish(cli_request(&c,
					    cmd[0] == 'g' ? "GET" : "DELETE",
					    path, NULL, 0, NULL, &m, NULL,
					    NULL),
				&m);
	} else if (strcmp(cmd, "exec") == 0 && argc >= 4) {
		int timeout = 0, i = 3;
		if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
			timeout = atoi(argv[i + 1]);
			i += 2;
		}
		if (i < argc && strcmp(argv[i], "--") == 0)
			i++;
		if (i >= argc)
			return usage();
		cli_url_escape(argv[2], esc, sizeof esc);
		rc = cmd_exec(&c, esc, timeout, argc - i, argv + i);
	} else if (strcmp(cmd, "put") == 0 && argc == 5) {
		size_t len;
		char *data = cli_read_file(argv[3], &len);
		if (data == NULL) {
			fprintf(stderr, "airlock: %s: %s\n", argv[3],
				strerror(errno));
			return 1;
		}
		char id[256];
		cli_url_escape(argv[2], id, sizeof id);
		cli_url_escape(argv[4], esc, sizeof esc);
		snprintf(path, sizeof path, "/v1/sandboxes/%s/files?path=%s",
			 id, esc);
		rc = cli_finish(cli_request(&c, "PUT", path, data, len, NULL,
					    &m, NULL, NULL),
				&m);
		free(data);
	} else if ((strcmp(cmd, "cat") == 0 || strcmp(cmd, "files") == 0) &&
		   argc == 4) {
		char id[256];
		cli_url_escape(argv[2], id, sizeof id);
		cli_url_escape(argv[3], esc, sizeof esc);
		snprintf(path, sizeof path, "/v1/sandboxes/%s/files?path=%s%s",
			 id, esc, cmd[0] == 'f' ? "&list=1" : "");
		long st = cli_request(&c, "GET", path, NULL, 0, "*/*", &m, NULL,
				      NULL);
		if (st >= 200 && st < 300 && cmd[0] == 'c') {
			fwrite(m.data, 1, m.len, stdout);
			free(m.data);
			rc = 0;
		} else {
			rc = cli_finish(st, &m);
		}
	} else {
		rc = usage();
	}
	curl_global_cleanup();
	return rc;
}
