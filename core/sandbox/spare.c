/* Spare snapshots (see spare.h). */
#include "sandbox/spare.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/log.h"
#include "pool/store.h"
#include "proto/agentproto.h"

static int spares_dir(const al_config *cfg, char *out, size_t outlen)
{
	int n = snprintf(out, outlen, "%s/spares", cfg->pool_dir);
	return n > 0 && (size_t)n < outlen ? 0 : -1;
}

/* name and version of a spare's entry; 0 when it is not one. */
static int parse_entry(const char *e, char *name, size_t namelen, int *version)
{
	const char *d1 = strchr(e, '.');
	const char *d2 = d1 != NULL ? strchr(d1 + 1, '.') : NULL;
	if (d1 == NULL || d2 == NULL || (size_t)(d1 - e) >= namelen ||
	    strlen(d2 + 1) != 16 || !al_hex_id_valid(d2 + 1, 16))
		return 0;
	char *end;
	long v = strtol(d1 + 1, &end, 10);
	if (end != d2 || v <= 0 || v > 1000000000)
		return 0;
	memcpy(name, e, (size_t)(d1 - e));
	name[d1 - e] = '\0';
	*version = (int)v;
	return al_id_valid(name);
}

/* A spare still shows its template version as it is now: the root
 * directory of a version changes after it is published (the builder,
 * or the controller on a new accelerator, links .airlock-vm into it),
 * and a snapshot keeps the root's mtime. */
static int fresh(const char *spare, const char *src)
{
	struct stat a, b;
	return stat(spare, &a) == 0 && stat(src, &b) == 0 &&
	       a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
	       a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

/* What a walk over pool/spares looks for and does. */
typedef struct walk {
	const char *name; /* NULL: every entry */
	int version;
	const char *src; /* the template version's rootfs, to compare */
	const char *dst; /* take: where to */
	int (*keep)(const char *name, int version, char *src, size_t srclen,
		    void *arg);
	void *arg;
	int n;
} walk;

/* Calls fn on each entry of pool/spares (of w->name and w->version,
 * when set) until it answers non-zero; what it answered, or 0. */
static int each(const al_config *cfg, walk *w,
		int (*fn)(walk *w, const char *path, const char *name,
			  int version))
{
	char dir[AL_PATH_MAX + 16], path[AL_PATH_MAX + 300], name[64];
	int version = 0, rc = 0;
	if (spares_dir(cfg, dir, sizeof dir) < 0)
		return 0;
	DIR *d = opendir(dir);
	if (d == NULL)
		return 0;
	struct dirent *e;
	while (rc == 0 && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		if (!parse_entry(e->d_name, name, sizeof name, &version))
			name[0] = '\0';
		if (w->name != NULL &&
		    (strcmp(name, w->name) != 0 || version != w->version))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (w->src != NULL && !fresh(path, w->src))
			continue;
		rc = fn(w, path, name, version);
	}
	closedir(d);
	return rc;
}

static int take_one(walk *w, const char *path, const char *name, int version)
{
	(void)name;
	(void)version;
	if (rename(path, w->dst) == 0)
		return 1;
	/* ENOENT: another start took it first. */
	return errno == ENOENT ? 0 : -1;
}

int al_spare_take(const al_config *cfg, const char *name, int version,
		  const char *src, const char *dst)
{
	if (version <= 0 || !al_id_valid(name))
		return 0;
	walk w = {.name = name, .version = version, .src = src, .dst = dst};
	return each(cfg, &w, take_one) == 1;
}

static int count_one(walk *w, const char *path, const char *name, int version)
{
	(void)path;
	(void)name;
	(void)version;
	w->n++;
	return 0;
}

int al_spare_count(const al_config *cfg, const char *name, int version,
		   const char *src)
{
	walk w = {.name = name, .version = version, .src = src};
	each(cfg, &w, count_one);
	return w.n;
}

int al_spare_make(const al_config *cfg, const char *name, int version,
		  const char *src, al_err *err)
{
	char dir[AL_PATH_MAX + 16], dst[AL_PATH_MAX + 128], rnd[17];
	if (!al_id_valid(name) || version <= 0)
		return al_err_set(err, AL_EINVAL, 0, "invalid template");
	if (spares_dir(cfg, dir, sizeof dir) < 0)
		return al_err_set(err, AL_EINVAL, 0, "path too long");
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", dir);
	if (al_hex_random(rnd, 16, err) < 0)
		return -1;
	snprintf(dst, sizeof dst, "%s/%s.%d.%s", dir, name, version, rnd);
	/* The snapshot appears whole or not at all: no temporary name. */
	return al_store_snapshot(src, dst, err);
}

static int prune_one(walk *w, const char *path, const char *name, int version)
{
	char src[AL_PATH_MAX];
	if (name[0] != '\0' &&
	    w->keep(name, version, src, sizeof src, w->arg) && fresh(path, src))
		return 0;
	al_err err = {0};
	if (al_store_subvol_delete(path, &err) < 0)
		al_warn("%s", err.msg);
	else
		w->n++;
	return 0;
}

int al_spare_prune(const al_config *cfg,
		   int (*keep)(const char *name, int version, char *src,
			       size_t srclen, void *arg),
		   void *arg)
{
	walk w = {.keep = keep, .arg = arg};
	each(cfg, &w, prune_one);
	return w.n;
}
