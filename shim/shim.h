/* airlock-shim: the per-sandbox supervisor, and the state its modules
 * share. life.c brings the sandbox up (snapshot, driver start, agent
 * HELLO, control socket), turns a standby into a sandbox and brings it
 * down again; relay.c is the event loop between fcgi clients and the
 * agent, over route.c's tables; netctl.c speaks to the sandbox's
 * gateway (gateway.c runs it), stream.c serves nginx's streams, boot.c
 * applies the template; main.c reads the spec and runs the rest. */
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

/* Pause and resume (lifecycle.c): where the sandbox is, and the client
 * waiting for a pause to finish. */
#define SHIM_PAUSE_MS 5000 /* the agent's PAUSE answer, at most */
typedef enum shim_phase {
	SHIM_RUNNING,
	SHIM_PAUSING, /* PAUSE sent to the agent, its answer awaited */
	SHIM_PAUSED,
	/* A suspend's PAUSE sent to the agent (the channel to it held
	 * after that frame), its answer awaited. */
	SHIM_SUSPENDING,
} shim_phase;
typedef struct shim_pause {
	shim_phase phase;
	int client; /* waiting for the pause or suspend, or -1 */
	uint32_t client_gen, client_id;
	int64_t deadline_ms;
	/* The suspend under way: its snapshot, whether it keeps memory,
	 * and whether the sandbox was paused before (it stays so if the
	 * suspend fails). */
	char snapshot[64];
	int memory, was_paused;
	int end; /* SUSPEND: the shim ends after; SNAPSHOT: it goes on */
	/* Set once the snapshot is committed: the shim ends, its sandbox
	 * suspended (nothing is spooled: fcgi records it). */
	int suspended;
	/* The agent channel is held: at most hold_left more bytes of
	 * agent_out are written (up to the end of the suspend's PAUSE), so
	 * nothing reaches the agent after it went quiet. */
	int holding;
	size_t hold_left;
} shim_pause;

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
	int started;	  /* driver->start succeeded: stop() is owed */
	int has_row;	  /* s->sb is a sandbox whose end this shim spools */
	int standby;	  /* warm pool entry waiting for a CLAIM */
	int resumed_cold; /* resumed from a snapshot without its memory */
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
	shim_pause pause;
	int destroy_client; /* client waiting for DESTROY, or -1 */
	uint32_t destroy_id;
	int stopping;
} shim;

#endif
