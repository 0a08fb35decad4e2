/* The end of a build: the last layer becomes a template version. It is
 * snapshotted (the cache keeps its layer), gets what every sandbox needs
 * from the host (the agent, the host CA certificate, the mount points),
 * loses what only the build or the base template had, and is published.
 * The VM artefacts follow where the vm driver can run; without them the
 * version still serves the ns driver, so a failure there is a warning. */
#include "builder.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "pool/store.h"
#include "proto/agentproto.h"
#include "template/versions.h"
#include "vm/probe.h"
#include "vm/snapshot.h"
#include "vm/tmplcache.h"

static json_object *argv_json(const al_af_step *st)
{
	json_object *a = json_object_new_array();
	if (a == NULL)
		return NULL;
	for (size_t i = 0; i < st->cmd.argc; i++)
		json_object_array_add(a,
				      json_object_new_string(st->cmd.argv[i]));
	return a;
}

static json_object *copy_json(json_object *o)
{
	json_object *c = NULL;
	if (o == NULL || json_object_deep_copy(o, &c, NULL) != 0)
		return NULL;
	return c;
}

/* What the version's sandboxes run with: the file's final state over the
 * base template's. */
static int version_meta(bld *b, al_template_version *tv, al_err *err)
{
	size_t last = b->af->nsteps - 1;
	memset(tv, 0, sizeof *tv);
	snprintf(tv->name, sizeof tv->name, "%s", b->name);
	tv->env = bld_step_env(b, b->af->nenv, err);
	if (tv->env == NULL)
		return -1;
	snprintf(tv->workdir, sizeof tv->workdir, "%s",
		 bld_step_workdir(b, last));
	bld_step_user(b, last, tv->user, sizeof tv->user);
	if (tv->user[0] == '\0')
		snprintf(tv->user, sizeof tv->user, "root");
	if (b->af->start != NULL)
		tv->start = argv_json(b->af->start);
	else if (b->has_base)
		tv->start = copy_json(b->base.start);
	if (b->af->ready != NULL)
		tv->ready = argv_json(b->af->ready);
	else if (b->has_base)
		tv->ready = copy_json(b->base.ready);
	return 0;
}

static int prepare_rootfs(bld *b, const char *root, al_err *err)
{
	/* From the build, or from the base template's own version. */
	static const char *const drop[] = {".airlock-build", ".airlock-vm",
					   ".airlock-disk.ext4"};
	for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
		if (bld_fsroot_remove_top(root, drop[i], err) < 0)
			return -1;
	if (bld_fsroot_ensure_sysdirs(root, err) < 0)
		return -1;
	if (bld_fsroot_write_file(root, "/sbin/airlock-agent", b->agent,
				  b->agent_len, 0755, err) < 0) {
		al_err_wrap(err, "installing the agent");
		return -1;
	}
	return bld_trust_ca(b, root, err);
}

static void build_vm(bld *b, const char *name, int version)
{
	char why[512];
	if (!al_vm_usable(b->cfg.state_dir, why, sizeof why)) {
		bld_blog_info(b,
			      "no VM snapshot for this version: %s (the ns "
			      "driver can use it)",
			      why);
		return;
	}
	al_vm_kernel k;
	char rootfs[AL_PATH_MAX + 160], vdir[AL_PATH_MAX + 96];
	char vmdir[AL_PATH_MAX + 112];
	al_err err = {0};
	if (al_vm_kernel_find(b->cfg.state_dir, &k, &err) < 0 ||
	    al_template_version_rootfs(&b->cfg, name, version, rootfs,
				       sizeof rootfs, &err) < 0 ||
	    al_template_version_dir(&b->cfg, name, version, vdir, sizeof vdir,
				    &err) < 0)
		goto warn;
	snprintf(vmdir, sizeof vmdir, "%s/vm", vdir);
	al_vm_accel accel = al_vm_accel_load(b->cfg.state_dir);
	bld_blog_info(b, "building the VM disk image and base snapshot (%s)",
		      al_vm_accel_name(accel));
	int64_t t0 = al_now_ms();
	char key[AL_VM_TMPLCACHE_KEY_LEN + 1];
	int cached = al_vm_template_build(rootfs, vmdir, &k, accel,
					  b->cfg.vm_template_cache, key, &err);
	if (cached < 0)
		goto warn;
	if (cached)
		bld_blog_info(b, "VM snapshot from the cache (%s)", key);
	bld_blog_info(b, "VM snapshot ready in %lld ms",
		      (long long)(al_now_ms() - t0));
	return;
warn:
	al_warn("build %s: VM artefacts of %s version %d: %s", b->id, name,
		version, err.msg);
	bld_blog_info(b,
		      "warning: no VM snapshot for this version (%s); the ns "
		      "driver can use it",
		      err.msg);
}

int bld_finish_publish(bld *b, int *version, al_err *err)
{
	char dir[AL_PATH_MAX + 32], tmp[AL_PATH_MAX + 160];
	snprintf(dir, sizeof dir, "%s/template-versions", b->cfg.pool_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", dir);
	snprintf(tmp, sizeof tmp, "%s/.tmp-%s-%d", dir, b->id, (int)getpid());
	if (al_store_snapshot(b->parent, tmp, err) < 0)
		return -1;
	bld_tmp_add(b, tmp);
	if (prepare_rootfs(b, tmp, err) < 0)
		return -1;

	al_template_version tv;
	if (version_meta(b, &tv, err) < 0)
		return -1;
	int rc = al_versions_publish(b->db, &b->cfg, &tv, b->id, b->airlockfile,
				     tmp, version, err);
	al_template_version_free(&tv);
	if (rc < 0)
		return -1;
	bld_tmp_forget(b, tmp);
	bld_blog_info(b, "published %s version %d", b->name, *version);
	build_vm(b, b->name, *version);
	return 0;
}
