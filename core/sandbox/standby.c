/* Warm-pool standbys (see standby.h). */
#include "sandbox/standby.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "sandbox/reap.h"
#include "sandbox/shimctl.h"
#include "vm/shape.h"

#define SLOT_PREFIX "standby-v"
#define END_DEADLINE_MS 30000

/* One socket of run/pool or run/pool/retired, parsed. */
typedef struct entry {
	const al_config *cfg;
	char tmpl[64];
	char driver[16];
	char slot[64];
	int version; /* from the slot; 0 when it names none */
	int retired;
	char path[AL_PATH_MAX + 224];
} entry;

/* run/pool, or run/pool/retired. */
static int pool_dir(const al_config *cfg, int retired, char *out, size_t outlen)
{
	int n = snprintf(out, outlen, "%s/pool%s", cfg->run_dir,
			 retired ? "/retired" : "");
	return n > 0 && (size_t)n < outlen ? 0 : -1;
}

int al_standby_slot(int version, char *out, size_t outlen, al_err *err)
{
	char rnd[21];
	if (version < 0)
		return al_err_set(err, AL_EINVAL, 0, "invalid version");
	if (al_sandbox_new_id(rnd, err) < 0)
		return -1;
	int n = snprintf(out, outlen, SLOT_PREFIX "%d-%.12s", version, rnd);
	if (n < 0 || (size_t)n >= outlen)
		return al_err_set(err, AL_EINVAL, 0, "slot name too long");
	return 0;
}

/* The template version a slot names, 0 if it names none. */
static int slot_version(const char *slot)
{
	if (strncmp(slot, SLOT_PREFIX, strlen(SLOT_PREFIX)) != 0)
		return 0;
	char *end;
	long v = strtol(slot + strlen(SLOT_PREFIX), &end, 10);
	return *end == '-' && v > 0 && v <= 1000000000 ? (int)v : 0;
}

/* "<tmpl>.<driver>.<slot>.sock", each part checked as when it was made
 * (none holds a dot); the path is dir/name. */
static int socket_name(char *out, size_t outlen, const char *dir,
		       const char *tmpl, const char *driver, const char *slot,
		       al_err *err)
{
	if (!al_id_valid(tmpl) || !al_id_valid(slot) ||
	    !al_driver_name_valid(driver))
		return al_err_set(err, AL_EINVAL, 0, "invalid id");
	int n = snprintf(out, outlen, "%s/%s.%s.%s.sock", dir, tmpl, driver,
			 slot);
	if (n < 0 || (size_t)n >= outlen)
		return al_err_set(err, AL_EINVAL, 0, "path for %s too long",
				  slot);
	return 0;
}

int al_standby_socket(const al_config *cfg, const char *tmpl,
		      const char *driver, const char *slot, char *out,
		      size_t outlen, al_err *err)
{
	char dir[AL_PATH_MAX + 16];
	if (pool_dir(cfg, 0, dir, sizeof dir) < 0)
		return al_err_set(err, AL_EINVAL, 0, "run directory too long");
	return socket_name(out, outlen, dir, tmpl, driver, slot, err);
}

void al_standby_unlink(const al_config *cfg, const char *tmpl,
		       const char *driver, const char *slot)
{
	/* The pool's first: a retire renames pool to retired, so once both
	 * are unlinked in this order neither is left. */
	for (int retired = 0; retired <= 1; retired++) {
		char dir[AL_PATH_MAX + 16], path[AL_PATH_MAX + 224];
		if (pool_dir(cfg, retired, dir, sizeof dir) == 0 &&
		    socket_name(path, sizeof path, dir, tmpl, driver, slot,
				NULL) == 0)
			unlink(path);
	}
}

/* Copy [from, to) into out; 0 when it does not fit or is empty. */
static int part(char *out, size_t outlen, const char *from, const char *to)
{
	size_t n = (size_t)(to - from);
	if (n == 0 || n >= outlen)
		return 0;
	memcpy(out, from, n);
	out[n] = '\0';
	return 1;
}

/* A socket's name into e; 0 when it is not a standby's. */
static int parse(const char *name, entry *e)
{
	size_t n = strlen(name);
	if (n < 5 || strcmp(name + n - 5, ".sock") != 0)
		return 0;
	const char *end = name + n - 5;
	const char *d1 = strchr(name, '.');
	const char *d2 = d1 < end ? strchr(d1 + 1, '.') : NULL;
	if (d2 == NULL || d2 >= end ||
	    !part(e->tmpl, sizeof e->tmpl, name, d1) ||
	    !part(e->driver, sizeof e->driver, d1 + 1, d2) ||
	    !part(e->slot, sizeof e->slot, d2 + 1, end) ||
	    !al_id_valid(e->tmpl) || !al_driver_name_valid(e->driver) ||
	    !al_id_valid(e->slot))
		return 0;
	e->version = slot_version(e->slot);
	return 1;
}

/* The one scan: fn on each standby socket of run/pool (retired:
 * run/pool/retired) until it answers non-zero; that answer, or 0. */
static int scan(const al_config *cfg, int retired,
		int (*fn)(const entry *e, void *arg), void *arg)
{
	char dir[AL_PATH_MAX + 16];
	if (pool_dir(cfg, retired, dir, sizeof dir) < 0)
		return 0;
	DIR *d = opendir(dir);
	if (d == NULL)
		return 0;
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		entry e = {.cfg = cfg, .retired = retired};
		if (!parse(de->d_name, &e))
			continue;
		int n = snprintf(e.path, sizeof e.path, "%s/%s", dir,
				 de->d_name);
		if (n > 0 && (size_t)n < sizeof e.path)
			rc = fn(&e, arg);
	}
	closedir(d);
	return rc;
}

/* Connect to a standby's socket: the fd; -ENOENT when the path is gone
 * (claimed, or its shim ending: what it leaves is its own to release);
 * -ECONNREFUSED when it is there but nobody listens (its shim died: a
 * shim unlinks the path before it closes the listener); another -errno
 * when it cannot be told. */
static int dial(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof sa.sun_path)
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
		return fd;
	int e = errno;
	close(fd);
	return -e;
}

/* Is its shim there? 1 yes, 0 dead, -1 gone (see dial). Not able to
 * tell counts as alive: nothing is released on a guess. */
static int alive(const entry *e)
{
	int fd = dial(e->path);
	if (fd >= 0) {
		close(fd);
		return 1;
	}
	if (fd == -ENOENT)
		return -1;
	return fd == -ECONNREFUSED ? 0 : 1;
}

/* ---- count ---- */

typedef struct match {
	const char *tmpl;
	const char *driver; /* NULL: any */
	int version;	    /* 0: any */
	int n;
} match;

static int matches(const match *m, const entry *e)
{
	return strcmp(e->tmpl, m->tmpl) == 0 &&
	       (m->driver == NULL || strcmp(e->driver, m->driver) == 0) &&
	       (m->version == 0 || e->version == m->version);
}

static int count_one(const entry *e, void *arg)
{
	match *m = arg;
	if (matches(m, e))
		m->n++;
	return 0;
}

int al_standby_count(const al_config *cfg, const char *tmpl, const char *driver,
		     int version)
{
	match m = {.tmpl = tmpl, .driver = driver, .version = version};
	if (tmpl == NULL || driver == NULL)
		return 0;
	scan(cfg, 0, count_one, &m);
	return m.n;
}

/* ---- claim ---- */

typedef struct claim {
	const al_sandbox *sb;
	const char *spec;
	int64_t deadline_ms;
	al_shim_ready *ready;
} claim;

/* 1 when the standby e now runs as the sandbox. */
static int claim_one(const entry *e, void *arg)
{
	claim *c = arg;
	if (strcmp(e->tmpl, c->sb->template_name) != 0 ||
	    strcmp(e->driver, c->sb->driver) != 0)
		return 0;
	al_autofd int fd = dial(e->path);
	if (fd < 0)
		return 0; /* claimed a moment ago, or dead */
	al_err err = {0};
	json_object *res = NULL;
	int rc = 0;
	if (al_shimctl_call_raw(fd, AL_F_CLAIM, AL_REQ_ID_CLIENT, c->spec,
				c->deadline_ms, &res, &err) == 0) {
		const char *t = json_object_to_json_string_ext(
			res, JSON_C_TO_STRING_PLAIN);
		rc = al_shim_ready_unpack(t, strlen(t), c->ready, &err) == 0;
		json_object_put(res);
	}
	if (!rc)
		al_warn("sandbox %s: standby %s: %s", c->sb->id, e->slot,
			err.msg);
	return rc;
}

int al_standby_claim(const al_config *cfg, const al_sandbox *sb,
		     int64_t deadline_ms, al_shim_ready *ready)
{
	if (!al_id_valid(sb->template_name) ||
	    !al_driver_name_valid(sb->driver))
		return AL_DECLINED;
	al_err err = {0};
	/* The standby has the template's boot already. */
	char *spec = al_shim_spec_pack(sb, NULL, &err);
	if (spec == NULL)
		return AL_DECLINED;
	claim c = {.sb = sb,
		   .spec = spec,
		   .deadline_ms = deadline_ms,
		   .ready = ready};
	int got = scan(cfg, 0, claim_one, &c);
	free(spec);
	return got == 1 ? 0 : AL_DECLINED;
}

int al_standby_claim_or_spawn(const al_config *cfg, al_db *db,
			      const al_sandbox *sb, int64_t deadline_ms,
			      al_shim_ready *ready, al_err *err)
{
	/* A start from a snapshot is the snapshot's machine, no
	 * standby's. Standbys are kept only where the template's pool is on (the
	 * controller, al_poolbounds_in_effect); the look costs a readdir.
	 * A vm standby runs on the default limits' vCPUs for good: a
	 * sandbox of another count would only be declined by each one. */
	int may_claim = al_config_driver_enabled(cfg, sb->driver) &&
			sb->resume_snapshot[0] == '\0';
	if (strcmp(sb->driver, "vm") == 0 &&
	    al_vm_shape_vcpus(sb->limits.cpu_millis) !=
		    al_vm_shape_vcpus(cfg->default_cpu_millis))
		may_claim = 0;
	if (may_claim && al_standby_claim(cfg, sb, deadline_ms, ready) == 0)
		return 0;
	return al_shimctl_spawn(cfg, db, sb, deadline_ms, ready, err);
}

/* ---- retire ---- */

typedef struct retire {
	match m;   /* when keep is NULL: which */
	int limit; /* -1: no bound */
	int (*keep)(const char *tmpl, const char *driver, int version,
		    void *arg);
	void *arg;
	char dir[AL_PATH_MAX + 16]; /* run/pool/retired */
	int n;
} retire;

static int retire_one(const entry *e, void *arg)
{
	retire *r = arg;
	if (r->keep != NULL ? r->keep(e->tmpl, e->driver, e->version, r->arg)
			    : !matches(&r->m, e))
		return 0;
	char to[AL_PATH_MAX + 224];
	if (socket_name(to, sizeof to, r->dir, e->tmpl, e->driver, e->slot,
			NULL) < 0)
		return 0;
	/* The listener stays as it was, under a name no claim looks for.
	 * ENOENT: claimed (or ended) since the scan read it. */
	if (rename(e->path, to) == 0)
		r->n++;
	else if (errno != ENOENT)
		al_warn("retiring standby %s: rename %s: %s", e->slot, e->path,
			strerror(errno));
	return r->limit >= 0 && r->n >= r->limit;
}

static int retire_run(const al_config *cfg, retire *r)
{
	if (r->limit == 0 || pool_dir(cfg, 1, r->dir, sizeof r->dir) < 0)
		return 0;
	if (mkdir(r->dir, 0700) < 0 && errno != EEXIST) {
		al_warn("retiring standbys: mkdir %s: %s", r->dir,
			strerror(errno));
		return 0;
	}
	scan(cfg, 0, retire_one, r);
	if (r->n > 0)
		al_info("retired %d standb%s", r->n, r->n == 1 ? "y" : "ies");
	return r->n;
}

int al_standby_retire_all(const al_config *cfg, const char *tmpl,
			  const char *driver)
{
	if (tmpl == NULL)
		return 0;
	retire r = {.m = {.tmpl = tmpl, .driver = driver}, .limit = -1};
	return retire_run(cfg, &r);
}

int al_standby_retire_some(const al_config *cfg, const char *tmpl,
			   const char *driver, int n)
{
	if (tmpl == NULL || driver == NULL || n <= 0)
		return 0;
	retire r = {.m = {.tmpl = tmpl, .driver = driver}, .limit = n};
	return retire_run(cfg, &r);
}

int al_standby_retire_unless(const al_config *cfg,
			     int (*keep)(const char *tmpl, const char *driver,
					 int version, void *arg),
			     void *arg)
{
	retire r = {.limit = -1, .keep = keep, .arg = arg};
	return retire_run(cfg, &r);
}

/* ---- end, reap ---- */

/* Release what the dead standby e left: its socket, rootfs, cgroups. */
static void release(const entry *e)
{
	unlink(e->path);
	al_err err = {0};
	if (al_reap_sandbox(e->cfg, e->slot, &err) < 0)
		al_warn("standby %s: %s", e->slot, err.msg);
}

static int end_one(const entry *e, void *arg)
{
	int *n = arg;
	al_autofd int fd = dial(e->path);
	if (fd == -ECONNREFUSED) {
		release(e);
		return 0;
	}
	if (fd < 0)
		return 0; /* gone (it ended), or not to be told now */
	al_err err = {0};
	if (al_shimctl_call(fd, AL_F_DESTROY, AL_REQ_ID_CLIENT, NULL,
			    al_now_ms() + END_DEADLINE_MS, NULL, &err) == 0) {
		/* Its shim unlinked it (al_standby_unlink); in case not. */
		unlink(e->path);
		(*n)++;
	} else {
		al_warn("ending standby %s: %s", e->slot, err.msg);
	}
	return 0;
}

int al_standby_end_retired(const al_config *cfg)
{
	int n = 0;
	scan(cfg, 1, end_one, &n);
	return n;
}

static int reap_one(const entry *e, void *arg)
{
	int *n = arg;
	int st = alive(e);
	if (st > 0)
		(*n)++;
	else if (st == 0)
		release(e);
	return 0;
}

int al_standby_reap(const al_config *cfg)
{
	int n = 0;
	scan(cfg, 0, reap_one, &n);
	scan(cfg, 1, reap_one, &n);
	return n;
}

static int alive_one(const entry *e, void *arg)
{
	return strcmp(e->slot, (const char *)arg) == 0 && alive(e) > 0;
}

int al_standby_alive(const al_config *cfg, const char *slot)
{
	if (slot == NULL)
		return 0;
	return scan(cfg, 0, alive_one, (void *)slot) ||
	       scan(cfg, 1, alive_one, (void *)slot);
}
