/* airlock-shim: the per-sandbox supervisor. main.c brings the sandbox up
 * (snapshot, driver start, agent HELLO, control socket) and down again;
 * relay.c is the event loop between fcgi clients and the agent. */
#ifndef AL_SHIM_H
#define AL_SHIM_H

#include <poll.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "base/config.h"
#include "base/ratebucket.h"
#include "driver.h"
#include "gateway.h"
#include "model/sandbox.h"
#include "model/template.h"
#include "net.h"
#include "proto/agentproto.h"
#include "proto/sse.h"
#include "proto/streamhttp.h"

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

/* Streams nginx carries (stream.c): a process started by STREAM_EXEC
 * writes its events into its stream's queue; nginx connects to the
 * stream socket with the stream's one-time token and takes them. A slow
 * reader pauses the agent channel (as a slow client does) once its
 * queue holds SHIM_STREAM_QUEUE_HIGH: output is never dropped. */
#define SHIM_MAX_STREAMS 512
/* nginx connections that have not sent their request head yet. */
#define SHIM_MAX_HTTP_PENDING 64
#define SHIM_STREAM_QUEUE_HIGH (256u << 10)
/* Past HIGH by at most one agent frame (1 MiB, up to 6x as escaped
 * JSON); a stream past this is ended. */
#define SHIM_STREAM_QUEUE_MAX (16u << 20)
/* A token nobody used by then expires; its process is killed. */
#define SHIM_STREAM_TOKEN_MS 5000
#define SHIM_STREAM_KEEPALIVE_MS 15000
#define SHIM_HTTP_HEAD_MS 5000

typedef struct shim_stream {
	int used;
	int fd; /* nginx's connection, -1 until it presents the token */
	char token[AL_STREAM_TOKEN_LEN + 1]; /* "" once used */
	char lease[AL_STREAM_LEASE_LEN + 1];
	int background;	   /* the process outlives the stream */
	uint32_t agent_id; /* its process on the agent; 0 once it exited */
	int64_t t0_ms, expires_ms, last_write_ms;
	al_buf out; /* the HTTP head and events not written yet */
	al_sse_text text;
	int done; /* the last event is queued: close once it is out */
} shim_stream;

typedef struct shim_client {
	int fd;	      /* -1 = free slot */
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
	/* STREAM_EXEC: the stream slot once the process runs, else -1. */
	int stream;
	char lease[AL_STREAM_LEASE_LEN + 1];
	int background;
	struct shim_route *next;
} shim_route;

/* The control channel to the sandbox's gateway (netctl.c). */
#define SHIM_GW_ACK_MS 3000	     /* a GW_CONFIG unanswered by then fails */
#define SHIM_GW_QUEUE_MAX (4u << 20) /* bytes queued toward the gateway */
/* Credential channels a gateway may ask for (GW_CREDCHAN_REQ). */
#define SHIM_GW_CREDCHAN_BURST 5
#define SHIM_GW_CREDCHAN_RATE 1
typedef struct shim_gwctl {
	int fd;	       /* the shim's end of the gateway's fd 6; -1: none */
	char addr[16]; /* the gateway's address in the slot */
	int build;     /* the egress of a template build */
	al_frame_reader in;
	al_buf out;
	uint32_t next_id;
	uint32_t wait_id; /* the GW_CONFIG waiting for its ACK; 0: none */
	int64_t wait_deadline_ms;
	/* Who asked for it: a client's NETWORK (client >= 0), or the shim
	 * itself (the first config, client -1). */
	int client;
	uint32_t client_gen, client_id;
	json_object *pending;	     /* the network object it carries */
	al_ratebucket credchan_rate; /* GW_CREDCHAN_REQs answered */
} shim_gwctl;

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
	char slot[64];	    /* standby name of the machine's resources */
	shim_net net;	    /* its network slot (net.h) */
	shim_gwproc gwproc; /* its egress gateway process (gateway.h) */
	/* The stream socket and its tables, made at the first stream. */
	shim_stream *streams;
	al_streamhttp_conn *http;
	int http_fd;
	char http_path[AL_PATH_MAX];
	shim_gwctl gw;
	int destroy_client; /* client waiting for DESTROY, or -1 */
	uint32_t destroy_id;
	int stopping;
} shim;

/* Release everything the sandbox holds (agent, machine, rootfs, socket)
 * and spool the final event (core/sandbox/spool.h). Safe to call more than
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
/* relay.c, for stream.c: the route of agent request id, and a signal to
 * its process. */
shim_route *shim_route_find(shim *s, uint32_t agent_id);
void shim_relay_kill(shim *s, uint32_t agent_id);

/* relay.c, for netctl.c: answer request id of client i (dropped when
 * its queue is full), if it is still the client of generation gen. */
void shim_client_reply(shim *s, int i, uint32_t gen, uint16_t type, uint32_t id,
		       const void *p, size_t n);
void shim_client_error(shim *s, int i, uint32_t gen, uint32_t id, al_code code,
		       const char *msg);
uint32_t shim_client_gen(const shim *s, int i);

/* netctl.c: the sandbox's network setting (s->sb.network) and its
 * gateway's control channel. Whoever launches the gateway hands the
 * shim's end of its fd 6 to shim_netctl_attach (taken over, non-
 * blocking), which sends the first GW_CONFIG at once; a gateway that
 * ends is shim_netctl_detach'ed. NETWORK from a client goes to the
 * gateway as a GW_CONFIG and is answered after its GW_ACK. Without a
 * gateway a change to mode none is only recorded; any other is refused
 * (AL_ESTATE): the sandbox has no way out to let anything through. A
 * gateway that refuses its first config, breaks the protocol or does not
 * answer within SHIM_GW_ACK_MS is detached: its control fd closes, on
 * which it must exit (and the supervisor sees it go). A GW_CREDCHAN_REQ
 * is answered with a fresh credential channel (core/cred/credclient.h) passed
 * by SCM_RIGHTS, at most SHIM_GW_CREDCHAN_BURST at once and
 * SHIM_GW_CREDCHAN_RATE a second; otherwise {"ok":false}. */
#define SHIM_WHO_GW (-5)
void shim_netctl_init(shim *s);
int shim_netctl_attach(shim *s, int fd, const char *gateway_addr, int build,
		       al_err *err);
void shim_netctl_detach(shim *s, const char *why);
/* 1 while a gateway is attached. */
int shim_netctl_attached(const shim *s);
void shim_netctl_request(shim *s, int client, const al_frame *f);
int shim_netctl_poll(shim *s, struct pollfd *pfd, int *who, int n);
void shim_netctl_event(shim *s, short revents);
/* ms until the pending ACK times out, or -1. */
int shim_netctl_timeout(const shim *s, int64_t now);
void shim_netctl_tick(shim *s, int64_t now);

/* stream.c */
/* Make stream slot for route r, whose process runs as pid: listening
 * on the stream socket if not yet, token in the slot; the slot or -1. */
int shim_stream_begin(shim *s, shim_route *r, int64_t pid, al_err *err);
/* A frame from the agent for stream i's process (STDOUT, STDERR, EXIT,
 * ERROR). */
void shim_stream_frame(shim *s, int i, const al_frame *f);
/* Streams open or starting: the slots in use plus routes that wait for
 * their process to start. */
int shim_streams_open(const shim *s);
/* STREAMS: the RESULT for m (ending the streams first when m says so);
 * NULL on OOM. */
char *shim_streams_answer(shim *s, const al_streams_msg *m, al_err *err);
/* The poll loop's part: fds to watch from pfd[n] on (who[] gets
 * SHIM_WHO_* values), what to do with their events, the ms until the next
 * timer (or -1), the timers, writes, and whether any queue is behind. */
#define SHIM_WHO_HTTP_LISTEN (-4)
#define SHIM_WHO_STREAM 0x10000
#define SHIM_WHO_HTTP 0x20000
#define SHIM_STREAM_POLL_MAX (1 + SHIM_MAX_STREAMS + SHIM_MAX_HTTP_PENDING)
int shim_streams_poll(shim *s, struct pollfd *pfd, int *who, int n);
void shim_streams_event(shim *s, int who, short revents);
int shim_streams_timeout(const shim *s, int64_t now);
void shim_streams_tick(shim *s, int64_t now);
void shim_streams_flush(shim *s);
int shim_streams_behind(const shim *s);
/* The sandbox ends: every stream gets an error event (best effort), the
 * socket goes. */
void shim_streams_finish(shim *s);

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
