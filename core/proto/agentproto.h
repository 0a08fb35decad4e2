/* agentproto: the one frame codec below fcgi.
 *
 * It carries fcgi worker <-> shim (control socket) and shim <-> agent
 * (unix socket for the jail, virtio-serial for the VM). Both ends treat
 * the other as hostile: every length is checked before use.
 *
 * Wire format, all integers big-endian:
 *
 *   u32 magic   'A','L','F','1'
 *   u16 type    enum al_frame_type
 *   u16 flags   0 (reserved, must be 0)
 *   u32 id      request id chosen by the host side; every frame that
 *               answers or streams for a request carries its id.
 *               id 0 is the session itself (HELLO).
 *   u32 len     payload length, <= AL_FRAME_MAX_PAYLOAD
 *   u8  payload[len]
 *
 * Payloads are either raw bytes (STDIN, STDOUT, STDERR, FILE_DATA) or one
 * JSON object (all others), documented per type below. */
#ifndef AL_AGENTPROTO_H
#define AL_AGENTPROTO_H

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

#include "base/clock.h"
#include "base/err.h"

#define AL_FRAME_MAGIC 0x414c4631u /* "ALF1" */
#define AL_FRAME_HDR_LEN 16
#define AL_FRAME_MAX_PAYLOAD (1u << 20)

enum al_frame_type {
	/* agent -> host, id 0, once after start:
	 * {"version":1,"pid":N} */
	AL_F_HELLO = 1,
	/* host -> agent: start a process.
	 * {"cmd":["sh","-c","..."],"env":{"K":"V"},"cwd":"/",
	 *  "timeout_ms":N (0 = none),"stdin":true|false}
	 * stdin false: the child's stdin is /dev/null. Optional
	 * "user":"name[:group]"|"uid[:gid]" (default root), resolved from
	 * the sandbox's /etc/passwd and /etc/group; unknown: ERROR
	 * invalid_request. Optional "kill_on_exit":true: when the process
	 * ends or its timeout fires, every process it started (setsid and
	 * daemons too) is killed before EXIT; absent or false, what it left
	 * running lives until the sandbox ends. */
	AL_F_EXEC = 2,
	/* agent -> host: {"pid":N} */
	AL_F_STARTED = 3,
	/* host -> agent: raw bytes for the process's stdin; len 0 = EOF. */
	AL_F_STDIN = 4,
	/* agent -> host: raw output chunks, sent as produced. */
	AL_F_STDOUT = 5,
	AL_F_STDERR = 6,
	/* agent -> host, last frame of an exec:
	 * {"exit_code":N} or {"signal":"SIGKILL","timed_out":true|false}
	 * sent after all STDOUT/STDERR of the process. */
	AL_F_EXIT = 7,
	/* host -> agent: {"signal":N} to the process group of request id. */
	AL_F_SIGNAL = 8,
	/* host -> agent: {"path":"/abs"}; answer: FILE_DATA* then FILE_END,
	 * or ERROR. */
	AL_F_FILE_READ = 9,
	/* raw chunk of file content (both directions). */
	AL_F_FILE_DATA = 10,
	/* end of file content, empty payload (both directions). */
	AL_F_FILE_END = 11,
	/* host -> agent: {"path":"/abs","mode":420}; then FILE_DATA* and
	 * FILE_END from host; parents are created; answer RESULT
	 * {"bytes":N} or ERROR. The content lands in a temporary file
	 * beside the path, fsynced and renamed over it after FILE_END:
	 * the path shows the old file or the whole new one, never a part.
	 * A channel that closes before FILE_END leaves nothing. */
	AL_F_FILE_WRITE = 12,
	/* host -> agent: {"path":"/abs"}; answer RESULT
	 * {"entries":[{"name":"x","type":"file|dir|symlink|other",
	 *   "size":N,"mode":N,"mtime":N}]} or ERROR. */
	AL_F_FILE_LIST = 13,
	/* answer to a request that has one result (JSON object). */
	AL_F_RESULT = 14,
	/* answer: {"code":"not_found","message":"..."}; code is an
	 * al_code_name(). Ends the request. From the host on a live
	 * FILE_WRITE it aborts the write: the partial file is removed, an
	 * existing file at the path is left as it was, and nothing is
	 * answered; on a live FILE_READ it stops the read, unanswered. */
	AL_F_ERROR = 15,

	/* Control frames between an fcgi worker and its sandbox's shim.
	 * The shim answers them itself and never relays them to the agent. */
	/* {} -> RESULT {"state":"running","driver":"ns","pid":N}; a vm
	 * adds "accel":"kvm"|"tcg". */
	AL_F_STATUS = 32,
	/* {} -> RESULT {} once the sandbox is torn down; the shim exits. */
	AL_F_DESTROY = 33,
	/* To a standby shim of the warm pool: the sandbox's spec
	 * (al_shim_spec_pack without boot) -> RESULT al_shim_ready_pack()
	 * {"pid":N,"accel":"kvm"|"tcg"|""} once the standby machine runs as
	 * that sandbox (the claimer records it running), or ERROR. Only the
	 * first claim of a standby succeeds. */
	AL_F_CLAIM = 34,
	/* host -> agent, vm only: give a restored machine its own identity
	 * {"hostname":"<sandbox id>","entropy":"<64 lowercase hex>",
	 *  "time_ms":N (unix ms)} -> RESULT {} once hostname, kernel RNG
	 * (reseeded and credited) and clock are set, or ERROR (forbidden
	 * where the agent lacks the privilege: the ns jail, whose driver
	 * never sends it). */
	AL_F_IDENTITY = 35,
	/* host -> agent, vm only: {"path":"/","bytes":N} -> RESULT {} once
	 * the filesystem mounted at path spans N bytes (its block device
	 * has grown to at least N, or ERROR after a few seconds of waiting
	 * for it), or ERROR; it only ever grows (online: ext4). */
	AL_F_DISK_GROW = 36,
	/* fcgi -> shim: start a process whose output nginx will carry
	 * {"exec":{EXEC},"lease":"<32 hex>","background":bool}; STDIN
	 * frames may follow on the same id. -> RESULT {"token":"<64 hex>"}
	 * once it runs (the one-time secret of the stream's URL), or ERROR.
	 * The process belongs to the stream from then on, not to this
	 * connection. */
	AL_F_STREAM_EXEC = 37,
	/* fcgi -> shim: {"leases":["<32 hex>",...]} (at most
	 * AL_STREAMS_MAX), optionally with "end":"<al_code_name>" and
	 * "message":"..." to end those streams with that error event.
	 * -> RESULT {"leases":[...]}: those of them still open (a token
	 * not used yet counts). */
	AL_F_STREAMS = 38,
	/* fcgi -> shim: replace the sandbox's network setting (PUT
	 * /v1/sandboxes/{id}/network): al_net_update_pack() (core/net/netspec.h)
	 * -> RESULT al_net_result_pack() once the gateway acknowledged it
	 * (or none runs), or ERROR (the gateway refused it, or gave no
	 * answer in time). */
	AL_F_NETWORK = 39,
	/* host -> shim, the one frame on a shim's stdin when it is started
	 * (a sealed memfd; never on a socket): the sandbox or standby it is
	 * to run, al_shim_spec_pack() (core/sandbox/shimspec.h). A CLAIM carries the
	 * same shape without "boot". */
	AL_F_START = 40,
	/* shim -> gateway on its control fd (6): al_gw_config_pack()
	 * (core/net/netspec.h), first at start and again on every network
	 * change. -> GW_ACK with the same id. */
	AL_F_GW_CONFIG = 41,
	/* gateway -> shim: al_gw_ack_pack() {"ok":true} or
	 * {"ok":false,"error":"..."}; answers the GW_CONFIG of its id. */
	AL_F_GW_ACK = 42,

	/* Pause and resume. fcgi -> shim: {} -> RESULT {} once the sandbox
	 * is paused (resident: vm vCPUs stopped, ns jail frozen) or running
	 * again. shim -> agent, before the machine stops and after it runs
	 * again: {} -> RESULT {}. After its PAUSE RESULT the agent writes
	 * nothing more to the channel (output waits in the pipes, exits and
	 * answers in its queue) and no command deadline fires, until a
	 * RESUME; then every deadline moves by the time it was paused on
	 * its own clock (a vm guest's clock stood still with it). The host
	 * sends nothing else between the two, so the channel is quiet and
	 * at a frame boundary while paused: a vm can be saved then and the
	 * agent resumed by another shim. */
	AL_F_PAUSE = 43,
	AL_F_RESUME = 44,
	/* fcgi -> shim: take the sandbox's snapshot and end it, durable:
	 * al_suspend_pack() -> RESULT al_suspend_result_pack() once the
	 * snapshot's directory is committed (the shim then releases the
	 * machine and exits), or ERROR with the sandbox as it was (running
	 * or paused) when it failed before that. */
	AL_F_SUSPEND = 45,
	/* fcgi -> shim: the same snapshot as SUSPEND (same messages), after
	 * which the sandbox goes on as it was (running, or paused). */
	AL_F_SNAPSHOT = 46,

	/* The credential channel (issue 11); payloads packed and unpacked in
	 * core/cred/credproto.h, which documents each. */
	AL_F_CRED_HELLO = 50,
	AL_F_CRED_SET = 51,
	AL_F_CRED_SET_ACK = 52,
	AL_F_CRED_TAKE = 53,
	AL_F_CRED_GRANT = 54,
	AL_F_CRED_USE = 55,
	AL_F_CRED_REFRESH = 56,
	AL_F_CRED_REFRESH_DONE = 57,
	/* gateway -> shim on fd 6: a fresh credential channel, please. */
	AL_F_GW_CREDCHAN_REQ = 59,
	/* shim -> gateway on fd 6: the answer, the fd by SCM_RIGHTS. */
	AL_F_GW_CREDCHAN = 60,

	AL_F_TYPE_MAX
};

/* Request ids with one owner each. A short client connection (fcgi
 * worker, builder, shimctl) sends its one request as AL_REQ_ID_CLIENT;
 * the shim's relay hands agent ids out from 1 upwards, far below the
 * ids the shim and the vm driver keep for their own requests to the
 * agent. BOOT_START stays live for the sandbox's life, so no other
 * request may ever take its id. */
#define AL_REQ_ID_CLIENT 1u
#define AL_REQ_ID_BOOT_START 0xffffffe0u
#define AL_REQ_ID_BOOT_WARM_UP 0xffffffe1u
#define AL_REQ_ID_BOOT_READY 0xffffffe2u
#define AL_REQ_ID_PAUSE 0xffffffe3u
#define AL_REQ_ID_RESUME 0xffffffe4u
#define AL_REQ_ID_VM_IDENTITY 0xfffffff0u
#define AL_REQ_ID_VM_DISK_GROW 0xfffffff1u

typedef struct al_frame {
	uint16_t type;
	uint16_t flags;
	uint32_t id;
	uint32_t len;
	uint8_t *payload; /* len bytes; NUL-terminated for convenience */
} al_frame;

/* Growable byte buffer with a hard cap, used to queue outgoing frames on
 * non-blocking fds and to accumulate incoming bytes. */
typedef struct al_buf {
	uint8_t *data;
	size_t len; /* bytes held */
	size_t off; /* bytes already consumed from the front */
	size_t cap; /* allocated */
	size_t max; /* hard limit on len - off; 0 = 64 MiB */
} al_buf;

void al_buf_init(al_buf *b, size_t max);
void al_buf_free(al_buf *b);
/* Append n bytes; -1 (AL_ETOOBIG / AL_ENOMEM) past max or on OOM. */
int al_buf_append(al_buf *b, const void *p, size_t n, al_err *err);
size_t al_buf_pending(const al_buf *b);
/* Write as much as the fd takes. 0 = all flushed, AL_AGAIN = some left
 * (fd would block), -1 = write error (peer gone). */
int al_buf_flush(al_buf *b, int fd, al_err *err);
/* The same, writing at most *max bytes (*max counts down): 0 once *max
 * is 0 or all is flushed. */
int al_buf_flush_max(al_buf *b, int fd, size_t *max, al_err *err);

/* Encode a frame into out (header + payload). */
int al_frame_encode(al_buf *out, uint16_t type, uint32_t id,
		    const void *payload, size_t len, al_err *err);

/* Incremental decoder over a stream of bytes. */
typedef struct al_frame_reader {
	al_buf in;
} al_frame_reader;

void al_frame_reader_init(al_frame_reader *r);
void al_frame_reader_free(al_frame_reader *r);
/* Feed bytes that arrived. */
int al_frame_reader_feed(al_frame_reader *r, const void *p, size_t n,
			 al_err *err);
/* Read once from a ready (or non-blocking) fd into the reader.
 * 1 = read bytes (or EAGAIN: nothing yet), 0 = EOF, -1 = error. */
int al_frame_reader_fill(al_frame_reader *r, int fd, al_err *err);
/* Take the next complete frame.
 * 1 = *f filled (caller frees with al_frame_free), 0 = need more bytes,
 * -1 = protocol violation (bad magic, flags != 0, oversized, unknown
 * type): the stream cannot be trusted any more and must be closed. */
int al_frame_next(al_frame_reader *r, al_frame *f, al_err *err);
void al_frame_free(al_frame *f);

/* Blocking helpers for simple clients (fcgi worker, tests).
 * al_frame_send writes the whole frame; al_frame_recv reads exactly one
 * frame, honouring deadline_ms (absolute CLOCK_MONOTONIC ms, 0 = none). */
int al_frame_send(int fd, uint16_t type, uint32_t id, const void *payload,
		  size_t len, al_err *err);
/* al_frame_send that gives up (AL_ETIMEDOUT) when the peer takes no
 * bytes until deadline_ms (absolute CLOCK_MONOTONIC ms, 0 = never): a
 * peer that pushes back stalls the sender, a stuck one fails it. */
int al_frame_send_until(int fd, uint16_t type, uint32_t id, const void *payload,
			size_t len, int64_t deadline_ms, al_err *err);
int al_frame_recv(int fd, al_frame_reader *r, al_frame *f, int64_t deadline_ms,
		  al_err *err);

/* ---- payloads: one pack and one unpack per message ----
 * Packs return a malloc'ed NUL-terminated JSON text (NULL + err on OOM);
 * unpacks check every field of bytes from a hostile peer. */

/* Longest path a file request carries (PATH_MAX with its NUL). */
#define AL_FILE_PATH_MAX 4096
#define AL_FILE_MODE_DEFAULT 0644

/* FILE_READ, FILE_LIST and FILE_WRITE requests. */
typedef struct al_file_req {
	char path[AL_FILE_PATH_MAX]; /* absolute, NUL-free */
	unsigned mode;		     /* FILE_WRITE: 0 to 07777 */
} al_file_req;

/* mode < 0 leaves it out (FILE_READ, FILE_LIST). */
char *al_file_req_pack(const char *path, int mode, al_err *err);
/* AL_EINVAL for a malformed object, AL_EPATH for a path that is not
 * absolute or too long; mode defaults to AL_FILE_MODE_DEFAULT. */
int al_file_req_unpack(const void *payload, size_t len, al_file_req *out,
		       al_err *err);

/* DISK_GROW: {"path":"/","bytes":N}, grow the filesystem mounted at path
 * to N bytes of its (already grown) block device. */
typedef struct al_disk_grow {
	char path[AL_FILE_PATH_MAX]; /* absolute, NUL-free */
	uint64_t bytes;		     /* > 0 */
} al_disk_grow;

char *al_disk_grow_pack(const char *path, uint64_t bytes, al_err *err);
/* AL_EINVAL for a malformed object or bytes not a positive integer,
 * AL_EPATH for a path that is not absolute or too long. */
int al_disk_grow_unpack(const void *payload, size_t len, al_disk_grow *out,
			al_err *err);

/* IDENTITY (vm): what a restored or claimed machine becomes. Unpack
 * checks the shape (known fields, types, lengths, time_ms a unix ms
 * before the year 10000); the agent checks each value's form before
 * it applies any. mac and net are optional ("" when absent; present,
 * neither may be empty, nor may any string); net is
 * the NIC's network in the GO line's form ("a.b.c.d/len,gateway" or
 * "none", guest/nic.h). */
typedef struct al_vm_identity {
	char hostname[64];
	char entropy[65]; /* 64 lowercase hex */
	int64_t time_ms;
	char mac[18];
	char net[40];
} al_vm_identity;

char *al_vm_identity_pack(const al_vm_identity *m, al_err *err);
int al_vm_identity_unpack(const void *payload, size_t len, al_vm_identity *out,
			  al_err *err);

/* EXEC request. Unpack fills the pointers into root, which it owns;
 * pack only reads them (root unused). */
#define AL_EXEC_ARGS_MAX 4096
#define AL_EXEC_ENV_MAX 4096
/* 100 days: long enough for anything, short enough not to overflow. */
#define AL_EXEC_TIMEOUT_MS_MAX ((int64_t)100 * 24 * 3600 * 1000)
typedef struct al_exec_msg {
	json_object *cmd;   /* 1 to AL_EXEC_ARGS_MAX NUL-free strings, the
			     * first one not empty */
	json_object *env;   /* NULL, or up to AL_EXEC_ENV_MAX NUL-free
			     * strings under names without '=' */
	const char *cwd;    /* NULL: the agent's default */
	const char *user;   /* NULL: root */
	int64_t timeout_ms; /* 0 = none, up to AL_EXEC_TIMEOUT_MS_MAX */
	int stdin_open;	    /* 0: the process's stdin is /dev/null */
	int kill_on_exit;   /* its descendants end with it */
	json_object *root;
} al_exec_msg;
char *al_exec_pack(const al_exec_msg *m, al_err *err);
/* AL_EINVAL for anything the limits above refuse. */
int al_exec_unpack(const void *payload, size_t len, al_exec_msg *out,
		   al_err *err);
void al_exec_msg_free(al_exec_msg *m);

/* EXIT: {"exit_code":N} or {"signal":"SIGKILL","timed_out":bool}. */
typedef struct al_exit_msg {
	int exit_code;	 /* 0 to 255; -1 when killed by a signal */
	char signal[17]; /* "" unless killed: "SIG" and [A-Z0-9] */
	int timed_out;	 /* killed for running past its timeout */
} al_exit_msg;
char *al_exit_pack(const al_exit_msg *m, al_err *err);
/* AL_EINVAL unless exactly one of a code in range or a well-formed
 * signal name is there. */
int al_exit_unpack(const void *payload, size_t len, al_exit_msg *out,
		   al_err *err);

/* STREAM_EXEC (see the frame type). A lease is fcgi's name for the
 * stream in the project's quota, a token the stream's URL secret. */
#define AL_STREAM_LEASE_LEN 32
#define AL_STREAM_TOKEN_LEN 64
#define AL_STREAMS_MAX 1024
typedef struct al_stream_exec_msg {
	al_exec_msg exec; /* owns the unpacked object */
	char lease[AL_STREAM_LEASE_LEN + 1];
	int background; /* the process outlives its stream */
} al_stream_exec_msg;
char *al_stream_exec_pack(const al_exec_msg *m, const char *lease,
			  int background, al_err *err);
/* AL_EINVAL for a bad exec (as al_exec_unpack) or lease. */
int al_stream_exec_unpack(const void *payload, size_t len,
			  al_stream_exec_msg *out, al_err *err);
void al_stream_exec_free(al_stream_exec_msg *m);
/* Its RESULT: {"token":"<64 lowercase hex>"}. */
char *al_stream_token_pack(const char *token, al_err *err);
int al_stream_token_unpack(const void *payload, size_t len,
			   char out[AL_STREAM_TOKEN_LEN + 1], al_err *err);
/* 1 if s is n lowercase hex digits and nothing else. */
int al_hex_id_valid(const char *s, size_t n);
/* n (even, <= 128) random lowercase hex digits from getrandom() into
 * out (n + 1 bytes). */
int al_hex_random(char *out, size_t n, al_err *err);

/* STREAMS request and its RESULT: a set of leases; end is AL_OK for
 * none (the RESULT never has one). */
typedef struct al_streams_msg {
	size_t n;
	char (*lease)[AL_STREAM_LEASE_LEN + 1]; /* n entries, malloc'ed */
	al_code end;
	char message[256];
} al_streams_msg;
char *al_streams_pack(char (*const lease)[AL_STREAM_LEASE_LEN + 1], size_t n,
		      al_code end, const char *message, al_err *err);
int al_streams_unpack(const void *payload, size_t len, al_streams_msg *out,
		      al_err *err);
void al_streams_msg_free(al_streams_msg *m);

/* SUSPEND: {"snapshot":"<id>","memory":bool}: the snapshot's id (its
 * directory, al_config_snapshot_dir) and whether the machine's memory
 * is to be kept (a driver without capture refuses true). Its RESULT:
 * {"bytes":N,"memory":bool}: what the snapshot holds. */
typedef struct al_suspend_msg {
	char snapshot[64];
	int memory;
	uint64_t bytes; /* RESULT only */
} al_suspend_msg;
char *al_suspend_pack(const al_suspend_msg *m, al_err *err);
int al_suspend_unpack(const void *payload, size_t len, al_suspend_msg *out,
		      al_err *err);
char *al_suspend_result_pack(const al_suspend_msg *m, al_err *err);
int al_suspend_result_unpack(const void *payload, size_t len,
			     al_suspend_msg *out, al_err *err);

/* RESULT of a FILE_WRITE: {"bytes":N}. */
char *al_file_result_pack(uint64_t bytes, al_err *err);

/* ERROR: {"code":"<al_code_name>","message":"..."}. */
char *al_error_pack(al_code code, const char *message, al_err *err);
/* Into out: the code (AL_EINTERNAL if unknown) and message; -1 (err)
 * when the payload is not such an object. */
int al_error_unpack(const void *payload, size_t len, al_err *out, al_err *err);

const char *al_frame_type_name(uint16_t type);

#endif
