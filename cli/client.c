#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

size_t cli_collect(char *p, size_t sz, size_t n, void *ud)
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

int cli_load_key(cli *c)
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
long cli_request(cli *c, const char *method, const char *path, const char *body,
		 size_t body_len, const char *accept, membuf *out,
		 curl_write_callback sink, void *sink_ctx)
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
		hdr = curl_slist_append(hdr, "Content-Type: application/json");
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
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cli_collect);
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
int cli_finish(long status, membuf *m)
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

char *cli_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	membuf m = {0};
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		if (cli_collect(buf, 1, n, &m) != n) {
			free(m.data);
			fclose(f);
			return NULL;
		}
	fclose(f);
	*len = m.len;
	return m.data != NULL ? m.data : calloc(1, 1);
}

void cli_url_escape(const char *in, char *out, size_t outlen)
{
	CURL *h = curl_easy_init();
	char *e = h != NULL ? curl_easy_escape(h, in, 0) : NULL;
	snprintf(out, outlen, "%s", e != NULL ? e : "");
	curl_free(e);
	curl_easy_cleanup(h);
}

int cli_send_json(cli *c, const char *method, const char *path,
		  json_object *body)
{
	membuf m = {0};
	const char *s = json_object_to_json_string_ext(body,
						       JSON_C_TO_STRING_PLAIN);
	int rc = cli_finish(cli_request(c, method, path, s, strlen(s), NULL, &m,
					NULL, NULL),
			    &m);
	json_object_put(body);
	return rc;
}

int cli_put_settings(cli *c, const char *path, int argc, char **argv)
{
	json_object *body = json_object_new_object();
	for (int i = 0; i < argc; i++) {
		const char *eq = strchr(argv[i], '=');
		if (eq == NULL || eq == argv[i]) {
			json_object_put(body);
			return 100;
		}
		char field[64];
		snprintf(field, sizeof field, "%.*s", (int)(eq - argv[i]),
			 argv[i]);
		json_object *v = NULL;
		if (strcmp(eq + 1, "default") != 0) {
			char *end = NULL;
			errno = 0;
			long long n = strtoll(eq + 1, &end, 10);
			/* A fraction (cpus=0.5) goes as written; the server
			 * says what it takes. */
			if (errno == 0 && end != eq + 1 && *end == '.') {
				double d = strtod(eq + 1, &end);
				if (*end == '\0')
					v = json_object_new_double_s(d, eq + 1);
			} else if (errno == 0 && end != eq + 1 &&
				   *end == '\0') {
				v = json_object_new_int64(n);
			}
			if (v == NULL) {
				json_object_put(body);
				return 100;
			}
		}
		json_object_object_add(body, field, v);
	}
	return cli_send_json(c, "PUT", path, body);
}
