/* Stream slots and their leases (see streams.h). */
#include "streams.h"

#include <string.h>

#include "base/log.h"
#include "model/project.h"
#include "sandbox/shimctl.h"
#include "sandbox/streamlease.h"
#include "template/buildlog.h"
#include "upstream.h"

/* The holder of a build-log stream's lease: its stream's name
 * (al_buildlog_stream_name); sandbox ids have no '-'. */
#define BUILD_PREFIX "build-"

/* Ask sandbox's shim about n leases (ending them with end unless
 * AL_OK) and drop the leases of those it no longer has. */
static void check_group(al_req *r, const char *sandbox,
			char (*lease)[AL_STREAM_LEASE_LEN + 1], size_t n,
			al_code end, const char *message)
{
	al_err err = {0};
	if (strncmp(sandbox, BUILD_PREFIX, sizeof BUILD_PREFIX - 1) == 0) {
		/* A build's log streams: its streamer ends them itself
		 * (a revoked key's too); only the ended ones go here. */
		for (size_t i = 0; i < n; i++)
			if (!al_buildlog_lease_live(
				    r->cfg, sandbox + sizeof BUILD_PREFIX - 1,
				    lease[i]))
				al_project_stream_release(*r->dbp, lease[i]);
		return;
	}
	if (al_streamlease_check(r->cfg, *r->dbp, sandbox, lease, n, end,
				 message, &err) < 0)
		al_warn("sandbox %s: asking for its streams: %s", sandbox,
			err.msg);
}

/* Check every lease of arr ([{"lease","sandbox_id"}] ordered by
 * sandbox), one STREAMS request per sandbox. */
static void check_leases(al_req *r, json_object *arr, al_code end,
			 const char *message)
{
	size_t total = json_object_array_length(arr);
	char(*lease)[AL_STREAM_LEASE_LEN + 1] = calloc(AL_STREAMS_MAX,
						       sizeof *lease);
	if (lease == NULL)
		return;
	char sandbox[64] = "";
	size_t n = 0;
	for (size_t i = 0; i <= total; i++) {
		const char *l = NULL, *sb = NULL;
		if (i < total) {
			json_object *row = json_object_array_get_idx(arr, i);
			json_object *v = NULL;
			if (json_object_object_get_ex(row, "lease", &v))
				l = json_object_get_string(v);
			if (json_object_object_get_ex(row, "sandbox_id", &v))
				sb = json_object_get_string(v);
			if (!al_hex_id_valid(l, AL_STREAM_LEASE_LEN) ||
			    !al_id_valid(sb))
				continue;
		}
		if (n > 0 && (sb == NULL || strcmp(sb, sandbox) != 0 ||
			      n == AL_STREAMS_MAX)) {
			check_group(r, sandbox, lease, n, end, message);
			n = 0;
		}
		if (sb == NULL)
			break;
		snprintf(sandbox, sizeof sandbox, "%s", sb);
		memcpy(lease[n++], l, AL_STREAM_LEASE_LEN + 1);
	}
	free(lease);
}

int fcgi_streams_acquire(al_req *r, const char *holder,
			 char lease[AL_STREAM_LEASE_LEN + 1], al_err *err)
{
	al_db *db = fcgi_req_db(r, err);
	if (db == NULL || al_hex_random(lease, AL_STREAM_LEASE_LEN, err) < 0 ||
	    al_project_begin_stream(db, r->cfg, r->who.project, err) < 0)
		return -1;
	int rc = al_project_stream_add(db, r->cfg, r->who.project, holder,
				       r->who.key_id, lease, err);
	if (rc < 0 && err->code == AL_EQUOTA) {
		/* Under the row lock every lease is a stream its shim knows
		 * of (or knew): the ended ones can go. */
		json_object *arr = al_project_stream_leases(db, r->who.project,
							    0, err);
		if (arr != NULL) {
			check_leases(r, arr, AL_OK, NULL);
			json_object_put(arr);
			rc = al_project_stream_add(db, r->cfg, r->who.project,
						   holder, r->who.key_id, lease,
						   err);
		} else {
			rc = -1;
		}
	}
	if (rc < 0)
		al_db_rollback(db);
	return rc;
}

int fcgi_streams_done(al_req *r, int ok, al_err *err)
{
	if (ok)
		return al_db_commit(*r->dbp, err);
	al_db_rollback(*r->dbp);
	return 0;
}

void fcgi_streams_end_key(al_req *r, long long key_id)
{
	al_err err = {0};
	al_db *db = fcgi_req_db(r, &err);
	json_object *arr = db != NULL ? al_project_stream_leases(db, NULL,
								 key_id, &err)
				      : NULL;
	if (arr == NULL) {
		al_warn("key %lld: ending its streams: %s", key_id, err.msg);
		return;
	}
	check_leases(r, arr, AL_EAUTH, "the API key was revoked");
	json_object_put(arr);
}
