/* client: the CLI's HTTP plumbing over libcurl: API URL and key, one
 * request at a time, error printing. */
#ifndef AL_CLI_CLIENT_H
#define AL_CLI_CLIENT_H

#include <stddef.h>

#include <curl/curl.h>

typedef struct cli {
	char url[512];
	char key[256];
} cli;

typedef struct membuf {
	char *data;
	size_t len;
} membuf;

/* curl write callback appending to a membuf. */
size_t cli_collect(char *p, size_t sz, size_t n, void *ud);
/* AIRLOCK_API_KEY, else $AIRLOCK_STATE/api-key (default var/api-key). */
int cli_load_key(cli *c);
/* One request with an optional JSON body; the answer is collected into
 * out unless sink is given. Returns the HTTP status, -1 on a transport
 * error (printed). */
long cli_request(cli *c, const char *method, const char *path, const char *body,
		 size_t body_len, const char *accept, membuf *out,
		 curl_write_callback sink, void *sink_ctx);
/* Print the API's answer (errors to stderr); returns the exit code. */
int cli_finish(long status, membuf *m);
/* POST or PUT a JSON object (put afterwards) and print the answer;
 * returns the exit code. */
struct json_object;
int cli_send_json(cli *c, const char *method, const char *path,
		  struct json_object *body);
/* PUT {"FIELD":N|null,...} from FIELD=N or FIELD=default arguments (back
 * to the operator's default); 100 (usage) for a malformed one. */
int cli_put_settings(cli *c, const char *path, int argc, char **argv);
char *cli_read_file(const char *path, size_t *len);
void cli_url_escape(const char *in, char *out, size_t outlen);

#endif
