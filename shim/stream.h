/* shim stream: the streams nginx carries. */
#ifndef AL_SHIM_STREAM_H
#define AL_SHIM_STREAM_H

#include <poll.h>
#include <stdint.h>

#include "proto/agentproto.h"
#include "shim.h"

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

#endif
