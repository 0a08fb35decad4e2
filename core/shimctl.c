#include "shimctl.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cleanup.h"
#include "log.h"
#include "spawn.h"

int al_shimctl_connect(const al_config *cfg, const char *id, al_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (al_config_shim_socket(cfg, id, sa.sun_path, sizeof sa.sun_path,
				  err) < 0)
		return -1;
	al_autofd int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		if (errno == ENOENT || errno == ECONNREFUSED)
			return al_err_set(err, AL_EUNAVAIL, errno,
					  "sandbox %s: its shim is not running",
					  id);
		return al_err_sys(err, AL_ESYS, errno, "connect %s",
				  sa.sun_path);
	}
	return al_steal_fd(&fd);
}

int al_shimctl_call(int fd, uint16_t type, uint32_t id, json_object *req,
		    int64_t deadline_ms, json_object **result, al_err *err)
{
	const char *body = req != NULL ? json_object_to_json_string_ext(
						 req, JSON_C_TO_STRING_PLAIN)
				       : "{}";
	if (al_frame_send(fd, type, id, body, strlen(body), err) < 0)
		return -1;
	al_frame_reader r;
	al_frame_reader_init(&r);
	int rc = -1;
	for (;;) {
		al_frame f;
		if (al_frame_recv(fd, &r, &f, deadline_ms, err) < 0)
			break;
		if (f.id != id ||
		    (f.type != AL_F_RESULT && f.type != AL_F_ERROR)) {
			al_frame_free(&f);
			continue;
		}
		if (f.type == AL_F_ERROR) {
			al_err perr;
			if (al_error_unpack(f.payload, f.len, err, &perr) < 0)
				al_err_set(err, AL_EPROTO, 0,
					   "shim sent a malformed answer");
			al_frame_free(&f);
			break;
		}
		json_object *obj = json_tokener_parse((const char *)f.payload);
		al_frame_free(&f);
		if (obj == NULL || !json_object_is_type(obj, json_type_object)) {
			json_object_put(obj);
			al_err_set(err, AL_EPROTO, 0,
				   "shim sent a malformed answer");
			break;
		}
		if (result != NULL)
			*result = obj;
		else
			json_object_put(obj);
		rc = 0;
		break;
	}
	al_frame_reader_free(&r);
	return rc;
}

int al_shimctl_destroy(const al_config *cfg, const char *id, al_err *err)
{
	al_autofd int fd = al_shimctl_connect(cfg, id, err);
	if (fd < 0)
		return -1;
	if (al_shimctl_call(fd, AL_F_DESTROY, AL_REQ_ID_CLIENT, NULL,
			    al_now_ms() + 30000, NULL, err) < 0) {
		al_err_wrap(err, "destroying sandbox %s", id);
		return -1;
	}
	return 0;
}

/* Read the shim's one-line start report: "OK" or "ERR <code> <message>". */
static int read_ready(int fd, int64_t deadline_ms, const char *id,
		      al_err *err)
{
	char line[600];
	size_t len = 0;
	while (len < sizeof line - 1) {
		int64_t left = deadline_ms - al_now_ms();
		if (left <= 0)
			return al_err_set(err, AL_ETIMEDOUT, 0,
					  "sandbox %s did not start in time",
					  id);
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int pr = poll(&p, 1, (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0)
			return al_err_sys(err, AL_ESYS, errno, "poll");
		if (pr == 0)
			continue;
		ssize_t n = read(fd, line + len, sizeof line - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return al_err_sys(err, AL_ESYS, errno, "read");
		if (n == 0)
			break;
		len += (size_t)n;
		if (memchr(line, '\n', len) != NULL)
			break;
	}
	line[len] = '\0';
	char *nl = strchr(line, '\n');
	if (nl != NULL)
		*nl = '\0';
	if (strcmp(line, "OK") == 0)
		return 0;
	if (strncmp(line, "ERR ", 4) == 0) {
		char *code = line + 4;
		char *msg = strchr(code, ' ');
		if (msg != NULL)
			*msg++ = '\0';
		return al_err_set(err, al_code_from_name(code), 0, "%s",
				  msg != NULL ? msg : "sandbox failed to start");
	}
	return al_err_set(err, AL_EINTERNAL, 0,
			  "the shim of sandbox %s exited while starting", id);
}

/* [a-z0-9]+: a driver name, as it goes into argv and socket names. */
static int driver_ok(const char *d)
{
	size_t n = d != NULL ? strlen(d) : 0;
	if (n == 0 || n > 15)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((d[i] >= 'a' && d[i] <= 'z') || (d[i] >= '0' && d[i] <= '9')))
			return 0;
	return 1;
}

/* Start airlock-shim with mode ("--id" or "--standby") and arg (plus
 * --driver for a standby), detached; *rd is where its start report comes
 * (read_ready). */
static int launch_shim(const al_config *cfg, const char *mode, const char *id,
		       const char *driver, int *rd, al_err *err)
{
	if (!al_id_valid(id))
		return al_err_set(err, AL_EINVAL, 0, "invalid id");
	if (driver != NULL && !driver_ok(driver))
		return al_err_set(err, AL_EINVAL, 0, "invalid driver name");
	char shim[AL_PATH_MAX + 16], logpath[AL_PATH_MAX + 32];
	if ((size_t)snprintf(shim, sizeof shim, "%s/airlock-shim",
			     cfg->libexec_dir) >= sizeof shim ||
	    (size_t)snprintf(logpath, sizeof logpath, "%s/log/shim.log",
			     cfg->state_dir) >= sizeof logpath)
		return al_err_set(err, AL_EINVAL, 0, "path too long");

	char *const argv[] = {shim,
			      (char *)mode,
			      (char *)id,
			      "--ready-fd",
			      "3",
			      driver != NULL ? "--driver" : NULL,
			      (char *)driver,
			      NULL};
	/* Detached (own session, not a child of this worker), so the shim
	 * survives restarts of whoever started it. */
	return al_spawn_detached(shim, argv, logpath, rd, err);
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) * 1e3 +
	       (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

static int spawn_shim(const al_config *cfg, const char *mode, const char *id,
		      const char *driver, int64_t deadline_ms, al_err *err)
{
	al_autofd int rd = -1;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (launch_shim(cfg, mode, id, driver, &rd, err) < 0)
		return -1;
	double launched = ms_since(&t0);
	if (read_ready(rd, deadline_ms, id, err) < 0) {
		al_err_wrap(err, "starting sandbox %s", id);
		return -1;
	}
	/* Beside the shim's own "running ... in N ms" line: what is left
	 * of the report's wait is its exec, libraries and config load. */
	al_info("sandbox %s: shim spawned in %.2f ms (fork, setsid, fork), "
		"its ready report %.2f ms after",
		id, launched, ms_since(&t0) - launched);
	return 0;
}

int al_shimctl_spawn(const al_config *cfg, const char *id,
		     int64_t deadline_ms, al_err *err)
{
	return spawn_shim(cfg, "--id", id, NULL, deadline_ms, err);
}

int al_shimctl_spawn_standbys(const al_config *cfg, const char *tmpl,
			      const char *driver, int n, int64_t deadline_ms,
			      al_err *err)
{
	enum { MAX = 16 };
	int rd[MAX], launched = 0, ready = 0;
	if (!driver_ok(driver))
		return al_err_set(err, AL_EINVAL, 0, "invalid driver name");
	if (n > MAX)
		n = MAX;
	/* All boot at once; then each report is read in turn. */
	while (launched < n &&
	       launch_shim(cfg, "--standby", tmpl, driver, &rd[launched],
			   err) == 0)
		launched++;
	int failed = launched < n;
	for (int i = 0; i < launched; i++) {
		al_err e = {0};
		if (read_ready(rd[i], deadline_ms, tmpl, &e) == 0) {
			ready++;
		} else if (!failed++) {
			*err = e;
			al_err_wrap(err, "starting a standby of %s", tmpl);
		}
		close(rd[i]);
	}
	if (ready == 0 && n > 0)
		return -1;
	return ready;
}

uint32_t al_shimctl_pool_size(const al_config *cfg, const char *driver)
{
	if (driver == NULL || !al_config_driver_enabled(cfg, driver))
		return 0;
	if (strcmp(driver, "ns") == 0)
		return cfg->warm_pool;
	if (strcmp(driver, "vm") == 0)
		return cfg->warm_pool_vm;
	return 0;
}

uint32_t al_shimctl_pool_max(const al_config *cfg, const char *driver)
{
	/* A pool switched off (or a driver without one) stays off. */
	if (al_shimctl_pool_size(cfg, driver) == 0)
		return 0;
	return strcmp(driver, "vm") == 0 ? cfg->warm_pool_vm_max
					 : cfg->warm_pool_max;
}

/* Standby sockets of (tmpl, driver): "<tmpl>.<driver>.<slot>.sock" in
 * run/pool. Template names hold no '.', so the prefix is unambiguous. */
static int is_standby_of(const char *name, const char *tmpl,
			 const char *driver)
{
	size_t tl = strlen(tmpl), dl = strlen(driver), nl = strlen(name);
	return nl > tl + dl + 7 && strncmp(name, tmpl, tl) == 0 &&
	       name[tl] == '.' && strncmp(name + tl + 1, driver, dl) == 0 &&
	       name[tl + 1 + dl] == '.' && strcmp(name + nl - 5, ".sock") == 0;
}

/* The template version in a standby socket's slot
 * ("<tmpl>.<driver>.standby-v<N>-<random>.sock"), 0 if it has none. */
static int standby_version(const char *name, const char *tmpl,
			   const char *driver)
{
	const char *slot = name + strlen(tmpl) + 1 + strlen(driver) + 1;
	if (strncmp(slot, "standby-v", 9) != 0)
		return 0;
	return atoi(slot + 9);
}

int al_shimctl_standby_count(const al_config *cfg, const char *tmpl,
			     const char *driver, int version)
{
	if (!driver_ok(driver) || !al_id_valid(tmpl))
		return 0;
	char dir[AL_PATH_MAX + 8];
	snprintf(dir, sizeof dir, "%s/pool", cfg->run_dir);
	DIR *d = opendir(dir);
	if (d == NULL)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (is_standby_of(de->d_name, tmpl, driver) &&
		    (version == 0 ||
		     standby_version(de->d_name, tmpl, driver) == version))
			n++;
	closedir(d);
	return n;
}

/* Destroy up to limit (-1: no bound) standbys of (tmpl, driver): those
 * not of version keep, or with keep -1 any. */
static int retire(const al_config *cfg, const char *tmpl, const char *driver,
		  int keep, int limit)
{
	if (!driver_ok(driver) || !al_id_valid(tmpl))
		return 0;
	char dir[AL_PATH_MAX + 8];
	snprintf(dir, sizeof dir, "%s/pool", cfg->run_dir);
	DIR *d = opendir(dir);
	if (d == NULL)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((limit < 0 || n < limit) && (de = readdir(d)) != NULL) {
		if (!is_standby_of(de->d_name, tmpl, driver) ||
		    (keep >= 0 &&
		     standby_version(de->d_name, tmpl, driver) == keep))
			continue;
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s",
				     dir, de->d_name) >= sizeof sa.sun_path)
			continue;
		al_autofd int fd =
			socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 ||
		    connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
			continue; /* gone already; reconcile reaps it */
		al_err err = {0};
		if (al_shimctl_call(fd, AL_F_DESTROY, AL_REQ_ID_CLIENT, NULL,
				    al_now_ms() + 30000, NULL, &err) == 0)
			n++;
		else
			al_warn("retiring standby %s: %s", de->d_name,
				err.msg);
	}
	closedir(d);
	return n;
}

int al_shimctl_retire_standbys(const al_config *cfg, const char *tmpl,
			       const char *driver, int version)
{
	/* A version no standby holds retires them all. */
	return retire(cfg, tmpl, driver, version < 0 ? INT_MAX : version,
		      -1);
}

int al_shimctl_retire_some(const al_config *cfg, const char *tmpl,
			   const char *driver, int n)
{
	return n > 0 ? retire(cfg, tmpl, driver, -1, n) : 0;
}

/* Claim one standby of tmpl for sandbox id: 0 when one now runs as the
 * sandbox, AL_DECLINED when none could be had. */
static int claim_standby(const al_config *cfg, const char *id,
			 const char *tmpl, const char *driver,
			 int64_t deadline_ms)
{
	char dir[AL_PATH_MAX + 8];
	snprintf(dir, sizeof dir, "%s/pool", cfg->run_dir);
	DIR *d = opendir(dir);
	if (d == NULL)
		return AL_DECLINED;
	int rc = AL_DECLINED;
	struct dirent *de;
	json_object *req = json_object_new_object();
	json_object_object_add(req, "id", json_object_new_string(id));
	while (rc != 0 && (de = readdir(d)) != NULL) {
		if (!is_standby_of(de->d_name, tmpl, driver))
			continue;
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s",
				     dir, de->d_name) >= sizeof sa.sun_path)
			continue;
		al_autofd int fd =
			socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 ||
		    connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
			continue; /* claimed a moment ago, or dead */
		al_err err = {0};
		if (al_shimctl_call(fd, AL_F_CLAIM, AL_REQ_ID_CLIENT, req,
				    deadline_ms, NULL, &err) == 0)
			rc = 0;
		else
			al_warn("sandbox %s: standby %s: %s", id, de->d_name,
				err.msg);
	}
	json_object_put(req);
	closedir(d);
	return rc;
}

int al_shimctl_start(const al_config *cfg, const char *id, const char *tmpl,
		     const char *driver, int64_t deadline_ms, al_err *err)
{
	if (al_shimctl_pool_size(cfg, driver) > 0 && al_id_valid(tmpl) &&
	    driver_ok(driver) &&
	    claim_standby(cfg, id, tmpl, driver, deadline_ms) == 0)
		return 0;
	return al_shimctl_spawn(cfg, id, deadline_ms, err);
}
