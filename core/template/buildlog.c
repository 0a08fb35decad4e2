/* Build-log streams (see buildlog.h). */
#include "template/buildlog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "model/auth.h"
#include "proto/sse.h"
#include "template/builddir.h"

static int finished(json_object *o)
{
	json_object *s = NULL;
	if (!json_object_object_get_ex(o, "status", &s) ||
	    !json_object_is_type(s, json_type_string))
		return 0;
	const char *v = json_object_get_string(s);
	return strcmp(v, "succeeded") == 0 || strcmp(v, "failed") == 0;
}

int al_buildlog_event(al_buf *out, const char *line, al_err *err)
{
	static const char *const events[] = {"step", "output", "info",
					     "status"};
	json_object *o = json_tokener_parse(line);
	json_object *ev = NULL;
	const char *name = NULL;
	if (o != NULL && json_object_is_type(o, json_type_object) &&
	    json_object_object_get_ex(o, "event", &ev) &&
	    json_object_is_type(ev, json_type_string)) {
		for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
			if (strcmp(json_object_get_string(ev), events[i]) == 0)
				name = events[i];
	}
	int rc = 0;
	if (name != NULL) {
		rc = al_sse_event(out, name, o, err);
		if (rc == 0 && strcmp(name, "status") == 0 && finished(o))
			rc = 1;
	}
	json_object_put(o);
	return rc;
}

int al_buildlog_stream_name(const char *id, char *out, al_err *err)
{
	if (!al_id_valid(id) || strlen(id) > 40)
		return al_err_set(err, AL_EINVAL, 0, "invalid build id");
	snprintf(out, AL_BUILDLOG_NAME_MAX, "build-%s", id);
	return 0;
}

int al_buildlog_socket(const al_config *cfg, const char *id, char *out,
		       size_t outlen, al_err *err)
{
	char name[AL_BUILDLOG_NAME_MAX];
	if (al_buildlog_stream_name(id, name, err) < 0)
		return -1;
	return al_config_stream_socket(cfg, name, out, outlen, err);
}

static int token_path(const char *dir, const char *token, char *out,
		      size_t outlen, al_err *err)
{
	char hash[65];
	if (al_auth_hash(token, hash, err) < 0)
		return -1;
	int n = snprintf(out, outlen, "%s/stream-tokens/%s", dir, hash);
	explicit_bzero(hash, sizeof hash);
	if (n < 0 || (size_t)n >= outlen)
		return al_err_set(err, AL_EINVAL, 0, "path too long");
	return 0;
}

/* <dir>/stream-leases/<lease>.<state>; -1 for a bad lease. */
static int lease_path(const char *dir, const char *lease, const char *state,
		      char *out, size_t outlen)
{
	if (!al_hex_id_valid(lease, AL_STREAM_LEASE_LEN))
		return -1;
	int n = state != NULL ? snprintf(out, outlen, "%s/stream-leases/%s.%s",
					 dir, lease, state)
			      : snprintf(out, outlen, "%s/stream-leases", dir);
	return n > 0 && (size_t)n < outlen ? 0 : -1;
}

static int lease_mark(const char *dir, const char *lease, al_err *err)
{
	char path[AL_PATH_MAX + 128];
	if (lease_path(dir, lease, NULL, path, sizeof path) < 0)
		return al_err_set(err, AL_EINVAL, 0, "invalid stream lease");
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", path);
	lease_path(dir, lease, "issued", path, sizeof path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "mark a stream lease");
	close(fd);
	return 0;
}

void al_buildlog_lease_end(const char *dir, const char *lease)
{
	char path[AL_PATH_MAX + 128];
	if (lease_path(dir, lease, "issued", path, sizeof path) == 0)
		unlink(path);
	if (lease_path(dir, lease, "open", path, sizeof path) == 0)
		unlink(path);
}

int al_buildlog_streamer_up(const al_config *cfg, const char *id)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (al_buildlog_socket(cfg, id, sa.sun_path, sizeof sa.sun_path, NULL) <
	    0)
		return 0;
	al_autofd int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	return fd >= 0 &&
	       connect(fd, (const struct sockaddr *)&sa, sizeof sa) == 0;
}

static int64_t age_ms(const struct stat *st)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return ((int64_t)now.tv_sec - st->st_mtim.tv_sec) * 1000 +
	       (now.tv_nsec - st->st_mtim.tv_nsec) / 1000000;
}

int al_buildlog_lease_live(const al_config *cfg, const char *id,
			   const char *lease)
{
	char dir[AL_PATH_MAX], path[AL_PATH_MAX + 128];
	struct stat st;
	if (al_builddir_path(cfg, id, dir, sizeof dir, NULL) < 0 ||
	    lease_path(dir, lease, "open", path, sizeof path) < 0 ||
	    !al_buildlog_streamer_up(cfg, id))
		return 0;
	if (stat(path, &st) == 0)
		return 1;
	lease_path(dir, lease, "issued", path, sizeof path);
	return stat(path, &st) == 0 && age_ms(&st) < AL_BUILDLOG_TOKEN_MS;
}

int al_buildlog_token_issue(const char *dir, long long key_id,
			    const char *lease,
			    char token[AL_STREAM_TOKEN_LEN + 1], al_err *err)
{
	if (key_id < 0)
		return al_err_set(err, AL_EINVAL, 0, "invalid key id");
	if (lease_mark(dir, lease, err) < 0)
		return -1;
	char path[AL_PATH_MAX + 128];
	snprintf(path, sizeof path, "%s/stream-tokens", dir);
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", path);
	if (al_hex_random(token, AL_STREAM_TOKEN_LEN, err) < 0 ||
	    token_path(dir, token, path, sizeof path, err) < 0) {
		al_buildlog_lease_end(dir, lease);
		return -1;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;
		explicit_bzero(token, AL_STREAM_TOKEN_LEN + 1);
		al_buildlog_lease_end(dir, lease);
		return al_err_sys(err, AL_ESYS, e, "create a stream token");
	}
	char who[24 + AL_STREAM_LEASE_LEN];
	int n = snprintf(who, sizeof who, "%lld %s\n", key_id, lease);
	int ok = write(fd, who, (size_t)n) == n;
	int e = errno;
	close(fd);
	if (!ok) {
		unlink(path);
		explicit_bzero(token, AL_STREAM_TOKEN_LEN + 1);
		al_buildlog_lease_end(dir, lease);
		return al_err_sys(err, AL_ESYS, e, "write a stream token");
	}
	return 0;
}

int al_buildlog_token_take(const char *dir, const char *token,
			   long long *key_id,
			   char lease[AL_STREAM_LEASE_LEN + 1])
{
	char path[AL_PATH_MAX + 128], open_path[AL_PATH_MAX + 128];
	struct stat st;
	if (token_path(dir, token, path, sizeof path, NULL) < 0)
		return 0;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0;
	char who[24 + AL_STREAM_LEASE_LEN + 8] = "";
	ssize_t n = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		n = read(fd, who, sizeof who - 1);
	close(fd);
	/* Unlinking is the taking: of two requests, one wins. */
	if (n <= 0 || unlink(path) < 0)
		return 0;
	who[n] = '\0';
	char *end;
	errno = 0;
	long long id = strtoll(who, &end, 10);
	if (errno != 0 || end == who || *end != ' ' || id < 0 ||
	    strlen(end + 1) != AL_STREAM_LEASE_LEN + 1 ||
	    end[1 + AL_STREAM_LEASE_LEN] != '\n')
		return 0;
	memcpy(lease, end + 1, AL_STREAM_LEASE_LEN);
	lease[AL_STREAM_LEASE_LEN] = '\0';
	int64_t age = age_ms(&st);
	if (age < -1000 || age >= AL_BUILDLOG_TOKEN_MS ||
	    lease_path(dir, lease, "issued", path, sizeof path) < 0 ||
	    lease_path(dir, lease, "open", open_path, sizeof open_path) < 0 ||
	    rename(path, open_path) < 0)
		return 0;
	*key_id = id;
	return 1;
}

static int revoked_path(const al_config *cfg, long long key_id, char *out,
			size_t outlen)
{
	int n = key_id < 0 ? -1
			   : snprintf(out, outlen, "%s/run/revoked-keys/%lld",
				      cfg->state_dir, key_id);
	return n > 0 && (size_t)n < outlen ? 0 : -1;
}

int al_buildlog_key_revoke(const al_config *cfg, long long key_id, al_err *err)
{
	char path[AL_PATH_MAX + 64];
	if (revoked_path(cfg, key_id, path, sizeof path) < 0)
		return al_err_set(err, AL_EINVAL, 0, "invalid key id");
	char *slash = strrchr(path, '/');
	*slash = '\0';
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", path);
	*slash = '/';
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "mark key revoked");
	close(fd);
	return 0;
}

int al_buildlog_key_revoked(const al_config *cfg, long long key_id)
{
	char path[AL_PATH_MAX + 64];
	return revoked_path(cfg, key_id, path, sizeof path) == 0 &&
	       access(path, F_OK) == 0;
}

static void clear_dir(const char *dir, const char *sub)
{
	char path[AL_PATH_MAX + 128];
	snprintf(path, sizeof path, "%s/%s", dir, sub);
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dfd < 0)
		return;
	DIR *d = fdopendir(dfd);
	if (d == NULL) {
		close(dfd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			unlinkat(dfd, e->d_name, 0);
	closedir(d);
	rmdir(path);
}

void al_buildlog_tokens_clear(const char *dir)
{
	clear_dir(dir, "stream-tokens");
	clear_dir(dir, "stream-leases");
}
