/* airlock-builder internals: one build of one template, run detached by
 * the API (or in the foreground by scripts/build-template.sh).
 *
 *   main.c    arguments, the build row, the step loop, failure handling
 *   blog.c    log.jsonl, the build's event stream (format: template.h)
 *   fsroot.c  file operations inside a layer, resolved in its root
 *   base.c    FROM: scratch, another template, debootstrap
 *   run.c     RUN in a build sandbox (the ns jail + the agent)
 *   finish.c  the template version: agent, CA, publish, VM artefacts
 *   trust.c   the host CA in a layer's trust store
 *   net.c     RUN steps' network: a slot and an egress gateway
 *   logstream.c  the log's SSE streams nginx carries (its own process)
 *
 * Layers are btrfs subvolumes in pool/layers/<key>. A step that makes
 * one builds it in pool/layers/.tmp-<key>-<pid> and renames it into
 * place, so a layer under its key is always complete; a crashed build
 * leaves only .tmp-* entries, which the next build removes. */
#ifndef AL_BUILDER_H
#define AL_BUILDER_H

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/config.h"
#include "base/err.h"
#include "host/uidrange.h"
#include "model/db.h"
#include "model/template.h"
#include "net/pool.h"
#include "template/airlockfile.h"

#define BLD_MAX_TMP 8

/* The build's network (net.c): one slot and one gateway for all its RUN
 * steps, made at the first one and gone with the build. */
typedef struct bld_net {
	al_netpool pool;
	int pool_open;
	al_netlease lease; /* lock_fd -1: none held */
	al_uidrange uid;   /* the gateway's */
	char prog[AL_PATH_MAX];
	pid_t pid; /* the gateway; 0 when none runs */
	int pidfd;
	int ctl; /* its control fd */
	/* Its cgroup leaf ("<build id>-gw", the build gateway's limits):
	 * what the RUN steps make it spend is charged to the build, as a
	 * sandbox's gateway is charged to the sandbox. Empty when none. */
	char cgroup[80];
	unsigned starts;
	int down_noted; /* the build's log said it has no network */
} bld_net;

typedef struct bld {
	al_config cfg;
	al_db *db;
	char id[64];
	char name[64];
	char project[64];
	int no_cache;

	char dir[AL_PATH_MAX + 80];    /* state/builds/<id> */
	char ctxdir[AL_PATH_MAX + 96]; /* .../context */
	char layers[AL_PATH_MAX + 16]; /* pool/layers */
	char *airlockfile;	       /* the file's text */
	al_airlockfile *af;

	int logfd;
	int step;  /* 1-based index of the running step, 0 = none */
	int steps; /* af->nsteps */
	bld_net net;
	char carry[2][4]; /* incomplete UTF-8 sequence per stream */
	size_t ncarry[2];
	size_t output_logged; /* bytes of output events in log.jsonl */
	int output_cut;	      /* output past BLOG_OUTPUT_MAX is dropped */

	/* FROM <template>: its version, for its env/user/workdir. */
	int has_base;
	al_template_version base;

	/* The current filesystem: the layer the next step builds on. */
	char parent[AL_PATH_MAX + 160];
	char key[AL_AF_KEY_HEX];
	int rebuilt; /* some step was not taken from the cache */

	/* Subvolumes of ours to delete when the build fails. */
	char tmp[BLD_MAX_TMP][AL_PATH_MAX + 160];

	/* The agent binary, installed into build sandboxes and the result. */
	char *agent;
	size_t agent_len;
} bld;

/* ---- blog.c ---- */
int bld_blog_open(bld *b, al_err *err);
/* One event line; takes o. Errors are logged, not returned: a log that
 * cannot be written must not change the build's outcome. */
void bld_blog_event(bld *b, json_object *o);
void bld_blog_step(bld *b, const al_af_step *st, int cached);
/* stream 0 = stdout, 1 = stderr */
void bld_blog_output(bld *b, int stream, const void *data, size_t len);
void bld_blog_output_flush(bld *b);
void bld_blog_info(bld *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void bld_blog_status_ok(bld *b, int version);
void bld_blog_status_failed(bld *b, int step, int line, const char *error);

/* ---- fsroot.c ---- */
/* mkdir -p of abs inside the tree at root (every path resolved as if
 * root were "/"). */
int bld_fsroot_mkdir_p(const char *root, const char *abs, mode_t mode,
		       al_err *err);
/* Write data to abs inside root (parents created 0755), replacing a file
 * there by rename; owned by 0:0 with mode. */
int bld_fsroot_write_file(const char *root, const char *abs, const void *data,
			  size_t len, mode_t mode, al_err *err);
/* Make sure /proc /dev /sys /tmp are directories in root. */
int bld_fsroot_ensure_sysdirs(const char *root, al_err *err);
/* Remove the top-level entry name of root (file, link or tree); a
 * missing one is fine. */
int bld_fsroot_remove_top(const char *root, const char *name, al_err *err);
/* Read a whole file (at most max bytes). */
char *bld_fsroot_read_host_file(const char *path, size_t max, size_t *len,
				al_err *err);
/* The same for the file abs inside the layer at root (resolved in it). */
char *bld_fsroot_read_file(const char *root, const char *abs, size_t max,
			   size_t *len, al_err *err);
/* Lazily unmount everything mounted at or below path (what a failed
 * debootstrap leaves). */
void bld_fsroot_umount_below(const char *path);
/* sha256 hex of s. */
void bld_fsroot_sha256_hex(const char *s, char out[AL_AF_KEY_HEX]);

/* ---- layer.c ---- */
/* pool/layers/<key> into out. */
int bld_layer_path(const bld *b, const char *key, char *out, size_t outlen,
		   al_err *err);
/* Remember / forget a temporary subvolume to delete on failure. */
void bld_tmp_add(bld *b, const char *path);
void bld_tmp_forget(bld *b, const char *path);
/* Rename tmp to final (the cache entry). If final appeared meanwhile (a
 * concurrent build of the same step), tmp is dropped and final used;
 * with --no-cache an old final is replaced. */
int bld_layer_install(bld *b, const char *tmp, const char *final, al_err *err);
/* Delete every temporary subvolume still remembered (a failed build). */
void bld_tmp_cleanup(bld *b);
/* Delete the ".tmp-*-<pid>" entries of dir whose builder is gone. */
void bld_tmp_remove_stale(const char *dir);

/* ---- base.c ---- */
/* Set b->parent and b->key from FROM (step 1). */
int bld_base_prepare(bld *b, al_err *err);

/* ---- mirror.c ---- */
/* The Debian mirror for suite: AIRLOCK_DEBIAN_MIRROR, else the host's apt
 * sources (an http(s):// or file:/ URL). AL_ENOENT when there is none. */
int bld_mirror_of_host(const char *suite, char *out, size_t outlen,
		       al_err *err);

/* ---- net.c ---- */
/* Make RUN steps' network ready before a step: the slot leased and the
 * gateway running and configured (started again if it died). The
 * gateway is airlock-gateway as every sandbox has, under the same
 * policy, with GW_CONFIG "build":true, the build's id as its sandbox
 * (so its decisions are in the egress log under the build's id), and
 * as its allow list the host's package registries (bld_net_registries).
 * NULL (err) when there can be no network: the step then runs with
 * loopback only (fail closed), and the build's log says why. */
void bld_net_init(bld_net *n);
const al_netslot *bld_net_up(bld *b, al_err *err);
/* Denials of the build's gateway in the egress log so far (0 without a
 * gateway or a database answer). */
uint64_t bld_net_denied(bld *b);
/* After a RUN step that failed: the denials past before (bld_net_denied
 * of the step's start), once the egress log has them (waiting up to 3
 * s), as info lines of the build's log. */
void bld_net_explain(bld *b, uint64_t before);
/* Kill and reap the gateway, release the slot and uid. Idempotent. */
void bld_net_down(bld *b);
/* Before a build reports success: its gateway stopped (writing out what
 * it buffered) and its decisions ingested, so the build's egress log is
 * whole when its status says it is done (bounded wait). */
void bld_net_settle(bld *b);
/* The host's package registries a build may reach besides the policy's
 * build_registries, as name patterns (at most max, each < 256 bytes):
 * the hosts of the host's Debian mirrors (bld_mirror_of_host for its
 * release, -updates and -security) and of npm's registry
 * (AIRLOCK_NPM_REGISTRY, else "registry=" of /etc/npmrc or
 * /usr/etc/npmrc, else registry.npmjs.org). */
size_t bld_net_registries(char (*out)[256], size_t max);

/* ---- run.c ---- */
/* Run step st in a build sandbox on the layer at rootfs. Output goes to
 * the log. -1 with err ("RUN exited with 2") when it fails. */
int bld_run_step(bld *b, const al_af_step *st, size_t idx, const char *rootfs,
		 al_err *err);

/* ---- stepenv.c ---- */
/* What step idx runs with (base template + Airlockfile). */
json_object *bld_step_env(const bld *b, size_t nenv, al_err *err);
const char *bld_step_workdir(const bld *b, size_t idx);
/* "" for the default (root); else "user[:group]". */
void bld_step_user(const bld *b, size_t idx, char *out, size_t outlen);

/* ---- trust.c ---- */
/* Where the host CA's certificate goes in a template. */
#define BLD_CA_FILE "/usr/local/share/ca-certificates/airlock-ca.crt"
#define BLD_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
/* Make the layer at root trust the host CA (created on the first build
 * if the controller has not yet): BLD_CA_FILE, and appended to
 * BLD_CA_BUNDLE unless already in it. Idempotent. */
int bld_trust_ca(const bld *b, const char *root, al_err *err);

/* ---- logstream.c ---- */
/* Start the log streamer of b (a process of its own that outlives a
 * killed builder; it exits a little after the builder). */
int bld_logstream_start(const bld *b, al_err *err);
/* "airlock-builder --log-stream ID BUILDER_PID": the streamer itself.
 * The builder's pid comes from the builder: one the streamer read with
 * getppid() would be its reaper's when the builder died first. */
int bld_logstream_main(const char *id, pid_t builder);

/* ---- finish.c ---- */
int bld_finish_publish(bld *b, int *version, al_err *err);

#endif
