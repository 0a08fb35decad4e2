/* gwlaunch: start one sandbox's gateway (airlock-gateway) on its slot.
 *
 * The caller (the shim, as host root) holds the slot and a gateway uid
 * (uidrange.h, al_uidrange_gw: one per sandbox). The launcher makes, in
 * the slot's namespace, the gateway's three sockets, bound to the slot's
 * gateway address and listening, and a control socketpair; then starts
 * the program with them as
 *   fd 3  DNS over UDP, <gateway>:53
 *   fd 4  DNS over TCP, <gateway>:53 (listening)
 *   fd 5  the transparent TCP listener, <gateway>:AL_NFT_TPROXY_PORT
 *         (IP_TRANSPARENT: every TCP connection the slot's rules
 *         tproxy to it; getsockname of an accepted socket is the
 *         guest's original destination)
 *   fd 6  control: AF_UNIX SOCK_STREAM to the caller (agentproto frames:
 *         AL_FRAME_GW_CONFIG in, AL_FRAME_GW_ACK out)
 *   fd 7  the credential channel (spec->cred_fd, a connection to the
 *         controller's run/cred.sock after CRED_HELLO; see
 *         gateway/credchan.h), when the caller has one
 *   fd 0  /dev/null, fds 1 and 2 the caller's stderr (the gateway logs
 *         there)
 * and nothing else. The process itself stays in the caller's network
 * namespace (the host's): its upstream connections go from there.
 *
 * The launcher first makes the gateway's egress log directory its own
 * (al_egress_dir_prepare), and the journal of its synthetic address map
 * (gw/fakeip.h: a restarted gateway gives no cached address to another
 * name), <run>/gw/<sandbox>.fakeip, kept for the sandbox's life: the
 * caller removes it with al_gateway_state_remove when the sandbox goes.
 * Before the exec the child, still root: joins the sandbox's cgroup
 * (when named: its memory, pids and cpu, so that a guest that makes its
 * gateway work pays from its own limits; not its freezer), sets rlimits (NOFILE, CORE 0, FSIZE; AS and DATA except in a sanitizer
 * build, whose shadow memory would not fit), empties its capability
 * bounding set, drops to uid:gid with no supplementary groups (which
 * clears every other capability set), asks for SIGKILL when the caller
 * dies, sets no_new_privs and checks root is gone. The gateway installs
 * its own syscall filter once it has opened what it needs.
 *
 * Cost on the caller's path: one setns pair, five sockets, one
 * clone(CLONE_VM | CLONE_VFORK) that returns once the child has exec'd
 * (no page tables copied), no waiting on the gateway itself: the caller
 * sends GW_CONFIG on control_fd and reads the ACK when it wants to. */
#ifndef AL_NET_GWLAUNCH_H
#define AL_NET_GWLAUNCH_H

#include <stddef.h>
#include <sys/types.h>

#include "base/config.h"
#include "base/err.h"
#include "net/slot.h"

#define AL_GWLAUNCH_FD_DNS_UDP 3
#define AL_GWLAUNCH_FD_DNS_TCP 4
#define AL_GWLAUNCH_FD_TPROXY 5
#define AL_GWLAUNCH_FD_CONTROL 6
#define AL_GWLAUNCH_FD_CRED 7

/* Limits of one gateway process. */
#define AL_GWLAUNCH_NOFILE 4096
#define AL_GWLAUNCH_AS (1ull << 30)
#define AL_GWLAUNCH_FSIZE (64ull << 20)
#define AL_GWLAUNCH_BACKLOG 256

typedef struct al_gateway_spec {
	const al_netslot *slot;
	uid_t uid;	     /* the gateway's own, never 0 */
	gid_t gid;	     /* never 0 */
	const char *sandbox; /* its id: argv "--sandbox <id>" */
	const char *prog;    /* path of airlock-gateway */
	/* NULL-terminated "K=V" (al_gateway_env_fill's); the gateway gets
	 * these and nothing else. */
	char *const *env;
	/* <state>/run, or NULL: the launcher makes <run_dir>/egress/<sandbox>/
	 * (core/net/egress.h) and the synthetic address journal
	 * al_gateway_map_path() the gateway's own before it starts. */
	const char *run_dir;
	/* The sandbox's cgroup leaf (core/host/cgroup.h name), which the gateway
	 * joins before its first instruction (AL_CGROUP_JOIN_LIMITS), or
	 * NULL: it stays in the caller's. */
	const char *cgroup;
	/* The three slot sockets (al_gateway_sockets), which the caller
	 * keeps and may pass again to the next launch, or NULL: the
	 * launcher makes them for this gateway alone. */
	const int *sockets;
	/* > 0: the credential channel, the gateway's fd 7 (the caller
	 * keeps its own copy and closes it); 0 or -1: none (the gateway
	 * asks for one on fd 6). */
	int cred_fd;
} al_gateway_spec;

typedef struct al_gateway_proc {
	pid_t pid;
	int pidfd;	/* close-on-exec; readable once the gateway exits */
	int control_fd; /* close-on-exec, non-blocking; the caller's end */
} al_gateway_proc;

/* The program: $AL_GATEWAY_PROG_ENV when it is an absolute path (tests,
 * operators), else <libexec_dir>/airlock-gateway. */
#define AL_GATEWAY_PROG_ENV "AIRLOCK_GATEWAY"
int al_gateway_prog(const char *libexec_dir, char *out, size_t outlen,
		    al_err *err);

/* What a gateway gets of its starter's environment (the process
 * contract), and nothing else: AIRLOCK_STATE, AIRLOCK_POLICIES,
 * AIRLOCK_NET_POOL (the prefix it must never dial: without it a gateway
 * does not start), AIRLOCK_EGRESS_LOG_RATE, _BURST and
 * AIRLOCK_GW_HEAD_TIMEOUT_MS, _IDLE_TIMEOUT_MS from the starter's
 * configuration (checked, defaults resolved), AIRLOCK_UPSTREAM_* as the
 * starter has them. env is the NULL-terminated list for
 * al_gateway_spec.env, pointing into buf. */
#define AL_GATEWAY_ENV_N 11
typedef struct al_gateway_env {
	char buf[AL_GATEWAY_ENV_N][AL_PATH_MAX + 64];
	char *env[AL_GATEWAY_ENV_N + 1];
} al_gateway_env;
void al_gateway_env_fill(al_gateway_env *e, const al_config *cfg);

/* Stop and reap a launched gateway, close its pidfd; *pid = 0 and
 * *pidfd = -1 after. SIGTERM first: in AL_GATEWAY_STOP_GRACE_MS it
 * writes out the decisions it still buffers (the egress log keeps every
 * one) and exits; then SIGKILL. Harmless when none runs (*pid <= 0) or
 * it was reaped already. */
#define AL_GATEWAY_STOP_GRACE_MS 300
void al_gateway_end(pid_t *pid, int *pidfd);

/* <run_dir>/gw/<sandbox>.fakeip into out; -1 if it does not fit. */
int al_gateway_map_path(const char *run_dir, const char *sandbox, char *out,
			size_t outlen);
/* The sandbox is gone: its journal goes too (harmless if missing). */
void al_gateway_state_remove(const char *run_dir, const char *sandbox);

/* The gateway's three sockets of slot, fds 3, 4 and 5 above, in that
 * order (close-on-exec, non-blocking). A caller that holds them before
 * any gateway runs can start one when the guest first uses them (a
 * datagram or a connection waits in them), and keep what a restarted
 * gateway would otherwise lose. */
int al_gateway_sockets(const al_netslot *slot, int fds[3], al_err *err);

/* Start the gateway of spec->slot. On success out is filled and the
 * caller owns pidfd and control_fd (and must reap pid). On failure
 * nothing is left: no process, no socket. */
int al_gateway_launch(const al_gateway_spec *spec, al_gateway_proc *out,
		      al_err *err);

#endif
