/* gwlaunch: see gwlaunch.h. */
#include "net/gwlaunch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/config.h"
#include "base/vfork.h"
#include "host/cgroup.h"
#include "net/egress.h"
#include "net/nft.h"
#include "net/nl.h"
#include "proto/agentproto.h"

#define GW_NSOCK 4 /* fds 3..6 */

#if defined(__SANITIZE_ADDRESS__)
#define GW_LIMIT_MEMORY 0 /* ASan's shadow needs terabytes of space */
#else
#define GW_LIMIT_MEMORY 1
#endif

typedef struct child_args {
	const al_gateway_spec *spec;
	char *const *argv;
	int fds[GW_NSOCK]; /* to 3..6 */
	int null_fd;
	const int *cg_fds; /* al_cgroup_join_open's */
	int ncg;
	pid_t parent;
	/* Written by the child before it exits instead of exec'ing; the
	 * parent reads them once clone returns (CLONE_VFORK). */
	const char *fail_step;
	int fail_errno;
} child_args;

static void close_all(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
}

/* In the slot's namespace (the calling thread is in it). */
static int listener(uint32_t addr, int type, uint16_t port, int transparent,
		    al_err *err)
{
	int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "gateway socket");
	int one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr = {htonl(addr)}};
	const char *step = NULL;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
		step = "SO_REUSEADDR";
	else if (transparent &&
		 setsockopt(fd, SOL_IP, IP_TRANSPARENT, &one, sizeof one) < 0)
		step = "IP_TRANSPARENT";
	else if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0)
		step = "bind";
	else if (type == SOCK_STREAM && listen(fd, AL_GWLAUNCH_BACKLOG) < 0)
		step = "listen";
	if (step != NULL) {
		int e = errno;
		close(fd);
		char ip[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
		return al_err_sys(err, AL_ESYS, e,
				  "gateway %s socket %s:%u: %s",
				  type == SOCK_STREAM ? "TCP" : "UDP", ip, port,
				  step);
	}
	return fd;
}

int al_gateway_sockets(const al_netslot *s, int fds[3], al_err *err)
{
	int saved = al_nl_enter(s->gw_fd, err);
	if (saved < 0)
		return -1;
	uint32_t gw = s->addr.gateway;
	int rc = 0;
	if ((fds[0] = listener(gw, SOCK_DGRAM, 53, 0, err)) < 0 ||
	    (fds[1] = listener(gw, SOCK_STREAM, 53, 0, err)) < 0 ||
	    (fds[2] = listener(gw, SOCK_STREAM, AL_NFT_TPROXY_PORT, 1, err)) <
		    0)
		rc = -1;
	al_err leave_err;
	if (al_nl_leave(saved, &leave_err) < 0) {
		if (rc == 0 && err != NULL)
			*err = leave_err;
		rc = -1;
	}
	if (rc < 0)
		close_all(fds, 3);
	return rc;
}

/* The caller's sockets stay the caller's: the launch closes copies. */
static int dup_sockets(const int *in, int fds[3], al_err *err)
{
	for (int i = 0; i < 3; i++)
		if ((fds[i] = fcntl(in[i], F_DUPFD_CLOEXEC, 3)) < 0) {
			int e = errno;
			close_all(fds, (size_t)i);
			return al_err_sys(err, AL_ESYS, e,
					  "copy of gateway socket %d", i);
		}
	return 0;
}

__attribute__((noreturn)) static void child_fail(child_args *a,
						 const char *step)
{
	a->fail_step = step;
	a->fail_errno = errno;
	_exit(111);
}

static int set_limit(int resource, rlim_t v)
{
	struct rlimit r = {v, v};
	return setrlimit(resource, &r);
}

/* Between clone and exec: system calls on what the parent prepared
 * only (the caller may be multi-threaded, and this runs in its memory
 * while the calling thread sleeps). */
__attribute__((noreturn)) static int child_entry(void *arg)
{
	child_args *a = arg;
	const al_gateway_spec *spec = a->spec;

	/* The parent blocked every signal around clone: none of its
	 * handlers may run here or survive into the gateway. */
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = SIG_DFL;
		sigaction(sig, &sa, NULL);
	}
	/* Charged to the sandbox from its first step (this child is one
	 * thread: moving it is moving the process). */
	if (al_cgroup_join(a->cg_fds, a->ncg) < 0)
		child_fail(a, "join the sandbox's cgroup");
	if (set_limit(RLIMIT_NOFILE, AL_GWLAUNCH_NOFILE) < 0 ||
	    set_limit(RLIMIT_CORE, 0) < 0 ||
	    set_limit(RLIMIT_FSIZE, AL_GWLAUNCH_FSIZE) < 0)
		child_fail(a, "rlimits");
	if (GW_LIMIT_MEMORY && (set_limit(RLIMIT_AS, AL_GWLAUNCH_AS) < 0 ||
				set_limit(RLIMIT_DATA, AL_GWLAUNCH_AS) < 0))
		child_fail(a, "memory rlimits");
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			child_fail(a, "drop the capability bounding set");
	/* Raw calls: they change this thread only, which is the whole
	 * child; libc's wrappers would try to signal the caller's other
	 * threads. Leaving uid 0 clears permitted, effective and ambient
	 * capabilities (no SECBIT_KEEP_CAPS). */
	if (syscall(SYS_setgroups, 0, NULL) < 0 ||
	    syscall(SYS_setresgid, spec->gid, spec->gid, spec->gid) < 0 ||
	    syscall(SYS_setresuid, spec->uid, spec->uid, spec->uid) < 0)
		child_fail(a, "drop to the gateway's uid");
	/* A change of uid clears the parent-death signal: set it after. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		child_fail(a, "parent-death signal");
	if (getppid() != a->parent) {
		errno = ESRCH;
		child_fail(a, "the caller is gone");
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(a, "no_new_privs");
	if (syscall(SYS_setresuid, 0, 0, 0) == 0 || geteuid() == 0) {
		errno = EPERM;
		child_fail(a, "still root after dropping");
	}

	/* Descriptors: up out of the way of 0..6 first, then down. */
	int high[GW_NSOCK];
	for (int i = 0; i < GW_NSOCK; i++)
		if ((high[i] = fcntl(a->fds[i], F_DUPFD, 16)) < 0)
			child_fail(a, "dup a descriptor");
	int cred_high = spec->cred_fd > 0 ? fcntl(spec->cred_fd, F_DUPFD, 16)
					  : -1;
	if (spec->cred_fd > 0 && cred_high < 0)
		child_fail(a, "dup the credential channel");
	int null_high = fcntl(a->null_fd, F_DUPFD, 16);
	if (null_high < 0 || dup2(null_high, 0) < 0 || dup2(2, 1) < 0)
		child_fail(a, "place stdin and stdout");
	for (int i = 0; i < GW_NSOCK; i++)
		if (dup2(high[i], AL_GWLAUNCH_FD_DNS_UDP + i) < 0)
			child_fail(a, "place a descriptor");
	int last = AL_GWLAUNCH_FD_CONTROL;
	if (cred_high >= 0) {
		if (dup2(cred_high, AL_GWLAUNCH_FD_CRED) < 0)
			child_fail(a, "place the credential channel");
		last = AL_GWLAUNCH_FD_CRED;
	}
	if (syscall(SYS_close_range, last + 1, ~0u, 0) < 0)
		child_fail(a, "close_range");
	al_vfork_exec_signals();
	execve(spec->prog, a->argv, spec->env);
	child_fail(a, "exec the gateway");
}

int al_gateway_prog(const char *libexec_dir, char *out, size_t outlen,
		    al_err *err)
{
	const char *prog = getenv(AL_GATEWAY_PROG_ENV);
	int w = prog != NULL && prog[0] == '/'
			? snprintf(out, outlen, "%s", prog)
			: snprintf(out, outlen, "%s/airlock-gateway",
				   libexec_dir);
	if (w < 0 || (size_t)w >= outlen)
		return al_err_set(err, AL_EINVAL, 0, "gateway path too long");
	return 0;
}

static void env_put(al_gateway_env *e, size_t *ne, const char *name,
		    const char *value)
{
	if (value == NULL || *ne >= AL_GATEWAY_ENV_N)
		return;
	int w = snprintf(e->buf[*ne], sizeof e->buf[*ne], "%s=%s", name, value);
	if (w > 0 && (size_t)w < sizeof e->buf[*ne]) {
		e->env[*ne] = e->buf[*ne];
		(*ne)++;
	}
}

void al_gateway_env_fill(al_gateway_env *e, const al_config *cfg)
{
	/* Passed as the starter has them (the gateway checks them). */
	static const char *const upstream[] = {
		"AIRLOCK_UPSTREAM_DNS",
		"AIRLOCK_UPSTREAM_HOSTS",
		"AIRLOCK_UPSTREAM_CA",
		"AIRLOCK_UPSTREAM_ALLOW_CIDRS",
	};
	char rate[16], burst[16], head[16], idle[16];
	snprintf(rate, sizeof rate, "%u", cfg->egress_log_rate);
	snprintf(burst, sizeof burst, "%u", cfg->egress_log_burst);
	snprintf(head, sizeof head, "%u", cfg->gw_head_timeout_ms);
	snprintf(idle, sizeof idle, "%u", cfg->gw_idle_timeout_ms);
	size_t ne = 0;
	env_put(e, &ne, "AIRLOCK_STATE", cfg->state_dir);
	env_put(e, &ne, "AIRLOCK_POLICIES", cfg->policies_dir);
	env_put(e, &ne, "AIRLOCK_NET_POOL", cfg->net_pool);
	env_put(e, &ne, "AIRLOCK_EGRESS_LOG_RATE", rate);
	env_put(e, &ne, "AIRLOCK_EGRESS_LOG_BURST", burst);
	env_put(e, &ne, "AIRLOCK_GW_HEAD_TIMEOUT_MS", head);
	env_put(e, &ne, "AIRLOCK_GW_IDLE_TIMEOUT_MS", idle);
	for (size_t i = 0; i < sizeof upstream / sizeof upstream[0]; i++)
		env_put(e, &ne, upstream[i], getenv(upstream[i]));
	e->env[ne] = NULL;
}

void al_gateway_end(pid_t *pid, int *pidfd)
{
	if (*pid > 0) {
		/* The pidfd turns readable when the process exits. */
		struct pollfd p = {.fd = *pidfd, .events = POLLIN};
		if (syscall(SYS_pidfd_send_signal, *pidfd, SIGTERM, NULL, 0) ==
		    0) {
			int64_t end = al_now_ms() + AL_GATEWAY_STOP_GRACE_MS;
			for (int64_t left = AL_GATEWAY_STOP_GRACE_MS; left > 0;
			     left = end - al_now_ms()) {
				int n = poll(&p, 1, (int)left);
				if (n > 0 || (n < 0 && errno != EINTR))
					break;
			}
		}
		syscall(SYS_pidfd_send_signal, *pidfd, SIGKILL, NULL, 0);
		/* ECHILD: a SIGCHLD loop of the caller reaped it already. */
		siginfo_t si;
		waitid(P_PIDFD, (id_t)*pidfd, &si, WEXITED);
	}
	if (*pidfd >= 0)
		close(*pidfd);
	*pid = 0;
	*pidfd = -1;
}

int al_gateway_map_path(const char *run_dir, const char *sandbox, char *out,
			size_t outlen)
{
	int n = snprintf(out, outlen, "%s/gw/%s.fakeip", run_dir, sandbox);
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

void al_gateway_state_remove(const char *run_dir, const char *sandbox)
{
	char p[AL_PATH_MAX + 96];
	if (al_id_valid(sandbox) &&
	    al_gateway_map_path(run_dir, sandbox, p, sizeof p) == 0)
		unlink(p);
}

/* The journal, made here as root and given to the gateway's uid: the
 * directory is root's, so no gateway can touch another's. */
static int map_prepare(const al_gateway_spec *s, al_err *err)
{
	char p[AL_PATH_MAX + 96];
	snprintf(p, sizeof p, "%s/gw", s->run_dir);
	if (mkdir(p, 0711) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", p);
	if (al_gateway_map_path(s->run_dir, s->sandbox, p, sizeof p) < 0)
		return al_err_set(err, AL_EINVAL, 0, "run dir path too long");
	int fd = open(p, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open %s", p);
	int r = 0;
	if (fchown(fd, s->uid, s->gid) < 0 || fchmod(fd, 0600) < 0)
		r = al_err_sys(err, AL_ESYS, errno, "chown %s", p);
	close(fd);
	return r;
}

static int spec_ok(const al_gateway_spec *s, al_err *err)
{
	if (s == NULL || s->slot == NULL || s->slot->gw_fd < 0 || s->uid == 0 ||
	    s->gid == 0 || !al_id_valid(s->sandbox) || s->prog == NULL ||
	    s->prog[0] != '/' || s->env == NULL)
		return al_err_set(
			err, AL_EINVAL, 0,
			"gateway launch: bad spec (slot, uid, gid, "
			"sandbox id, absolute prog and env are needed)");
	if (access(s->prog, X_OK) < 0)
		return al_err_sys(err, AL_ESYS, errno, "gateway program %s",
				  s->prog);
	return 0;
}

int al_gateway_launch(const al_gateway_spec *spec, al_gateway_proc *out,
		      al_err *err)
{
	out->pid = -1;
	out->pidfd = -1;
	out->control_fd = -1;
	if (spec_ok(spec, err) < 0)
		return -1;
	if (spec->run_dir != NULL &&
	    (al_egress_dir_prepare(spec->run_dir, spec->sandbox, spec->uid,
				   spec->gid, err) < 0 ||
	     map_prepare(spec, err) < 0))
		return -1;
	/* fds: the three slot sockets, the gateway's control end, ours. */
	int fds[5] = {-1, -1, -1, -1, -1};
	int null_fd = -1;
	int cg_fds[AL_CGROUP_JOIN_FDS];
	int ncg = 0;
	if (spec->cgroup != NULL) {
		ncg = al_cgroup_join_open(spec->cgroup, AL_CGROUP_JOIN_LIMITS,
					  cg_fds, err);
		if (ncg < 0)
			return -1;
	}
	if (spec->sockets != NULL
		    ? dup_sockets(spec->sockets, fds, err) < 0
		    : al_gateway_sockets(spec->slot, fds, err) < 0) {
		close_all(cg_fds, (size_t)ncg);
		return -1;
	}
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
		al_err_sys(err, AL_ESYS, errno, "gateway control socketpair");
		goto fail;
	}
	fds[3] = sp[0];
	fds[4] = sp[1];
	if (fcntl(fds[4], F_SETFL, O_NONBLOCK) < 0) {
		al_err_sys(err, AL_ESYS, errno, "control socket O_NONBLOCK");
		goto fail;
	}
	null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null_fd < 0) {
		al_err_sys(err, AL_ESYS, errno, "/dev/null");
		goto fail;
	}
	char *argv[] = {(char *)spec->prog, "--sandbox", (char *)spec->sandbox,
			NULL};
	child_args args = {
		.spec = spec,
		.argv = argv,
		.fds = {fds[0], fds[1], fds[2], fds[3]},
		.null_fd = null_fd,
		.cg_fds = cg_fds,
		.ncg = ncg,
		.parent = getpid(),
	};
	int pidfd = -1;
	pid_t pid = al_vfork_call(child_entry, &args, CLONE_PIDFD | SIGCHLD,
				  &pidfd, "the gateway", err);
	if (pid < 0)
		goto fail;
	if (args.fail_step != NULL) {
		/* It has exited: reap it, nothing is left. */
		siginfo_t si;
		waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED);
		close(pidfd);
		al_err_sys(err, AL_ESYS, args.fail_errno,
			   "gateway of sandbox %s: %s", spec->sandbox,
			   args.fail_step);
		goto fail;
	}
	close_all(fds, 4);
	close_all(cg_fds, (size_t)ncg);
	close(null_fd);
	out->pid = pid;
	out->pidfd = pidfd;
	out->control_fd = fds[4];
	return 0;
fail:
	close_all(fds, 5);
	close_all(cg_fds, (size_t)ncg);
	if (null_fd >= 0)
		close(null_fd);
	return -1;
}
