/* RUN: the command runs inside a build sandbox, never on the host. The
 * sandbox is the ns jail every sandbox gets (namespaces, cgroups,
 * reduced capabilities, seccomp, the build's network slot: egress only
 * through the build's gateway, net.c), rooted at the step's temporary
 * layer, with the agent copied in at a hidden path for the duration of
 * the step. The builder speaks the agent
 * protocol to it like a shim does: HELLO, EXEC, output frames, EXIT. */
#include "builder.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "driver.h"
#include "proto/agentproto.h"

#define BUILD_AGENT_DIR ".airlock-build"
#define BUILD_AGENT "/" BUILD_AGENT_DIR "/agent"
#define RUN_TIMEOUT_MS 3600000ll
/* Beyond the agent's own timeout: the agent reports it; this is for an
 * agent that stopped talking. */
#define RUN_GRACE_MS 60000ll
#define HELLO_TIMEOUT_MS 10000ll
#define BUILD_MEMORY (2048ull << 20)
#define BUILD_PIDS 4096u

static int place_agent(bld *b, const char *rootfs, al_err *err)
{
	al_autofd int rootfd = open(rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", rootfs);
	if (mkdirat(rootfd, BUILD_AGENT_DIR, 0700) < 0) {
		if (errno == EEXIST)
			return al_err_set(err, AL_EPATH, 0,
					  "/%s exists in the layer: the path "
					  "is reserved for the builder",
					  BUILD_AGENT_DIR);
		return al_err_sys(err, AL_ESYS, errno, "mkdir /%s",
				  BUILD_AGENT_DIR);
	}
	al_autofd int dfd = openat(rootfd, BUILD_AGENT_DIR,
				   O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					   O_CLOEXEC);
	if (dfd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open /%s",
				  BUILD_AGENT_DIR);
	al_autofd int fd = openat(dfd, "agent",
				  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
					  O_CLOEXEC,
				  0700);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "create %s",
				  BUILD_AGENT);
	size_t off = 0;
	while (off < b->agent_len) {
		ssize_t w = write(fd, b->agent + off, b->agent_len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return al_err_sys(err, AL_ESYS, errno, "write %s",
					  BUILD_AGENT);
		off += (size_t)w;
	}
	if (fchmod(fd, 0755) < 0)
		return al_err_sys(err, AL_ESYS, errno, "chmod %s", BUILD_AGENT);
	return 0;
}

/* The jail points the layer's /etc/resolv.conf at the build's gateway;
 * the layer keeps what it had unless the step wrote one of its own (one
 * that had none keeps the gateway's line: every sandbox start, both
 * drivers, writes its own). */
typedef struct resolv_saved {
	char *text; /* NULL: there was none */
	size_t len;
} resolv_saved;

static void resolv_save(const char *rootfs, resolv_saved *r)
{
	al_err tmp_err = {0};
	r->text = bld_fsroot_read_file(rootfs, "/etc/resolv.conf", 1u << 16,
				       &r->len, &tmp_err);
}

static void resolv_restore(const char *rootfs, const al_netslot *net,
			   resolv_saved *r)
{
	char gw[AL_NET_ADDR_STRLEN], ours[64];
	al_net_addr_format(net->addr.gateway, gw);
	int n = snprintf(ours, sizeof ours, "nameserver %s\n", gw);
	size_t len = 0;
	al_err tmp_err = {0};
	char *now = bld_fsroot_read_file(rootfs, "/etc/resolv.conf", 1u << 16,
					 &len, &tmp_err);
	if (r->text != NULL && now != NULL && len == (size_t)n &&
	    memcmp(now, ours, len) == 0 &&
	    bld_fsroot_write_file(rootfs, "/etc/resolv.conf", r->text, r->len,
				  0644, &tmp_err) < 0)
		al_warn("restoring /etc/resolv.conf: %s", tmp_err.msg);
	free(now);
	free(r->text);
	r->text = NULL;
}

static int remove_agent(const char *rootfs, al_err *err)
{
	return bld_fsroot_remove_top(rootfs, BUILD_AGENT_DIR, err);
}

/* The EXEC of RUN step st, packed. */
static char *exec_payload(const bld *b, const al_af_step *st, size_t idx,
			  al_err *err)
{
	json_object *cmd = json_object_new_array();
	if (cmd == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < st->cmd.argc; i++)
		json_object_array_add(cmd,
				      json_object_new_string(st->cmd.argv[i]));
	json_object *env = bld_step_env(b, st->nenv, err);
	if (env == NULL) {
		json_object_put(cmd);
		return NULL;
	}
	char user[200];
	bld_step_user(b, idx, user, sizeof user);
	al_exec_msg m = {
		.cmd = cmd,
		.env = env,
		.cwd = bld_step_workdir(b, idx),
		.user = user[0] != '\0' ? user : NULL,
		.timeout_ms = RUN_TIMEOUT_MS,
	};
	char *s = al_exec_pack(&m, err);
	json_object_put(cmd);
	json_object_put(env);
	return s;
}

/* Talk to the agent: HELLO, EXEC, then frames until EXIT. */
static int converse(bld *b, int fd, const char *payload, al_err *err)
{
	al_frame_reader rd;
	al_frame f;
	int rc = -1;
	al_frame_reader_init(&rd);

	if (al_frame_recv(fd, &rd, &f, al_now_ms() + HELLO_TIMEOUT_MS, err) <
	    0) {
		al_err_wrap(err, "build sandbox agent");
		goto out;
	}
	int hello = f.type == AL_F_HELLO;
	al_frame_free(&f);
	if (!hello) {
		al_err_set(err, AL_EPROTO, 0,
			   "build sandbox agent did not say hello");
		goto out;
	}
	if (al_frame_send(fd, AL_F_EXEC, AL_REQ_ID_CLIENT, payload,
			  strlen(payload), err) < 0)
		goto out;
	int64_t deadline = al_now_ms() + RUN_TIMEOUT_MS + RUN_GRACE_MS;
	for (;;) {
		if (al_frame_recv(fd, &rd, &f, deadline, err) < 0) {
			al_err_wrap(err, "build sandbox agent");
			goto out;
		}
		if (f.id != 1) {
			al_frame_free(&f);
			continue;
		}
		switch (f.type) {
		case AL_F_STARTED:
			break;
		case AL_F_STDOUT:
		case AL_F_STDERR:
			bld_blog_output(b, f.type == AL_F_STDERR, f.payload,
					f.len);
			break;
		case AL_F_ERROR: {
			al_err why, perr;
			bld_blog_output_flush(b);
			if (al_error_unpack(f.payload, f.len, &why, &perr) < 0)
				al_err_set(err, AL_EPROTO, 0,
					   "agent sent a malformed ERROR");
			else
				al_err_set(err, AL_EINVAL, 0, "RUN: %.400s",
					   why.msg);
			al_frame_free(&f);
			goto out;
		}
		case AL_F_EXIT: {
			al_exit_msg m;
			bld_blog_output_flush(b);
			if (al_exit_unpack(f.payload, f.len, &m, err) < 0)
				err->code = AL_EPROTO;
			else if (m.exit_code == 0)
				rc = 0;
			else if (m.exit_code > 0)
				al_err_set(err, AL_EINVAL, 0,
					   "RUN exited with %d", m.exit_code);
			else if (m.timed_out)
				al_err_set(err, AL_ETIMEDOUT, 0,
					   "RUN ran longer than %lld s",
					   RUN_TIMEOUT_MS / 1000);
			else
				al_err_set(err, AL_EINVAL, 0,
					   "RUN killed by %s", m.signal);
			al_frame_free(&f);
			goto out;
		}
		default:
			break;
		}
		al_frame_free(&f);
	}
out:
	al_frame_reader_free(&rd);
	return rc;
}

int bld_run_step(bld *b, const al_af_step *st, size_t idx, const char *rootfs,
		 al_err *err)
{
	/* Without its network (no slot, no gateway) a step still runs, with
	 * loopback only: nothing gets out, and the log says why. */
	al_err net_err = {0};
	const al_netslot *net = bld_net_up(b, &net_err);
	if (net == NULL && !b->net.down_noted) {
		bld_blog_info(b,
			      "RUN steps have no network (loopback only): %s",
			      net_err.msg);
		al_warn("build %s: %s", b->id, net_err.msg);
		b->net.down_noted = 1;
	}
	/* /etc for the resolv.conf the jail writes (a FROM scratch layer
	 * may have none yet). */
	if (bld_fsroot_ensure_sysdirs(rootfs, err) < 0 ||
	    bld_fsroot_mkdir_p(rootfs, "/etc", 0755, err) < 0 ||
	    bld_trust_ca(b, rootfs, err) < 0 ||
	    bld_fsroot_mkdir_p(rootfs, bld_step_workdir(b, idx), 0755, err) < 0)
		return -1;
	char *payload = exec_payload(b, st, idx, err);
	if (payload == NULL)
		return -1;
	if (place_agent(b, rootfs, err) < 0) {
		free(payload);
		return -1;
	}

	char id[64];
	snprintf(id, sizeof id, "b%.40s-%zu", b->id, idx + 1);
	al_sandbox_spec spec = {
		.id = id,
		.rootfs = rootfs,
		.hostname = "build",
		.agent = BUILD_AGENT,
		/* A RUN step is a tenant's code like a sandbox's:
		 * capped at a sandbox's default CPU. */
		.limits = {.memory_bytes = BUILD_MEMORY,
			   .pids_max = BUILD_PIDS,
			   .cpu_shares = 1024,
			   .cpu_millis = b->cfg.default_cpu_millis},
		.net = net,
	};
	al_driver_handle h;
	memset(&h, 0, sizeof h);
	h.agent_fd = -1;
	int rc = -1;
	uint64_t denied = bld_net_denied(b);
	resolv_saved resolv;
	resolv_save(rootfs, &resolv);
	if (al_driver_ns.start(&spec, &h, err) < 0) {
		al_err_wrap(err, "starting the build sandbox");
	} else {
		rc = converse(b, h.agent_fd, payload, err);
		if (rc < 0)
			bld_net_explain(b, denied);
		al_err tmp_err = {0};
		/* The kernel can take a moment to empty the cgroups. */
		for (int i = 0; i < 50; i++) {
			if (al_driver_ns.stop(&h, &tmp_err) == 0)
				break;
			usleep(20000);
		}
		if (h.priv != NULL)
			al_warn("build %s: stopping the build sandbox: %s",
				b->id, tmp_err.msg);
	}
	free(payload);
	if (net != NULL)
		resolv_restore(rootfs, net, &resolv);
	else
		free(resolv.text);
	al_err tmp_err = {0};
	if (remove_agent(rootfs, &tmp_err) < 0 && rc == 0) {
		*err = tmp_err;
		return -1;
	}
	return rc;
}
