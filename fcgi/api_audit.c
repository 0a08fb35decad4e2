/* GET /v1/audit (see api_credentials.h): the credential audit log,
 * newest first, paged with the previous page's "next". A member key
 * sees its project's rows, an admin key every project's (or
 * ?project='s). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_credentials.h"
#include "model/audit.h"

/* Unix seconds, or RFC 3339 in UTC ("2026-12-01T18:00:00[.123]Z"), to
 * unix µs; -1 for anything else. */
static int64_t parse_since(const char *s)
{
	char *end = NULL;
	if (s[0] >= '0' && s[0] <= '9') {
		long long v = strtoll(s, &end, 10);
		if (*end == '\0' && v >= 0 && v < 100000000000LL)
			return (int64_t)v * 1000000;
	}
	struct tm tm = {0};
	end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (end == NULL)
		return -1;
	int64_t frac = 0, scale = 100000;
	if (*end == '.') {
		for (end++; *end >= '0' && *end <= '9'; end++) {
			frac += (*end - '0') * scale;
			scale /= 10;
		}
	}
	if (strcmp(end, "Z") != 0)
		return -1;
	time_t t = timegm(&tm);
	return t < 0 ? -1 : (int64_t)t * 1000000 + frac;
}

void fcgi_api_audit(al_req *r)
{
	al_err err;
	al_audit_filter f = {.project = fcgi_req_list_project(r)};
	int64_t limit = AL_AUDIT_LIST_DEFAULT;
	const char *before = NULL;
	for (int i = 0; i < r->query.n; i++) {
		const char *k = r->query.q[i].key, *v = r->query.q[i].val;
		if (strcmp(k, "limit") == 0) {
			if (fcgi_req_limit(r, v, AL_AUDIT_LIST_MAX, &limit) < 0)
				return;
		} else if (strcmp(k, "before") == 0) {
			before = v;
		} else if (strcmp(k, "credential") == 0) {
			f.credential = v;
		} else if (strcmp(k, "sandbox") == 0) {
			f.sandbox = v;
		} else if (strcmp(k, "since") == 0) {
			if ((f.since_us = parse_since(v)) < 0) {
				fcgi_http_errorf(
					r, AL_EINVAL,
					"'since' must be unix seconds or"
					" RFC 3339 UTC"
					" (2026-12-01T18:00:00Z)");
				return;
			}
		} else if (strcmp(k, "project") != 0) {
			fcgi_http_errorf(r, AL_EINVAL,
					 "unknown query parameter (use"
					 " credential=, sandbox=, since=,"
					 " limit=, before=, project=)");
			return;
		}
	}
	json_object *arr = NULL;
	char next[AL_AUDIT_CURSOR_MAX];
	al_db *db = fcgi_req_db(r, &err);
	if (db == NULL ||
	    al_audit_list(db, &f, (int)limit, before, &arr, next, &err) < 0) {
		fcgi_http_error(r, &err);
		return;
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "audit", arr);
	json_object_object_add(o, "next",
			       next[0] != '\0' ? json_object_new_string(next)
					       : NULL);
	fcgi_http_json(r, 200, o);
	json_object_put(o);
}
