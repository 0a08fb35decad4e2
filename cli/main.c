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

#include "sse.h"

typedef struct cli {
	char url[512];
	char key[256];
} cli;

typedef struct membuf {
	char *data;
	size_t len;
} membuf;

static size_t collect(char *p, size_t sz, size_t n, void *ud)
{
	membuf *m = ud;
	size_t add = sz * n;
	char *nd = realloc(m->data, m->len + add + 1);
	if (nd == NULL)
		return 0;
	memcpy(nd + m->len, p, add);
	m->data = nd;
	m->len += add;
	m->data[m->len] = '\0';
	return add;
}

static int load_key(cli *c)
{
	const char *k = getenv("AIRLOCK_API_KEY");
	if (k != NULL && *k != '\0') {
		snprintf(c->key, sizeof c->key, "%s", k);
		return 0;
	}
	const char *st = getenv("AIRLOCK_STATE");
	char path[600];
	snprintf(path, sizeof path, "%s/api-key", st != NULL ? st : "var");
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return -1;
	if (fgets(c->key, sizeof c->key, f) == NULL)
		c->key[0] = '\0';
	fclose(f);
	c->key[strcspn(c->key, "\r\n")] = '\0';
	return c->key[0] != '\0' ? 0 : -1;
}

/* One request; the body is collected unless sink is given. Returns the
 * HTTP status, or -1 on a transport error (printed). */
static long request(cli *c, const char *method, const char *path,
		    const char *body, size_t body_len, const char *accept,
		    membuf *out, curl_write_callback sink, void *sink_ctx)
{
	CURL *h = curl_easy_init();
	if (h == NULL)
		return -1;
	char url[2048], auth[300], acc[128];
	snprintf(url, sizeof url, "%s%s", c->url, path);
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->key);
	snprintf(acc, sizeof acc, "Accept: %s",
		 accept != NULL ? accept : "application/json");
	struct curl_slist *hdr = NULL;
	hdr = curl_slist_append(hdr, auth);
	hdr = curl_slist_append(hdr, acc);
	if (body != NULL)
		hdr = curl_slist_append(hdr,
					"Content-Type: application/json");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	if (body != NULL) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)body_len);
	}
	if (sink != NULL) {
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, sink_ctx);
	} else {
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	}
	CURLcode rc = curl_easy_perform(h);
	long status = -1;
	if (rc != CURLE_OK)
		fprintf(stderr, "airlock: %s: %s\n", url,
			curl_easy_strerror(rc));
	else
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hdr);
	curl_easy_cleanup(h);
	return status;
}

/* Print the API's answer; errors go to stderr. Returns the exit code. */
static int finish(long status, membuf *m)
{
	if (status < 0)
		return 1;
	if (status >= 400) {
		json_object *o = m->data != NULL ? json_tokener_parse(m->data)
						 : NULL;
		json_object *e = NULL, *msg = NULL;
		if (o != NULL && json_object_object_get_ex(o, "error", &e) &&
		    json_object_object_get_ex(e, "message", &msg))
			fprintf(stderr, "airlock: %ld: %s\n", status,
				json_object_get_string(msg));
		else
			fprintf(stderr, "airlock: HTTP %ld\n", status);
		json_object_put(o);
		free(m->data);
		return 1;
	}
	if (m->data != NULL)
		fputs(m->data, stdout);
	if (m->len > 0 && m->data[m->len - 1] != '\n')
		fputc('\n', stdout);
	free(m->data);
	return 0;
}

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
	if (sse_feed(&x->p, p, sz * n) < 0)
		return 0;
	return sz * n;
}

static int cmd_exec(cli *c, const char *id, int timeout, int argc,
		    char **argv)
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
	sse_init(&x.p, on_event, &x);
	membuf m = {0};
	long st = request(c, "POST", path, body, strlen(body),
			  "text/event-stream", &m, exec_sink, &x);
	json_object_put(req);
	sse_free(&x.p);
	if (st < 0)
		return 1;
	if (st >= 400) {
		fprintf(stderr, "airlock: exec failed with HTTP %ld\n", st);
		return 1;
	}
	return x.exit_code >= 0 ? x.exit_code : 1;
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	membuf m = {0};
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		if (collect(buf, 1, n, &m) != n) {
			free(m.data);
			fclose(f);
			return NULL;
		}
	fclose(f);
	*len = m.len;
	return m.data != NULL ? m.data : calloc(1, 1);
}

static void url_escape(const char *in, char *out, size_t outlen)
{
	CURL *h = curl_easy_init();
	char *e = h != NULL ? curl_easy_escape(h, in, 0) : NULL;
	snprintf(out, outlen, "%s", e != NULL ? e : "");
	curl_free(e);
	curl_easy_cleanup(h);
}

static int usage(void)
{
	fputs("usage: airlock health | templates | create [-t TEMPLATE] "
	      "[--timeout S] | ls | get ID | rm ID |\n"
	      "       exec ID [--timeout S] -- CMD [ARG...] | "
	      "put ID LOCAL REMOTE | cat ID REMOTE | files ID DIR\n",
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
	if (strcmp(cmd, "health") != 0 && load_key(&c) < 0) {
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
		rc = finish(request(&c, "GET", "/v1/health", NULL, 0, NULL,
				    &m, NULL, NULL),
			    &m);
	} else if (strcmp(cmd, "templates") == 0) {
		rc = finish(request(&c, "GET", "/v1/templates", NULL, 0, NULL,
				    &m, NULL, NULL),
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
		rc = finish(request(&c, "POST", "/v1/sandboxes", body,
				    strlen(body), NULL, &m, NULL, NULL),
			    &m);
		json_object_put(req);
	} else if (strcmp(cmd, "ls") == 0) {
		rc = finish(request(&c, "GET", "/v1/sandboxes", NULL, 0, NULL,
				    &m, NULL, NULL),
			    &m);
	} else if ((strcmp(cmd, "get") == 0 || strcmp(cmd, "rm") == 0) &&
		   argc == 3) {
		url_escape(argv[2], esc, sizeof esc);
		snprintf(path, sizeof path, "/v1/sandboxes/%s", esc);
		rc = finish(request(&c, cmd[0] == 'g' ? "GET" : "DELETE",
				    path, NULL, 0, NULL, &m, NULL, NULL),
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
		url_escape(argv[2], esc, sizeof esc);
		rc = cmd_exec(&c, esc, timeout, argc - i, argv + i);
	} else if (strcmp(cmd, "put") == 0 && argc == 5) {
		size_t len;
		char *data = read_file(argv[3], &len);
		if (data == NULL) {
			fprintf(stderr, "airlock: %s: %s\n", argv[3],
				strerror(errno));
			return 1;
		}
		char id[256];
		url_escape(argv[2], id, sizeof id);
		url_escape(argv[4], esc, sizeof esc);
		snprintf(path, sizeof path, "/v1/sandboxes/%s/files?path=%s",
			 id, esc);
		rc = finish(request(&c, "PUT", path, data, len, NULL, &m, NULL,
				    NULL),
			    &m);
		free(data);
	} else if ((strcmp(cmd, "cat") == 0 || strcmp(cmd, "files") == 0) &&
		   argc == 4) {
		char id[256];
		url_escape(argv[2], id, sizeof id);
		url_escape(argv[3], esc, sizeof esc);
		snprintf(path, sizeof path,
			 "/v1/sandboxes/%s/files?path=%s%s", id, esc,
			 cmd[0] == 'f' ? "&list=1" : "");
		long st = request(&c, "GET", path, NULL, 0, "*/*", &m, NULL,
				  NULL);
		if (st >= 200 && st < 300 && cmd[0] == 'c') {
			fwrite(m.data, 1, m.len, stdout);
			free(m.data);
			rc = 0;
		} else {
			rc = finish(st, &m);
		}
	} else {
		rc = usage();
	}
	curl_global_cleanup();
	return rc;
}
