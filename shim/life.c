/* shim life: see life.h. */
#include "life.h"

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

#include "base/log.h"
#include "boot.h"
#include "gateway.h"
#include "lifecycle.h"
#include "netctl.h"
#include "pool/poolcap.h"
#include "pool/store.h"
#include "sandbox/spare.h"
#include "sandbox/spool.h"
#include "sandbox/standby.h"

/* A TCG guest restored while the host is busy with a burst of others can
 * take seconds to say hello; past this the machine is taken as broken. */
#define HELLO_TIMEOUT_MS 30000

/* The agent's first frame must be HELLO; anything else means the machine
 * did not come up as built. */
static int wait_hello(shim *s, al_err *err)
{
	al_frame f;
	if (al_frame_recv(s->h.agent_fd, &s->agent_in, &f,
			  al_now_ms() + HELLO_TIMEOUT_MS, err) < 0) {
		al_err_wrap(err, "waiting for the sandbox agent");
		return -1;
	}
	int ok = f.type == AL_F_HELLO && f.id == 0;
	al_frame_free(&f);
	if (!ok)
		return al_err_set(err, AL_EPROTO, 0,
				  "sandbox agent did not say hello");
	return 0;
}

static int listen_control(shim *s, al_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(s->sock_path) >= sizeof sa.sun_path)
		return al_err_set(err, AL_EINVAL, 0, "socket path too long");
	strcpy(sa.sun_path, s->sock_path);
	char dir[AL_PATH_MAX];
	memcpy(dir, s->sock_path, sizeof dir);
	char *slash = strrchr(dir, '/');
	if (slash != NULL)
		*slash = '\0';
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", dir);
	unlink(s->sock_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "socket");
	/* Only root (the fcgi workers, the controller) may drive a shim. */
	mode_t old = umask(0077);
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (rc < 0 || listen(fd, 128) < 0) {
		al_err_sys(err, AL_ESYS, errno, "bind %s", s->sock_path);
		close(fd);
		return -1;
	}
	s->listen_fd = fd;
	return 0;
}

static void write_pid_file(shim *s)
{
	FILE *f = fopen(s->pid_path, "we");
	if (f == NULL)
		return;
	fprintf(f, "%d\n", (int)getpid());
	fclose(f);
}

static void close_control(shim *s)
{
	if (s->listen_fd < 0)
		return;
	/* Path first: a reaper that finds the path but cannot connect
	 * takes the shim for dead (al_standby_reap). A standby's may have
	 * been moved by a retire. */
	if (s->standby)
		al_standby_unlink(&s->cfg, s->sb.template_name, s->driver->name,
				  s->slot);
	else
		unlink(s->sock_path);
	close(s->listen_fd);
	s->listen_fd = -1;
}

void shim_teardown(shim *s, al_event ev, const char *detail)
{
	al_err err = {0};
	close_control(s);
	/* The gateway first: it sits in the sandbox's cgroup, which the
	 * driver's stop removes (and would have to kill it for). */
	shim_netctl_detach(s, "the sandbox ended");
	shim_gwproc_end(&s->gwproc);
	if (s->driver != NULL && s->started) {
		if (s->driver->stop(&s->h, &err) < 0)
			al_warn("sandbox %s: stop: %s", s->sb.id, err.msg);
		s->started = 0;
	}
	/* After the machine: nothing of the sandbox uses the slot now. */
	shim_net_release(&s->net);
	if (s->rootfs[0] != '\0') {
		if (al_store_subvol_delete(s->rootfs, &err) < 0)
			al_warn("sandbox %s: %s", s->sb.id, err.msg);
		s->rootfs[0] = '\0';
	}
	/* Durable before the shim exits; the controller records it. */
	if (s->has_row) {
		if (al_spool_write(&s->cfg, s->sb.id, ev, detail, &err) < 0)
			al_warn("sandbox %s: spooling %s: %s", s->sb.id,
				al_event_name(ev), err.msg);
		s->has_row = 0;
	}
	/* Last: while the pid file names a live shim, the controller takes
	 * the sandbox for one that is ending, not one that lost its shim
	 * (its end is not spooled yet). */
	if (s->pid_path[0] != '\0')
		unlink(s->pid_path);
	al_info("sandbox %s ended (%s: %s)", s->sb.id, al_event_name(ev),
		detail);
}

/* Milliseconds each start step took, logged with the running line so an
 * operator can see where create time goes. The disk limit is a single
 * ioctl: microseconds. grow_us: the machine's own disk grown to the
 * limit (vm). */
static struct {
	int64_t t0, spec, snapshot, driver, hello, ready;
	int64_t qgroup_us, grow_us;
} start_ms;

/* " (uid range 0.02 ms, user namespace 0.31 ms, ...)": the driver's own
 * steps of the start, "" when it measured none. */
static void driver_steps(const al_driver_handle *h, char *out, size_t len)
{
	size_t n = 0;
	out[0] = '\0';
	for (int i = 0; i < AL_DRIVER_STEPS && h->steps[i].name != NULL; i++) {
		int w = snprintf(out + n, len - n, "%s%s %.2f ms",
				 i == 0 ? " (" : ", ", h->steps[i].name,
				 h->steps[i].ms);
		if (w < 0 || (size_t)w >= len - n - 1) {
			out[0] = '\0'; /* better none than a torn list */
			return;
		}
		n += (size_t)w;
	}
	if (n > 0)
		snprintf(out + n, len - n, ")");
}

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Cap what the sandbox may add to its template and put it in its
 * project's group on the pool (a standby: in the standbys'), whose cap
 * bounds what the project's sandboxes write together (core/pool/poolcap.h);
 * fails closed: a sandbox is not started (or claimed) without both. */
static int limit_disk(shim *s, const al_limits *l, int standby, int was_standby,
		      al_err *err)
{
	/* 0 would lift the cap (al_store_limit). */
	if (l->disk_bytes == 0)
		return al_err_set(err, AL_EINTERNAL, 0,
				  "sandbox %s has no disk limit", s->sb.id);
	if (!standby && (l->pool_group <= 0 || l->pool_group_bytes == 0))
		return al_err_set(err, AL_EINTERNAL, 0,
				  "sandbox %s has no group on the pool",
				  s->sb.id);
	int64_t t = now_us();
	if (al_store_limit(s->rootfs, l->disk_bytes, err) < 0 ||
	    al_poolcap_join(&s->cfg, s->rootfs, standby ? 0 : l->pool_group,
			    l->pool_group_bytes, was_standby, err) < 0)
		return -1;
	start_ms.qgroup_us += now_us() - t;
	return 0;
}

/* The machine's own disk as big as its cap (a vm's guest filesystem);
 * fails closed: a sandbox does not start with less than it asked for. */
static int grow_disk(shim *s, uint64_t bytes, al_err *err)
{
	if (s->driver->grow_disk == NULL)
		return 0;
	int64_t t = now_us();
	int grew = s->driver->grow_disk(&s->h, bytes, err);
	if (grew < 0)
		return -1;
	start_ms.grow_us += now_us() - t;
	/* A standby grown past the template's image fits only claims that
	 * ask at least as much (shim_claim). */
	if (grew > 0)
		s->grown_for = bytes;
	return 0;
}

/* A resumed machine's agent, paused since its suspend, goes on: the
 * first thing it sends is the answer (no HELLO: it said that long ago).
 * Then the machine takes spec's identity (adopt: clock, fresh entropy,
 * hostname and MAC; a fork child's are its own). */
static int resume_agent(shim *s, const al_sandbox_spec *spec, al_err *err)
{
	if (al_frame_send(s->h.agent_fd, AL_F_RESUME, AL_REQ_ID_RESUME, "{}", 2,
			  err) < 0)
		return -1;
	int64_t deadline = al_now_ms() + HELLO_TIMEOUT_MS;
	for (;;) {
		al_frame f;
		if (al_frame_recv(s->h.agent_fd, &s->agent_in, &f, deadline,
				  err) < 0) {
			al_err_wrap(err, "waiting for the resumed agent");
			return -1;
		}
		int mine = f.id == AL_REQ_ID_RESUME;
		int ok = mine && f.type == AL_F_RESULT;
		al_frame_free(&f);
		if (ok)
			return s->driver->adopt != NULL
				       ? s->driver->adopt(&s->h, spec, err)
				       : 0;
		if (mine)
			return al_err_set(err, AL_EPROTO, 0,
					  "the resumed agent refused to go on");
	}
}

/* Where the machine's files come from: the template (its version's
 * root) or, resuming, the snapshot's; *restore gets the snapshot's
 * saved machine when it holds one this driver can load ("" if not). */
static int machine_source(shim *s, char *src, char *restore, al_err *err)
{
	restore[0] = '\0';
	if (s->sb.resume_snapshot[0] == '\0')
		return shim_template_rootfs(s, src, AL_PATH_MAX, err);
	char dir[AL_PATH_MAX];
	struct stat st;
	if (al_config_snapshot_dir(&s->cfg, s->sb.resume_snapshot, dir,
				   sizeof dir, err) < 0)
		return -1;
	int n = snprintf(src, AL_PATH_MAX, "%s/rootfs", dir);
	if (n < 0 || n >= AL_PATH_MAX)
		return al_err_set(err, AL_EINVAL, 0, "snapshot path too long");
	if (stat(src, &st) < 0)
		return al_err_sys(err, AL_ESTATE, errno,
				  "snapshot %s of sandbox %s is gone",
				  s->sb.resume_snapshot, s->sb.id);
	if (s->driver->capture != NULL) {
		n = snprintf(restore, AL_PATH_MAX, "%s/vm", dir);
		if (n < 0 || n >= AL_PATH_MAX || stat(restore, &st) < 0)
			restore[0] = '\0';
	}
	return 0;
}

/* Snapshot the template into pool/sandboxes/<name> (or take a spare
 * snapshot, core/sandbox/spare.h), or resuming the sandbox's snapshot,
 * and start the machine on it; name is the sandbox id, or the slot of a
 * standby. */
static int start_machine(shim *s, const char *name, const char *tmpl_name,
			 const al_limits *limits, int standby, al_err *err)
{
	char tmpl[AL_PATH_MAX], restore[AL_PATH_MAX];
	int resume = s->sb.resume_snapshot[0] != '\0';
	if (machine_source(s, tmpl, restore, err) < 0 ||
	    al_config_sandbox_root(&s->cfg, name, s->rootfs, sizeof s->rootfs,
				   err) < 0)
		return -1;
	/* A spare the controller made ahead is renamed into place; only
	 * without one does this start wait for a snapshot's commit. */
	if ((resume || !al_spare_take(&s->cfg, s->tv.name, s->tv.version, tmpl,
				      s->rootfs)) &&
	    al_store_snapshot(tmpl, s->rootfs, err) < 0) {
		s->rootfs[0] = '\0'; /* nothing of ours to delete */
		al_err_wrap(err, resume ? "snapshot %s" : "template %s",
			    resume ? s->sb.resume_snapshot : tmpl_name);
		return -1;
	}
	if (limit_disk(s, limits, standby, 0, err) < 0)
		return -1;
	start_ms.snapshot = al_now_ms();
	if (shim_net_wanted(&s->sb) &&
	    shim_net_lease(&s->net, &s->cfg, s->driver->net_kind, err) < 0)
		return -1;

	al_sandbox_spec spec = {
		.id = name,
		.rootfs = s->rootfs,
		.hostname = name,
		.agent = "/sbin/airlock-agent",
		.limits = *limits,
		.net = shim_net_slot(&s->net),
		.restore_dir = restore[0] != '\0' ? restore : NULL,
	};
	if (s->driver->start(&spec, &s->h, err) < 0) {
		/* A saved machine this host cannot load (another QEMU, a
		 * rebuilt template): its files boot afresh, never lost. */
		if (spec.restore_dir == NULL || err->code != AL_ESTATE)
			return -1;
		al_warn("sandbox %s: its memory cannot come back (%s); "
			"starting it from its files",
			s->sb.id, err->msg);
		spec.restore_dir = NULL;
		spec.own_disk = 1;
		if (s->driver->start(&spec, &s->h, err) < 0)
			return -1;
	}
	s->started = 1;
	s->h.agent_in = &s->agent_in;
	start_ms.driver = al_now_ms();
	/* Without its memory a resume is a fresh boot of its files. */
	s->resumed_cold = resume && spec.restore_dir == NULL;
	if ((spec.restore_dir != NULL ? resume_agent(s, &spec, err)
				      : wait_hello(s, err)) < 0)
		return -1;
	start_ms.hello = al_now_ms();
	if (grow_disk(s, limits->disk_bytes, err) < 0)
		return -1;
	/* The template's START runs at a boot, not in a machine that
	 * goes on from where it stopped. */
	if (spec.restore_dir == NULL && shim_template_start(s, err) < 0)
		return -1;
	int fl = fcntl(s->h.agent_fd, F_GETFL);
	if (fl < 0 || fcntl(s->h.agent_fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return al_err_sys(err, AL_ESYS, errno, "fcntl agent");
	return 0;
}

/* run/sbx/<id>.sock and run/sbx/<id>.pid */
static int sandbox_paths(shim *s, const char *id, al_err *err)
{
	if (al_config_shim_socket(&s->cfg, id, s->sock_path,
				  sizeof s->sock_path, err) < 0)
		return -1;
	size_t sl = strlen(s->sock_path);
	if (sl < 5 || strcmp(s->sock_path + sl - 5, ".sock") != 0)
		return al_err_set(err, AL_EINTERNAL, 0,
				  "unexpected socket path");
	memcpy(s->pid_path, s->sock_path, sl - 5);
	memcpy(s->pid_path + sl - 5, ".pid", 5);
	return 0;
}

/* This shim's pid and its machine's accelerator, packed: known only
 * now (a restore runs under the one its snapshot was taken with). */
static char *ready_report(const shim *s, al_err *err)
{
	al_shim_ready r = {.pid = (int)getpid(), .cold = s->resumed_cold};
	/* The accelerator is the machine's, known only now (a restore runs
	 * under the one its snapshot was taken with). */
	if (s->driver->accel != NULL)
		snprintf(r.accel, sizeof r.accel, "%s",
			 s->driver->accel(&s->h));
	return al_shim_ready_pack(&r, err);
}

/* Serve the sandbox under its own socket; *ready (al_shim_ready_pack)
 * is what the starter records running. */
static int go_live(shim *s, char **ready, al_err *err)
{
	if (sandbox_paths(s, s->sb.id, err) < 0 || listen_control(s, err) < 0)
		return -1;
	write_pid_file(s);
	*ready = ready_report(s, err);
	if (*ready == NULL)
		return -1;
	/* Its gateway, now that it is a sandbox (a standby has none to
	 * configure it for): the launch returns once it has exec'd. */
	const al_netslot *slot = shim_net_slot(&s->net);
	if (slot != NULL &&
	    shim_gwproc_begin(&s->gwproc, &s->cfg, s->sb.id, slot, err) < 0)
		return -1;
	start_ms.ready = al_now_ms();
	return 0;
}

static int use_driver(shim *s, al_err *err)
{
	if (al_config_driver_check(&s->cfg, s->sb.driver, err) < 0)
		return -1;
	s->driver = al_driver_find(s->sb.driver, err);
	return s->driver != NULL ? 0 : -1;
}

/* Sandbox spec->id: the row exists (creating) from now on as far as
 * this shim is concerned: a failed start is spooled. */
static int bring_up(shim *s, al_sandbox *spec, al_template_version *tv,
		    int has_boot, char **ready, al_err *err)
{
	s->sb = *spec;
	memset(spec, 0, sizeof *spec);
	s->has_row = 1;
	shim_template_set(s, has_boot ? tv : NULL);
	if (s->sb.limits.disk_bytes == 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "sandbox %s: the spec has no limits",
				  s->sb.id);
	if (use_driver(s, err) < 0)
		return -1;
	if (start_machine(s, s->sb.id, s->sb.template_name, &s->sb.limits, 0,
			  err) < 0)
		return -1;
	return go_live(s, ready, err);
}

/* A standby: the template's machine with default limits, named by a
 * random slot, listening on run/pool/<template>.<driver>.<slot>.sock. */
static int bring_up_standby(shim *s, al_sandbox *spec, al_template_version *tv,
			    int has_boot, char **ready, al_err *err)
{
	s->sb = *spec;
	memset(spec, 0, sizeof *spec);
	shim_template_set(s, has_boot ? tv : NULL);
	/* The slot names the template version it holds, so that standbys
	 * of a version that was rebuilt since can be told apart and
	 * retired (core/sandbox/standby.h). */
	if (al_standby_slot(s->sb.template_version, s->slot, sizeof s->slot,
			    err) < 0)
		return -1;
	snprintf(s->sb.id, sizeof s->sb.id, "%s", s->slot);
	if (use_driver(s, err) < 0)
		return -1;
	if (s->driver->adopt == NULL)
		return al_err_set(err, AL_EINVAL, 0,
				  "driver %s has no warm pool support",
				  s->driver->name);
	/* A claim sets the sandbox's own cap (shim_claim). The machine's
	 * disk is grown now for the default limit most creates ask for (a
	 * no-op while the default is the template image's size), off their
	 * path; once grown, a claim asking less is declined (it cannot
	 * shrink), one asking more grows it further. */
	al_limits defaults = {
		.disk_bytes = (uint64_t)s->cfg.default_disk_mb << 20,
		/* Its template's START runs before any claim: capped too. */
		.cpu_millis = s->cfg.default_cpu_millis,
	};
	if (start_machine(s, s->slot, s->sb.template_name, &defaults, 1, err) <
	    0)
		return -1;
	if (s->driver->warm_up)
		shim_warm_up(s);
	if (al_standby_socket(&s->cfg, s->sb.template_name, s->driver->name,
			      s->slot, s->sock_path, sizeof s->sock_path,
			      err) < 0 ||
	    listen_control(s, err) < 0)
		return -1;
	s->standby = 1;
	*ready = ready_report(s, err);
	if (*ready == NULL)
		return -1;
	start_ms.ready = al_now_ms();
	return 0;
}

int shim_claim(shim *s, const void *payload, size_t len, char **result,
	       al_err *err)
{
	al_sandbox sb;
	al_template_version tv;
	int has_boot = 0;
	if (al_shim_spec_unpack(payload, len, &sb, &tv, &has_boot, err) < 0)
		return AL_DECLINED;
	al_template_version_free(&tv);
	/* Declined before anything changes: the standby waits on. */
	if (sb.id[0] == '\0' || has_boot || sb.limits.disk_bytes == 0 ||
	    strcmp(sb.template_name, s->sb.template_name) != 0 ||
	    sb.template_version != s->sb.template_version ||
	    strcmp(sb.driver, s->sb.driver) != 0 ||
	    !shim_net_fits(&s->net, &sb)) {
		al_err_set(err, AL_EINVAL, 0,
			   "the claim does not fit this standby");
		al_sandbox_free_fields(&sb);
		return AL_DECLINED;
	}
	/* A vm standby's vCPUs are its snapshot's: a claim of another
	 * count starts its own machine instead. */
	if (s->driver->fits != NULL && !s->driver->fits(&s->h, &sb.limits)) {
		al_err_set(err, AL_ESTATE, 0,
			   "sandbox %s asks for another machine shape (cpus) "
			   "than this standby's",
			   sb.id);
		al_sandbox_free_fields(&sb);
		return AL_DECLINED;
	}
	if (sb.limits.disk_bytes < s->grown_for) {
		al_err_set(
			err, AL_ESTATE, 0,
			"sandbox %s asks for a %llu MiB disk, this standby's "
			"is grown for %llu MiB",
			sb.id, (unsigned long long)(sb.limits.disk_bytes >> 20),
			(unsigned long long)(s->grown_for >> 20));
		al_sandbox_free_fields(&sb);
		return AL_DECLINED;
	}
	/* No second claimer may reach this standby from now on (the shim
	 * serves one client frame at a time: none came in between). */
	close_control(s);
	s->standby = 0;
	al_sandbox_free_fields(&s->sb);
	s->sb = sb;
	const char *id = s->sb.id;

	char root[AL_PATH_MAX];
	if (al_config_sandbox_root(&s->cfg, id, root, sizeof root, err) < 0)
		return -1;
	if (rename(s->rootfs, root) < 0)
		return al_err_sys(err, AL_ESYS, errno, "rename %s to %s",
				  s->rootfs, root);
	memcpy(s->rootfs, root, sizeof root);
	start_ms.qgroup_us = 0;
	start_ms.grow_us = 0;
	if (limit_disk(s, &s->sb.limits, 0, 1, err) < 0)
		return -1;
	al_sandbox_spec spec = {
		.id = id,
		.rootfs = s->rootfs,
		.hostname = id,
		.agent = "/sbin/airlock-agent",
		.limits = s->sb.limits,
		.net = shim_net_slot(&s->net),
	};
	int64_t t = now_us();
	if (s->driver->adopt(&s->h, &spec, err) < 0 ||
	    grow_disk(s, s->sb.limits.disk_bytes, err) < 0)
		return -1;
	al_info("sandbox %s: disk capped at %llu MiB (qgroup %.3f ms), "
		"adopted in %.2f ms (disk grow %.2f ms)",
		id, (unsigned long long)(s->sb.limits.disk_bytes >> 20),
		(double)start_ms.qgroup_us / 1000.0,
		(double)(now_us() - t) / 1000.0,
		(double)start_ms.grow_us / 1000.0);
	if (go_live(s, result, err) < 0)
		return -1;
	/* Not before: a failed claim is the claimer's to retry cold under
	 * the same id, and must leave the row alone. */
	s->has_row = 1;
	return 0;
}

void shim_init(shim *s, const char *name)
{
	s->listen_fd = -1;
	s->sig_fd = -1;
	s->destroy_client = -1;
	shim_netctl_init(s);
	shim_lifecycle_init(s);
	s->h.agent_fd = -1;
	s->next_agent_id = 1;
	shim_net_init(&s->net);
	shim_gwproc_init(&s->gwproc);
	snprintf(s->sb.id, sizeof s->sb.id, "%s", name);
	for (int i = 0; i < SHIM_MAX_CLIENTS; i++)
		s->clients[i].fd = -1;
	al_frame_reader_init(&s->agent_in);
	al_buf_init(&s->agent_out, SHIM_AGENT_QUEUE_MAX);
}

int shim_bring_up(shim *s, int standby, al_sandbox *spec,
		  al_template_version *tv, int has_boot, int64_t t0,
		  char **ready, al_err *err)
{
	start_ms.t0 = t0;
	start_ms.spec = al_now_ms();
	return standby ? bring_up_standby(s, spec, tv, has_boot, ready, err)
		       : bring_up(s, spec, tv, has_boot, ready, err);
}

void shim_log_running(shim *s)
{
	/* After the answer: an unmount waits for an RCU grace period. */
	shim_net_unpin(&s->net);
	char steps[512], net[64];
	driver_steps(&s->h, steps, sizeof steps);
	shim_net_step(&s->net, net, sizeof net);
	al_info("%s %s running (driver %s, init pid %d) in %lld ms: "
		"spec %lld, snapshot %lld (qgroup %.3f)%s, driver %lld%s, "
		"agent %lld, disk grow %.2f, listen %lld",
		s->standby ? "standby" : "sandbox", s->sb.id, s->driver->name,
		(int)s->h.init_pid, (long long)(start_ms.ready - start_ms.t0),
		(long long)(start_ms.spec - start_ms.t0),
		(long long)(start_ms.snapshot - start_ms.spec),
		(double)start_ms.qgroup_us / 1000.0, net,
		(long long)(start_ms.driver - start_ms.snapshot), steps,
		(long long)(start_ms.hello - start_ms.driver),
		(double)start_ms.grow_us / 1000.0,
		(long long)(start_ms.ready - start_ms.hello));
}
