/* airlock template build DIR [--name N] [--no-cache]
 * airlock template ls | show NAME | rm NAME
 * airlock template pool NAME BOUND=N|default...   (ns_min, ns_max, vm_min,
 *                                                  vm_max; admin keys)
 *
 * build packs DIR (its Airlockfile and everything COPY may take) into a
 * tar, uploads it, then follows the build log: one progress line per
 * step, the steps' output as it is produced, and the outcome. Exit 0 when
 * the template was built, 1 with the failing step's line otherwise. */
#include "cmd_template.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/evp.h>

#include "sse.h"
#include "template/context.h"

typedef struct follow {
	sse_parser p;
	int steps;
	int failed;
	int succeeded;
	int version;
	char error[512];
	int error_line;
} follow;

static void progress(int step, int steps, const char *text, int cached)
{
	enum { WIDTH = 20 };
	int fill = steps > 0 ? step * WIDTH / steps : 0;
	char bar[WIDTH + 1];
	for (int i = 0; i < WIDTH; i++)
		bar[i] = i < fill ? '#' : '-';
	bar[WIDTH] = '\0';
	printf("[%s] step %d/%d%s: %s\n", bar, step, steps,
	       cached ? " (cached)" : "", text);
	fflush(stdout);
}

static const char *jstr(json_object *o, const char *k)
{
	json_object *v = NULL;
	return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v)
						   : NULL;
}

static int jint(json_object *o, const char *k)
{
	json_object *v = NULL;
	return json_object_object_get_ex(o, k, &v) ? json_object_get_int(v) : 0;
}

static void output(json_object *o)
{
	const char *stream = jstr(o, "stream");
	FILE *f = stream != NULL && strcmp(stream, "stderr") == 0 ? stderr
								  : stdout;
	const char *data = jstr(o, "data");
	if (data != NULL) {
		fputs(data, f);
	} else if ((data = jstr(o, "data_b64")) != NULL) {
		size_t n = strlen(data);
		unsigned char *out = malloc(n / 4 * 3 + 3);
		int len = out != NULL
				  ? EVP_DecodeBlock(out,
						    (const unsigned char *)data,
						    (int)n)
				  : -1;
		while (len > 0 && n > 0 && data[n - 1] == '=') {
			n--;
			len--;
		}
		if (len > 0)
			fwrite(out, 1, (size_t)len, f);
		free(out);
	}
	fflush(f);
}

static void on_event(const char *event, const char *data, void *ud)
{
	follow *fw = ud;
	json_object *o = json_tokener_parse(data);
	if (o == NULL)
		return;
	if (strcmp(event, "step") == 0) {
		fw->steps = jint(o, "steps");
		const char *text = jstr(o, "text");
		json_object *c = NULL;
		int cached = json_object_object_get_ex(o, "cached", &c) &&
			     json_object_get_boolean(c);
		progress(jint(o, "step"), fw->steps, text != NULL ? text : "",
			 cached);
	} else if (strcmp(event, "output") == 0) {
		output(o);
	} else if (strcmp(event, "info") == 0) {
		const char *msg = jstr(o, "message");
		if (msg != NULL)
			printf("  %s\n", msg);
	} else if (strcmp(event, "status") == 0) {
		const char *st = jstr(o, "status");
		if (st != NULL && strcmp(st, "succeeded") == 0) {
			fw->succeeded = 1;
			fw->version = jint(o, "version");
		} else if (st != NULL && strcmp(st, "failed") == 0) {
			const char *e = jstr(o, "error");
			fw->failed = 1;
			fw->error_line = jint(o, "line");
			snprintf(fw->error, sizeof fw->error, "%s",
				 e != NULL ? e : "build failed");
		}
	}
	json_object_put(o);
}

static size_t follow_sink(char *p, size_t sz, size_t n, void *ud)
{
	follow *fw = ud;
	return cli_sse_feed(&fw->p, p, sz * n) < 0 ? 0 : sz * n;
}

/* POST the form; returns the HTTP status and the answer in m. */
static long upload(cli *c, const char *name, const char *airlockfile,
		   const char *tar_path, int no_cache, membuf *m)
{
	CURL *h = curl_easy_init();
	if (h == NULL)
		return -1;
	char url[1024], auth[300];
	snprintf(url, sizeof url, "%s/v1/templates", c->url);
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->key);
	struct curl_slist *hdr = curl_slist_append(NULL, auth);
	curl_mime *form = curl_mime_init(h);
	curl_mimepart *part = curl_mime_addpart(form);
	curl_mime_name(part, "name");
	curl_mime_data(part, name, CURL_ZERO_TERMINATED);
	part = curl_mime_addpart(form);
	curl_mime_name(part, "airlockfile");
	curl_mime_filedata(part, airlockfile);
	part = curl_mime_addpart(form);
	curl_mime_name(part, "context");
	curl_mime_filedata(part, tar_path);
	curl_mime_type(part, "application/x-tar");
	if (no_cache) {
		part = curl_mime_addpart(form);
		curl_mime_name(part, "no_cache");
		curl_mime_data(part, "true", CURL_ZERO_TERMINATED);
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_MIMEPOST, form);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cli_collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, m);
	long status = -1;
	CURLcode rc = curl_easy_perform(h);
	if (rc != CURLE_OK)
		fprintf(stderr, "airlock: %s: %s\n", url,
			curl_easy_strerror(rc));
	else
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_mime_free(form);
	curl_slist_free_all(hdr);
	curl_easy_cleanup(h);
	return status;
}

static int build(cli *c, const char *dir, const char *name, int no_cache)
{
	char airlockfile[4096], tar_path[] = "/tmp/airlock-context-XXXXXX";
	snprintf(airlockfile, sizeof airlockfile, "%s/Airlockfile", dir);
	if (access(airlockfile, R_OK) < 0) {
		fprintf(stderr, "airlock: %s: %s\n", airlockfile,
			strerror(errno));
		return 1;
	}
	int fd = mkstemp(tar_path);
	if (fd < 0) {
		fprintf(stderr, "airlock: temporary file: %s\n",
			strerror(errno));
		return 1;
	}
	al_err err = {0};
	int packed = al_context_pack(dir, fd, &err);
	close(fd);
	if (packed < 0) {
		unlink(tar_path);
		fprintf(stderr, "airlock: packing %s: %s\n", dir, err.msg);
		return 1;
	}
	membuf m = {0};
	long st = upload(c, name, airlockfile, tar_path, no_cache, &m);
	unlink(tar_path);
	if (st != 202)
		return cli_finish(st < 0 ? -1 : (st < 400 ? 500 : st), &m);
	json_object *o = m.data != NULL ? json_tokener_parse(m.data) : NULL;
	const char *id = o != NULL ? jstr(o, "build_id") : NULL;
	char path[256];
	if (id == NULL || strlen(id) > 64) {
		fprintf(stderr, "airlock: the server sent no build id\n");
		json_object_put(o);
		free(m.data);
		return 1;
	}
	printf("building template %s (build %s)\n", name, id);
	snprintf(path, sizeof path, "/v1/templates/builds/%s/logs", id);
	json_object_put(o);
	free(m.data);

	follow fw = {0};
	cli_sse_init(&fw.p, on_event, &fw);
	membuf unused = {0};
	st = cli_request(c, "GET", path, NULL, 0, "text/event-stream", &unused,
			 follow_sink, &fw);
	cli_sse_free(&fw.p);
	free(unused.data);
	if (fw.succeeded) {
		printf("built template %s version %d\n", name, fw.version);
		return 0;
	}
	if (fw.failed) {
		if (fw.error_line > 0)
			fprintf(stderr,
				"airlock: build failed at Airlockfile line "
				"%d: %s\n",
				fw.error_line, fw.error);
		else
			fprintf(stderr, "airlock: build failed: %s\n",
				fw.error);
		return 1;
	}
	fprintf(stderr, "airlock: the build log ended early (HTTP %ld)\n", st);
	return 1;
}

int cli_template(cli *c, int argc, char **argv)
{
	membuf m = {0};
	char path[512], esc[256];
	if (argc >= 2 && strcmp(argv[1], "build") == 0) {
		const char *dir = NULL, *name = NULL;
		int no_cache = 0;
		for (int i = 2; i < argc; i++) {
			if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
				name = argv[++i];
			else if (strcmp(argv[i], "--no-cache") == 0)
				no_cache = 1;
			else if (dir == NULL && argv[i][0] != '-')
				dir = argv[i];
			else
				return 100;
		}
		if (dir == NULL)
			return 100;
		char base[4096];
		snprintf(base, sizeof base, "%s", dir);
		if (name == NULL)
			name = basename(base);
		return build(c, dir, name, no_cache);
	}
	if (argc == 2 && strcmp(argv[1], "ls") == 0)
		return cli_finish(cli_request(c, "GET", "/v1/templates", NULL,
					      0, NULL, &m, NULL, NULL),
				  &m);
	if (argc >= 4 && strcmp(argv[1], "pool") == 0) {
		cli_url_escape(argv[2], esc, sizeof esc);
		snprintf(path, sizeof path, "/v1/templates/%s/warm_pool", esc);
		return cli_put_settings(c, path, argc - 3, argv + 3);
	}
	if (argc == 3 &&
	    (strcmp(argv[1], "show") == 0 || strcmp(argv[1], "rm") == 0)) {
		cli_url_escape(argv[2], esc, sizeof esc);
		snprintf(path, sizeof path, "/v1/templates/%s", esc);
		return cli_finish(
			cli_request(c, argv[1][0] == 's' ? "GET" : "DELETE",
				    path, NULL, 0, NULL, &m, NULL, NULL),
			&m);
	}
	return 100;
}
