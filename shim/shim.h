/* airlock-shim: the per-sandbox supervisor. main.c brings the sandbox up
 * (snapshot, driver start, agent HELLO, control socket) and down again;
 * relay.c is the event loop between fcgi clients and the agent. */
#ifndef AL_SHIM_H
#define AL_SHIM_H

#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "agentproto.h"
#include "config.h"
#include "driver.h"
#include "sandbox.h"
#include "template.h"

#define SHIM_MAX_CLIENTS 256
/* Queued bytes toward one client or the agent before the peer counts as
 * stuck and is dropped. */
#define SHIM_CLIENT_QUEUE_MAX (32u << 20)
#define SHIM_AGENT_QUEUE_MAX (64u << 20)
/* Flow control: while this much waits for a client, the shim stops
 * reading the agent; while this much waits for the agent, it stops
 * reading clients that have requests in flight there. The agent's
 * limit is above any exec's stdin (a 1 MiB body), so a client that
 * sends all its stdin before it reads the output cannot stall. */
#define SHIM_CLIENT_QUEUE_HIGH (1u << 20)
#define SHIM_AGENT_QUEUE_HIGH (2u << 20)

typedef struct shim_client {
	int fd; /* -1 = free slot */
	uint32_t gen; /* bumps on reuse so stale request routes die */
	al_frame_reader in;
	al_buf out;
} shim_client;

/* One request relayed to the agent: agent-side id <-> client-side id. */
typedef struct shim_route {
	uint32_t agent_id; /* 0 = free */
	int client;	   /* slot index, -1 once the client left */
	uint32_t client_gen;
	uint32_t client_id;
	uint16_t kind; /* frame type that opened it */
	struct shim_route *next;
} shim_route;

typedef struct shim {
	al_config cfg;
	al_sandbox sb; /* from the spec it was started or claimed with */
	al_template_version tv; /* what the template asks of its sandboxes */
	const al_driver *driver;
	al_driver_handle h;
	char rootfs[AL_PATH_MAX];
	char sock_path[AL_PATH_MAX];
	char pid_path[AL_PATH_MAX];
	int listen_fd;
	int sig_fd;
	al_frame_reader agent_in;
	al_buf agent_out;
	shim_client clients[SHIM_MAX_CLIENTS];
	shim_route *routes;
	uint32_t next_agent_id;
	int started; /* driver->start succeeded: stop() is owed */
	int has_row; /* s->sb is a sandbox whose end this shim spools */
	int standby; /* warm pool entry waiting for a CLAIM */
	/* Disk limit the machine's own disk was grown for (a vm's guest
	 * filesystem): a standby takes no claim below it. */
	uint64_t grown_for;
	char slot[64]; /* standby name of the machine's resources */
	int destroy_client; /* client waiting for DESTROY, or -1 */
	uint32_t destroy_id;
	int stopping;
} shim;

/* Release everything the sandbox holds (agent, machine, rootfs, socket)
 * and spool the final event (core/spool.h). Safe to call more than
 * once. */
void shim_teardown(shim *s, al_event ev, const char *detail);

/* Turn this standby shim into the shim of the sandbox of the CLAIM's
 * payload (al_shim_spec_unpack, no boot): rename its resources, give the
 * machine the sandbox's identity (driver adopt: limits and hostname; a
 * vm also fresh entropy and clock), move the control socket; *result
 * is the RESULT to answer (al_shim_ready_pack, malloc'ed): the claimer
 * records the sandbox running. adopt is called only here, while a
 * standby has no request in flight on the agent channel: the vm driver
 * speaks to the agent synchronously on it. AL_DECLINED (err filled): a
 * spec that is malformed, for another template, version or driver, or
 * asks for a smaller disk than this standby's grown one; nothing
 * changed and the standby waits on. -1: the standby is half-turned and
 * the caller must end this shim (its end is spooled for the sandbox;
 * the claimer falls back to a cold start). */
int shim_claim(shim *s, const void *payload, size_t len, char **result,
	       al_err *err);

/* Run until the sandbox ends. Returns the process exit code. */
int shim_relay_run(shim *s);
/* Its parts, for driving the relay without the process (the fuzz
 * target): serve control connection fd (non-blocking; owned from now,
 * closed when the table is full: the slot or -1); one turn of the loop,
 * polling up to timeout_ms, 1 when the shim must end (*ev and detail
 * say why); and the end: tell the clients, tear down, free. */
int shim_relay_add_client(shim *s, int fd);
int shim_relay_turn(shim *s, int timeout_ms, al_event *ev, char *detail,
		    size_t dlen);
void shim_relay_finish(shim *s, al_event ev, const char *detail);
/* boot.c: the template's part in a sandbox's life. */
/* What the template's version asks (the spec's boot, taken over: *tv
 * is left empty) into s->tv; NULL: the defaults of a template without
 * version rows (/, root, no START/READY). */
void shim_template_set(shim *s, al_template_version *tv);
/* The rootfs to snapshot: s->tv's version, else the template's link. */
int shim_template_rootfs(shim *s, char *out, size_t outlen, al_err *err);
/* Start the template's START command and wait for its READY check. */
int shim_template_start(shim *s, al_err *err);
/* One `true` through the agent (a vm standby pays its first-exec cost). */
void shim_warm_up(shim *s);
/* req with the template's ENV under the sandbox's env under the
 * request's, and the template's WORKDIR and USER unless the request
 * names its own; packed, NULL on OOM (err). */
char *shim_exec_defaults(const shim *s, const al_exec_msg *req, al_err *err);

#endif
