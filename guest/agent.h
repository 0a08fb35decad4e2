/* airlock-agent internals: one event loop (agent.c), processes (exec.c),
 * files (file.c). Everything here runs in one thread. */
#ifndef AL_AGENT_H
#define AL_AGENT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"
#include "proto/agentproto.h"

/* Stop reading children's output, pending files and new requests while
 * this much is queued for the host: the host's pace sets ours. */
#define AGENT_OUT_HIGH ((size_t)4 << 20)
/* Hard cap of the host queue (al_buf max). Never reached while the
 * high-water mark above is honoured; reaching it means a bug. */
#define AGENT_OUT_MAX ((size_t)64 << 20)
/* Largest STDOUT/STDERR/FILE_DATA chunk sent. */
#define AGENT_CHUNK ((size_t)64 << 10)
/* Stdin bytes queued for one process before the agent stops taking
 * frames from the host (head-of-line backpressure). */
#define AGENT_STDIN_HIGH ((size_t)4 << 20)
/* Live requests (processes + file transfers) at once. */
#define AGENT_MAX_REQS 1024

enum agent_req_kind { REQ_PROC, REQ_FREAD, REQ_FWRITE };

typedef struct agent_req {
	struct agent_req *next;
	enum agent_req_kind kind;
	uint32_t id;

	/* REQ_PROC */
	pid_t pid;
	int out_fd; /* -1 once closed */
	int err_fd;
	int in_fd;
	al_buf inq;    /* stdin bytes not yet taken by the child */
	bool in_close; /* close stdin once inq is drained */
	bool reaped;
	int status;
	bool timed_out;
	int64_t deadline_ms; /* 0 = no timeout */
	pid_t reaper;	     /* kill_on_exit: the process reaped (reaper.c)
			      * in place of pid, its parent; 0 = none */

	/* REQ_FREAD, REQ_FWRITE */
	int fd;
	char *path; /* FWRITE: final path */
	char *tmp;  /* FWRITE: temp file renamed at FILE_END */
	uint64_t bytes;
} agent_req;

typedef struct agent {
	int chan;
	al_frame_reader rd;
	al_buf out;
	int sigfd;
	agent_req *reqs;
	unsigned nreqs;
	/* al_now_ms() of the host's PAUSE, 0 while running: the agent
	 * generates no frame and no deadline fires until its RESUME. */
	int64_t paused_at;
} agent;

/* Queue a frame for the host. The queue is bounded; overflowing it
 * means the loop's backpressure is broken, and the agent exits. */
void agent_send(agent *a, uint16_t type, uint32_t id, const void *p,
		size_t len);
void agent_send_json(agent *a, uint16_t type, uint32_t id, json_object *o);
void agent_send_error(agent *a, uint32_t id, al_code code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void agent_send_err(agent *a, uint32_t id, const al_err *err);
bool agent_out_full(const agent *a);

agent_req *agent_req_find(agent *a, uint32_t id);
/* NULL (and err filled) if the id is live or too many are live. */
agent_req *agent_req_new(agent *a, uint32_t id, enum agent_req_kind kind,
			 al_err *err);
void agent_req_remove(agent *a, agent_req *r);

/* Request payload helpers: one JSON object, fields checked. */
json_object *agent_parse_obj(const al_frame *f, al_err *err);
/* *out = NULL when absent and !required. Rejects embedded NULs. */
int agent_get_str(json_object *o, const char *key, bool required,
		  const char **out, al_err *err);
/* Absolute, NUL-free, shorter than PATH_MAX. */
int agent_check_path(const char *path, al_err *err);
al_code agent_code_from_errno(int e);

/* disk.c */
void agent_disk_grow(agent *a, const al_frame *f);

/* exec.c */
void agent_exec_start(agent *a, const al_frame *f);
void agent_exec_stdin(agent *a, const al_frame *f);
void agent_exec_signal(agent *a, const al_frame *f);
void agent_exec_reap(agent *a);
void agent_exec_pipe_ready(agent *a, agent_req *r, int which);
void agent_exec_stdin_ready(agent *a, agent_req *r);
/* Kill processes past their deadline; returns ms to the next one, -1. */
int agent_exec_timeouts(agent *a);
/* Move every deadline by ms (the time the agent was paused). */
void agent_exec_shift_deadlines(agent *a, int64_t ms);
/* Send EXIT for reaped processes and free them. */
void agent_exec_finish(agent *a);
void agent_exec_kill_all(agent *a);
void agent_exec_free(agent_req *r);
bool agent_exec_stdin_backlog(const agent *a);

/* reaper.c: in a child of the agent, run start(arg) (which must not
 * return) as the child of a subreaper that kills all it left once it
 * ends, then end the same way. The command's pid is written to sync_fd
 * first. Does not return. */
void agent_reaper_main(int sync_fd, void (*start)(void *), void *arg)
	__attribute__((noreturn));

/* file.c */
void agent_file_read(agent *a, const al_frame *f);
void agent_file_write(agent *a, const al_frame *f);
void agent_file_data(agent *a, const al_frame *f);
void agent_file_end(agent *a, const al_frame *f);
/* Host gave up on a transfer (ERROR on its id): stop a read, or drop a
 * write's partial file, without answering. false if f's id is not a
 * live transfer. */
bool agent_file_abort(agent *a, const al_frame *f);
void agent_file_list(agent *a, const al_frame *f);
/* Send the next chunk of pending reads; true if more remain. */
bool agent_file_pump(agent *a);
void agent_file_free(agent_req *r);

#endif
