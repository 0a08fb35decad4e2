#include "policy/policypub.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/file.h"
#include "base/json.h"

static int file_path(const char *run_dir, char *out, size_t len, al_err *err)
{
	if (snprintf(out, len, "%s/%s", run_dir, AL_POLICYPUB_FILE) >= (int)len)
		return al_err_set(err, AL_EINVAL, 0, "run dir path too long");
	return 0;
}

static json_object *time_json(time_t t)
{
	char buf[32];
	struct tm tm;
	if (t == 0 || gmtime_r(&t, &tm) == NULL)
		return NULL;
	strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_object_new_string(buf);
}

static json_object *pack_one(const al_policypub *v)
{
	json_object *o = json_object_new_object();
	if (v->p == NULL) {
		/* Never loaded: every gateway denies everything. */
		json_object_object_add(o, "path",
				       json_object_new_string(v->path));
		json_object_object_add(o, "loaded", json_object_new_boolean(0));
		json_object_object_add(o, "error",
				       json_object_new_string(v->error
								      ? v->error
								      : ""));
		return o;
	}
	al_policy_stat st;
	al_policy_status(v->p, &st);
	bool refused = st.reload_error[0] != '\0';
	json_object_object_add(o, "path", json_object_new_string(st.path));
	json_object_object_add(o, "loaded", json_object_new_boolean(1));
	json_object_object_add(o, "loaded_at", time_json(st.loaded_at));
	json_object_object_add(o, "reloads",
			       json_object_new_int64((int64_t)st.reloads));
	json_object_object_add(o, "reload_error",
			       refused ? json_object_new_string(st.reload_error)
				       : NULL);
	json_object_object_add(o, "reload_error_at",
			       refused ? time_json(st.reload_error_at) : NULL);
	return o;
}

int al_policypub_write(const char *run_dir, const al_policypub *v, int n,
		       al_err *err)
{
	char path[PATH_MAX];
	if (file_path(run_dir, path, sizeof path, err) < 0)
		return -1;
	json_object *all = json_object_new_object();
	for (int i = 0; i < n; i++)
		json_object_object_add(all, v[i].name, pack_one(&v[i]));
	size_t len = 0;
	const char *text = json_object_to_json_string_length(
		all, JSON_C_TO_STRING_PLAIN, &len);
	int rc = text != NULL ? al_file_replace(path, text, len, 0600, err)
			      : al_err_set(err, AL_ENOMEM, 0, "policy status");
	json_object_put(all);
	return rc;
}

json_object *al_policypub_read(const char *run_dir, al_err *err)
{
	char path[PATH_MAX];
	if (file_path(run_dir, path, sizeof path, err) < 0)
		return NULL;
	al_autofd int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		al_err_sys(err, errno == ENOENT ? AL_ENOENT : AL_ESYS, errno,
			   "open %s", path);
		return NULL;
	}
	al_autofree char *buf = malloc(AL_POLICYPUB_MAX);
	if (buf == NULL) {
		al_err_set(err, AL_ENOMEM, 0, "read %s", path);
		return NULL;
	}
	size_t len = 0;
	for (;;) {
		ssize_t r = read(fd, buf + len, AL_POLICYPUB_MAX - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			al_err_sys(err, AL_ESYS, errno, "read %s", path);
			return NULL;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len == AL_POLICYPUB_MAX) {
			al_err_set(err, AL_ETOOBIG, 0, "%s: too large", path);
			return NULL;
		}
	}
	json_object *o = al_json_parse_object(buf, len, err);
	if (o == NULL)
		al_err_wrap(err, "%s", path);
	return o;
}

void al_policypub_withdraw(const char *run_dir)
{
	char path[PATH_MAX];
	if (file_path(run_dir, path, sizeof path, NULL) == 0)
		unlink(path);
}
