/* A sandbox's network: PUT /v1/sandboxes/{id}/network (the setting, sent
 * to its shim, which hands it to the gateway) and GET
 * /v1/sandboxes/{id}/egress (the gateway's decisions, newest first); GET
 * /v1/templates/builds/{id}/egress the same for a build's gateway (it
 * logs under the build's id: builder/net.c). A member key sees only its
 * project's sandboxes and builds: another project's is answered exactly
 * like an unknown id. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "http.h"
#include "model/build.h"
#include "model/egress_log.h"
#include "model/sandbox.h"
#include "net/netspec.h"
#include "sandbox/sandbox_ops.h"

/* The body: the network object itself, mode required. */
static int parse_body(al_req *r, al_netspec *ns, al_err *err)
{
	char *body = NULL;
	size_t len = 0;
	if (fcgi_req_body(r, AL_JSON_BODY_MAX, &body, &len, err) < 0)
		return -1;
	json_object *o = al_json_parse_object(body, len, err);
	free(body);
	if (o == NULL)
		return -1;
	int rc = al_netspec_from_json(o, "network", true, ns, err);
	json_object_put(o);
	return rc;
}

void fcgi_api_sandbox_network_put(al_req *r)
{
	al_err err = {0};
	al_netspec ns;
	if (parse_body(r, &ns, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	bool gateway = false;
	al_db *db = fcgi_req_db(r, &err);
	json_object *network = NULL;
	if (db == NULL ||
	    al_sandbox_ops_set_network(r->cfg, db, r->id, fcgi_req_scope(r),
				       &ns, &gateway, &err) < 0 ||
	    (network = al_netspec_to_json(&ns)) == NULL) {
		if (err.code == AL_OK)
			al_err_set(&err, AL_ENOMEM, 0, "out of memory");
		fcgi_http_error(r, &err);
	} else {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "network", network);
		json_object_object_add(o, "gateway",
				       json_object_new_boolean(gateway));
		fcgi_http_json(r, 200, o);
		json_object_put(o);
	}
	al_netspec_free(&ns);
}

/* The egress log of id (a sandbox's, or a build's: its gateway logs
 * under the build's id), once the caller has checked id is one of the
 * key's. */
static void egress_answer(al_req *r, al_db *db, int64_t limit,
			  const char *before)
{
	al_err err = {0};
	json_object *arr = NULL;
	char next[AL_EGRESS_CURSOR_MAX];
	if (al_egress_log_list(db, r->id, (int)limit, before, &arr, next,
			       &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	al_egress_counts cnt;
	if (al_egress_log_counts(db, r->id, &cnt, &err) < 0) {
		json_object_put(arr);
		fcgi_http_error(r, &err);
		return;
	}
	json_object *counts = json_object_new_object();
	json_object_object_add(counts, "allowed",
			       json_object_new_int64((int64_t)cnt.allowed));
	json_object_object_add(counts, "denied",
			       json_object_new_int64((int64_t)cnt.denied));
	json_object_object_add(counts, "dropped",
			       json_object_new_int64((int64_t)cnt.dropped));
	json_object *o = json_object_new_object();
	json_object_object_add(o, "egress", arr);
	json_object_object_add(o, "counts", counts);
	json_object_object_add(o, "next",
			       next[0] != '\0' ? json_object_new_string(next)
					       : NULL);
	fcgi_http_json(r, 200, o);
	json_object_put(o);
}

/* limit= and before= of an egress listing; -1 when answered (400). */
static int egress_query(al_req *r, int64_t *limit, const char **before)
{
	*limit = AL_EGRESS_LIST_DEFAULT;
	*before = NULL;
	for (int i = 0; i < r->query.n; i++) {
		const char *k = r->query.q[i].key, *v = r->query.q[i].val;
		if (strcmp(k, "limit") == 0) {
			if (fcgi_req_limit(r, v, AL_EGRESS_LIST_MAX, limit) < 0)
				return -1;
		} else if (strcmp(k, "before") == 0) {
			*before = v;
		} else {
			fcgi_http_errorf(r, AL_EINVAL,
					 "unknown query parameter (use limit=,"
					 " before=)");
			return -1;
		}
	}
	return 0;
}

/* Whether r's key sees the sandbox or build r->id: 0, or -1 (err:
 * another project's is AL_ENOENT like an unknown one). */
static int sandbox_seen(al_req *r, al_db *db, al_err *err)
{
	al_sandbox sb;
	if (al_sandbox_get_in(db, r->id, fcgi_req_scope(r), &sb, err) < 0)
		return -1;
	al_sandbox_free_fields(&sb);
	return 0;
}

static int build_seen(al_req *r, al_db *db, al_err *err)
{
	if (!al_id_valid(r->id))
		return al_err_set(err, AL_ENOENT, 0, "no such build");
	json_object *b = al_build_get(db, r->id, fcgi_req_scope(r), err);
	json_object_put(b);
	return b != NULL ? 0 : -1;
}

static void egress_of(al_req *r, int (*seen)(al_req *, al_db *, al_err *))
{
	al_err err = {0};
	int64_t limit;
	const char *before;
	if (egress_query(r, &limit, &before) < 0)
		return;
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL || seen(r, db, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	egress_answer(r, db, limit, before);
}

void fcgi_api_sandbox_egress(al_req *r)
{
	egress_of(r, sandbox_seen);
}

void fcgi_api_build_egress(al_req *r)
{
	egress_of(r, build_seen);
}
