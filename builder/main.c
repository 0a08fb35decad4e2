/* airlock-builder --build ID
 *
 * Builds the template of build ID (a row in template_builds, status
 * queued, with state/builds/<ID>/Airlockfile and context.tar next to
 * it) and publishes it as the template's next version. Started detached
 * by the API (stderr to state/log/builder.log), or in the foreground by
 * scripts/build-template.sh. Progress and command output go to
 * state/builds/<ID>/log.jsonl (format: core/template/builddir.h), the outcome to
 * the row.
 *
 * Environment: AIRLOCK_STATE, AIRLOCK_DB, AIRLOCK_LIBEXEC (the agent),
 * AIRLOCK_DEBIAN_MIRROR (optional: overrides the host's apt mirror).
 *
 * Exit: 0 built, 1 the build failed (its row says why), 100 usage,
 * 111 no build could be attempted (database, state directory). */
#include "builder.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/rmtree.h"
#include "model/build.h"
#include "pool/store.h"
#include "proto/agentproto.h"
#include "template/builddir.h"
#include "template/context.h"

#define AGENT_MAX (64u << 20)

/* queued -> running, once: a second builder for the same id (or a rerun
 * of a finished build) gets nothing. */
static int claim_build(bld *b, al_err *err)
{
	al_build_claimed c;
	if (al_build_claim(b->db, b->id, (int)getpid(), &c, err) < 0)
		return -1;
	memcpy(b->name, c.name, sizeof b->name);
	memcpy(b->project, c.project, sizeof b->project);
	b->no_cache = c.no_cache;
	return 0;
}

static int load_inputs(bld *b, int *line, al_err *err)
{
	char path[AL_PATH_MAX + 128];
	size_t len;
	*line = 0;
	snprintf(path, sizeof path, "%s/Airlockfile", b->dir);
	b->airlockfile = bld_fsroot_read_host_file(path, AL_AF_MAX_BYTES, &len,
						   err);
	if (b->airlockfile == NULL)
		return -1;
	b->af = al_airlockfile_parse(b->airlockfile, len, line, err);
	if (b->af == NULL)
		return -1;
	/* Text with NUL bytes would cut the stored copy short. */
	if (strlen(b->airlockfile) != len)
		b->airlockfile[0] = '\0';
	b->steps = (int)b->af->nsteps;

	snprintf(path, sizeof path, "%s/airlock-agent", b->cfg.libexec_dir);
	b->agent = bld_fsroot_read_host_file(path, AGENT_MAX, &b->agent_len,
					     err);
	if (b->agent == NULL)
		return -1;

	/* A fresh context directory: a retried build starts clean. */
	if (al_rmtree(b->ctxdir, err) < 0)
		return -1;
	if (mkdir(b->ctxdir, 0700) < 0)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", b->ctxdir);
	snprintf(path, sizeof path, "%s/context.tar", b->dir);
	al_autofd int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		/* No context: COPY steps will find nothing to copy. */
		if (errno == ENOENT)
			return 0;
		return al_err_sys(err, AL_ESYS, errno, "open %s", path);
	}
	if (al_context_unpack(fd, b->ctxdir, NULL, err) < 0) {
		al_err_wrap(err, "build context");
		return -1;
	}
	return 0;
}

static int copy_step(bld *b, const al_af_step *st, size_t idx,
		     const char *rootfs, al_err *err)
{
	const char *wd = bld_step_workdir(b, idx);
	if (bld_fsroot_mkdir_p(rootfs, wd, 0755, err) < 0)
		return -1;
	for (size_t i = 0; i < st->copy.nsrc; i++) {
		if (al_context_copy(b->ctxdir, st->copy.src[i], rootfs,
				    st->copy.dest, st->copy.chmod, 0, 0,
				    err) < 0) {
			al_err_wrap(err, "COPY %s", st->copy.src[i]);
			return -1;
		}
	}
	return 0;
}

/* Steps 2..n: metadata steps advance the key; RUN and COPY make (or
 * reuse) a layer. */
static int run_steps(bld *b, al_err *err)
{
	for (size_t i = 1; i < b->af->nsteps; i++) {
		const al_af_step *st = &b->af->steps[i];
		char extra[AL_CONTEXT_HASH_HEX], key[AL_AF_KEY_HEX];
		b->step = (int)i + 1;
		al_err tmp_err = {0};
		if (al_build_update(b->db, b->id, AL_BUILD_RUNNING, b->step,
				    b->steps, 0, NULL, &tmp_err) < 0)
			al_warn("build %s: %s", b->id, tmp_err.msg);

		int fs = st->kind == AL_AF_RUN || st->kind == AL_AF_COPY;
		if (st->kind == AL_AF_COPY &&
		    al_context_hash_srcs(b->ctxdir, st->copy.src, st->copy.nsrc,
					 extra, err) < 0) {
			bld_blog_step(b, st, 0);
			al_err_wrap(err, "COPY");
			return -1;
		}
		if (al_airlockfile_step_key(b->key, st,
					    st->kind == AL_AF_COPY ? extra
								   : NULL,
					    key, err) < 0)
			return -1;
		memcpy(b->key, key, sizeof key);
		if (!fs) {
			bld_blog_step(b, st, !b->rebuilt);
			continue;
		}

		char final[AL_PATH_MAX + 160], tmp[AL_PATH_MAX + 160];
		if (bld_layer_path(b, key, final, sizeof final, err) < 0)
			return -1;
		if (!b->no_cache && al_store_is_subvol(final, NULL) == 1) {
			bld_blog_step(b, st, 1);
			snprintf(b->parent, sizeof b->parent, "%s", final);
			continue;
		}
		bld_blog_step(b, st, 0);
		b->rebuilt = 1;
		int64_t t0 = al_now_ms();
		snprintf(tmp, sizeof tmp, "%s/.tmp-%s-%d", b->layers, key,
			 (int)getpid());
		if (al_store_snapshot(b->parent, tmp, err) < 0)
			return -1;
		bld_tmp_add(b, tmp);
		/* A step runs the user's commands: it may add to its parent
		 * no more than a sandbox may add to its template. */
		if (al_store_limit(tmp, (uint64_t)b->cfg.max_disk_mb << 20,
				   err) < 0)
			return -1;
		int rc = st->kind == AL_AF_RUN
				 ? bld_run_step(b, st, i, tmp, err)
				 : copy_step(b, st, i, tmp, err);
		if (rc < 0)
			return -1;
		if (bld_layer_install(b, tmp, final, err) < 0)
			return -1;
		snprintf(b->parent, sizeof b->parent, "%s", final);
		al_info("build %s: step %d/%d done in %lld ms", b->id, b->step,
			b->steps, (long long)(al_now_ms() - t0));
	}
	return 0;
}

static void fail_build(bld *b, int line, const al_err *err)
{
	int step = b->step;
	if (line == 0 && b->af != NULL && step >= 1 &&
	    (size_t)step <= b->af->nsteps)
		line = b->af->steps[step - 1].line;
	char msg[700];
	if (line > 0 && strncmp(err->msg, "line ", 5) != 0)
		snprintf(msg, sizeof msg, "line %d: %s", line, err->msg);
	else
		snprintf(msg, sizeof msg, "%s", err->msg);
	bld_blog_output_flush(b);
	bld_blog_status_failed(b, step, line, msg);
	al_err tmp_err = {0};
	if (al_build_update(b->db, b->id, AL_BUILD_FAILED, step, b->steps, 0,
			    msg, &tmp_err) < 0)
		al_error("build %s: recording the failure: %s", b->id,
			 tmp_err.msg);
	al_error("build %s (%s) failed: %s", b->id, b->name, msg);
}

static int usage(void)
{
	fprintf(stderr, "usage: airlock-builder --build ID\n"
			"       airlock-builder --log-stream ID BUILDER_PID "
			"(fd 3: its socket)\n");
	return 100;
}

int main(int argc, char **argv)
{
	al_err err = {0};
	bld b;
	memset(&b, 0, sizeof b);
	b.logfd = -1;
	bld_net_init(&b.net);

	int streamer = argc == 4 && strcmp(argv[1], "--log-stream") == 0;
	if (!streamer && (argc != 3 || strcmp(argv[1], "--build") != 0))
		return usage();
	pid_t builder = 0;
	if (streamer) {
		char *end;
		errno = 0;
		long v = strtol(argv[3], &end, 10);
		if (errno != 0 || end == argv[3] || *end != '\0' || v <= 1 ||
		    v > INT_MAX)
			return usage();
		builder = (pid_t)v;
	}
	if (!al_id_valid(argv[2]))
		return usage();
	snprintf(b.id, sizeof b.id, "%s", argv[2]);
	al_log_init("airlock-builder", AL_LOG_INFO);
	al_log_limit(AL_LOG_SANDBOX_BURST, AL_LOG_SANDBOX_PER_SEC);
	signal(SIGPIPE, SIG_IGN);
	umask(022);
	if (streamer) {
		int rc = bld_logstream_main(b.id, builder);
		al_log_flush();
		return rc;
	}

	if (al_config_load(&b.cfg, &err) < 0) {
		al_error("%s", err.msg);
		return 111;
	}
	/* Without it the API serves the log once the build is done. */
	if (bld_logstream_start(&b, &err) < 0)
		al_warn("build %s: no live log stream: %s", b.id, err.msg);
	b.db = al_db_open(b.cfg.db_conninfo, &err);
	if (b.db == NULL) {
		al_error("%s", err.msg);
		return 111;
	}
	if (al_builddir_path(&b.cfg, b.id, b.dir, sizeof b.dir, &err) < 0 ||
	    claim_build(&b, &err) < 0) {
		al_error("%s", err.msg);
		al_db_close(b.db);
		return 111;
	}
	snprintf(b.ctxdir, sizeof b.ctxdir, "%s/context", b.dir);
	snprintf(b.layers, sizeof b.layers, "%s/layers", b.cfg.pool_dir);
	al_info("build %s of template %s%s", b.id, b.name,
		b.no_cache ? " (no cache)" : "");

	int line = 0, version = 0, rc = 1;
	int64_t t0 = al_now_ms();
	if (bld_blog_open(&b, &err) < 0) {
		fail_build(&b, 0, &err);
		goto out;
	}
	if (load_inputs(&b, &line, &err) < 0) {
		fail_build(&b, line, &err);
		goto out;
	}
	if (al_build_update(b.db, b.id, AL_BUILD_RUNNING, 1, b.steps, 0, NULL,
			    &err) < 0) {
		fail_build(&b, 0, &err);
		goto out;
	}
	if (al_store_check(b.cfg.pool_dir, &err) < 0 ||
	    (mkdir(b.layers, 0700) < 0 && errno != EEXIST &&
	     al_err_sys(&err, AL_ESYS, errno, "mkdir %s", b.layers) < 0)) {
		fail_build(&b, 0, &err);
		goto out;
	}
	char tv_dir[AL_PATH_MAX + 32];
	snprintf(tv_dir, sizeof tv_dir, "%s/template-versions", b.cfg.pool_dir);
	bld_tmp_remove_stale(b.layers);
	bld_tmp_remove_stale(tv_dir);

	if (bld_base_prepare(&b, &err) < 0 || run_steps(&b, &err) < 0) {
		fail_build(&b, 0, &err);
		goto out;
	}
	b.step = b.steps;
	if (bld_finish_publish(&b, &version, &err) < 0) {
		fail_build(&b, 0, &err);
		goto out;
	}
	bld_net_settle(&b);
	bld_blog_status_ok(&b, version);
	if (al_build_update(b.db, b.id, AL_BUILD_SUCCEEDED, b.steps, b.steps,
			    version, NULL, &err) < 0)
		al_error("build %s: recording success: %s", b.id, err.msg);
	al_info("build %s: %s version %d in %lld ms", b.id, b.name, version,
		(long long)(al_now_ms() - t0));
	rc = 0;
out:
	bld_net_down(&b);
	bld_tmp_cleanup(&b);
	if (b.ctxdir[0] != '\0')
		al_rmtree(b.ctxdir, NULL);
	if (b.logfd >= 0)
		close(b.logfd);
	if (b.af != NULL)
		al_airlockfile_free(b.af);
	al_template_version_free(&b.base);
	free(b.airlockfile);
	free(b.agent);
	al_db_close(b.db);
	al_log_flush();
	return rc;
}
