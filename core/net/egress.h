/* egress: the gateway's decisions on their way to the egress log.
 *
 * The gateway (its own uid, no database) writes its decisions into files
 * the controller ingests into PostgreSQL (table egress_log) and unlinks:
 *
 *   run/egress/<sandbox>/           the sandbox's directory, 0700, owned by
 *                                   its gateway's uid (al_egress_dir_prepare:
 *                                   no gateway can write another's records)
 *   run/egress/<sandbox>/<seq>      one batch: JSON lines, al_egress_pack()
 *   run/egress/<sandbox>/.<seq>.tmp being written (then renamed)
 *   run/egress/bad/                 files the controller could not parse
 *
 * seq is a zero-padded decimal of 20 digits, increasing within a
 * sandbox's directory (unix µs at the writer's start, or past the
 * highest name still there if the clock went back; then +1 per file),
 * so names sort in write order and a name is never reused: the
 * controller records (sandbox, seq, line index) once, so a file read
 * again after a crash between its commit and its unlink adds nothing.
 *
 * One record, one line:
 *   {"at_ms":N,"sandbox":"<id>","allow":bool,"reason":"...",
 *    "protocol":"dns|http|https|tcp","name":"pypi.org","port":443,
 *    "method":"GET","path":"/simple/"}
 * method and path only for http(s) requests. A writer that had to drop
 * records writes, once there is room again, one record with "dropped":N
 * (allow false, reason "dropped", protocol "none", name "", port 0).
 *
 * What one sandbox can make the log hold is bounded by a token bucket
 * per writer (limits.rate records a second, limits.burst at once:
 * AIRLOCK_EGRESS_LOG_RATE and _BURST): a decision over it is enforced
 * as ever but not logged, only counted, and the writer's next file says
 * how many with one record like the one above but reason
 * AL_EGRESS_REASON_RATE. So a sandbox adds at most burst + rate * t
 * decision rows in t seconds, plus one count row per file. */
#ifndef AL_EGRESS_H
#define AL_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"
#include "policy/policy.h"

#define AL_EGRESS_PATH_MAX 1024 /* longer paths are cut */
#define AL_EGRESS_NAME_MAX 253	/* a DNS name */
#define AL_EGRESS_METHOD_MAX 16 /* an HTTP method token */
#define AL_EGRESS_LINE_MAX 2048 /* one packed record is shorter */
#define AL_EGRESS_BATCH_MAX 256 /* records per file */
#define AL_EGRESS_FLUSH_MS 250	/* a record waits at most this long */
#define AL_EGRESS_FILES_MAX 64	/* unconsumed files per sandbox */
/* 9999-12-31T23:59:59.999Z: what PostgreSQL and RFC 3339 both take. */
#define AL_EGRESS_AT_MS_MAX INT64_C(253402300799999)
#define AL_EGRESS_FILE_MAX (AL_EGRESS_BATCH_MAX * AL_EGRESS_LINE_MAX + 4096)
/* The reasons of the two count records. */
#define AL_EGRESS_REASON_DROPPED "dropped"
#define AL_EGRESS_REASON_RATE "over the log rate"
/* A protocol for the count records (not a policy protocol). */
#define AL_EGRESS_PROTO_NONE AL_EGRESS_PROTO_MAX

typedef struct al_egress_rec {
	int64_t at_ms; /* unix ms of the decision */
	char sandbox[64];
	bool allow;
	char reason[AL_POLICY_REASON_MAX];     /* printable ASCII */
	int protocol;			       /* enum al_egress_proto, or
						 * AL_EGRESS_PROTO_NONE */
	char name[AL_EGRESS_NAME_MAX + 1];     /* printable ASCII */
	unsigned port;			       /* 0..65535 */
	char method[AL_EGRESS_METHOD_MAX + 1]; /* "" when none */
	char path[AL_EGRESS_PATH_MAX + 1];     /* "" when none */
	uint64_t dropped;		       /* > 0: a dropped-count record */
	/* Where the reader found it (not in the line): its file's seq and
	 * its line's index there, the key that records it once however
	 * often the file is read (a crash before the unlink). */
	uint64_t seq;
	unsigned idx;
} al_egress_rec;

const char *al_egress_proto_name(int protocol);
/* -1 if unknown ("none" is AL_EGRESS_PROTO_NONE). */
int al_egress_proto_from_name(const char *name);

/* Fill r from what the gateway knows (strings may be NULL, any bytes:
 * non-printable ones become '?', overlong ones are cut). */
void al_egress_rec_set(al_egress_rec *r, int64_t at_ms, const char *sandbox,
		       bool allow, const char *reason,
		       enum al_egress_proto protocol, const char *name,
		       unsigned port, const char *method, const char *path);

/* One line (with its '\n') into out (AL_EGRESS_LINE_MAX bytes); its
 * length, or -1 (err) when r breaks the bounds above. */
int al_egress_pack(const al_egress_rec *r, char *out, size_t outlen,
		   al_err *err);
/* One line (without or with its '\n'); -1 (AL_EINVAL) unless every field
 * is there (method, path optional), within bounds, printable ASCII. */
int al_egress_unpack(const void *line, size_t len, al_egress_rec *out,
		     al_err *err);

/* ---- writer (the gateway) ---- */

typedef struct al_egress_writer al_egress_writer;

typedef struct al_egress_writer_limits {
	unsigned batch;	   /* records per file (<= AL_EGRESS_BATCH_MAX) */
	unsigned flush_ms; /* oldest buffered record's age that flushes */
	unsigned files;	   /* unconsumed files past which records drop */
	unsigned rate;	   /* records logged a second; 0: no bound */
	unsigned burst;	   /* and at once (>= 1 when rate is set) */
} al_egress_writer_limits;

/* The root shim (or launcher), before the gateway starts: make
 * <run_dir>/egress/<sandbox>/ owned by uid:gid, mode 0700 (an existing
 * one is re-owned). */
int al_egress_dir_prepare(const char *run_dir, const char *sandbox, uid_t uid,
			  gid_t gid, al_err *err);

/* Open sandbox's directory under <run_dir>/egress (created 0700 when it
 * is missing and the caller may). NULL limits: the defaults above and
 * AL_EGRESS_LOG_RATE_DEFAULT, _BURST_DEFAULT (config.h). */
al_egress_writer *al_egress_writer_open(const char *run_dir,
					const char *sandbox,
					const al_egress_writer_limits *limits,
					al_err *err);
/* Buffer r (its sandbox is set to the writer's); a full batch is flushed
 * at once. Never blocks for long and never fails the decision: a record
 * over the rate is counted as suppressed, one that finds no room as
 * dropped. */
void al_egress_writer_add(al_egress_writer *w, const al_egress_rec *r,
			  int64_t now_ms);
/* Flush when the oldest buffered record is flush_ms old (or force):
 * 1 = wrote a file, 0 = nothing due, -1 = write failed (records kept
 * for the next try while there is room, err says why). now_ms is
 * CLOCK_MONOTONIC ms (al_now_ms). */
int al_egress_writer_flush(al_egress_writer *w, int64_t now_ms, bool force,
			   al_err *err);
/* CLOCK_MONOTONIC ms when the next flush is due, or -1 if nothing is
 * buffered (for the caller's timer). */
int64_t al_egress_writer_due(const al_egress_writer *w);
/* Records dropped since open (the log shows them as dropped records). */
uint64_t al_egress_writer_dropped(const al_egress_writer *w);
/* Records over the rate since open (not logged, counted the same way). */
uint64_t al_egress_writer_suppressed(const al_egress_writer *w);
/* Flush what is left (force) and free. */
void al_egress_writer_close(al_egress_writer *w);

/* ---- reader (the controller) ---- */

/* What one read took: records of whole files, and the files to unlink
 * once the records are in PostgreSQL. */
typedef struct al_egress_batch {
	al_egress_rec *recs;
	size_t n, cap;
	char (*files)[128]; /* "<sandbox>/<seq>" under run/egress */
	size_t *file_end;   /* file i's records end at recs[file_end[i]] */
	size_t n_files, cap_files, cap_ends;
	/* Sandbox directories found empty ("<sandbox>"): the controller
	 * removes those whose sandbox is gone. */
	char (*empty)[64];
	size_t n_empty, cap_empty;
} al_egress_batch;

/* Whole files' records, oldest file of each sandbox first, until about
 * max_records (a file is never split): how many files were taken, or -1
 * (err) when run/egress cannot be read. A file that is not a regular
 * file of the directory's owner, is too big, or has a line that does
 * not unpack (or names another sandbox) is moved to run/egress/bad/ and
 * logged; stale temporary files (a gateway that died mid-write) are
 * removed. */
int al_egress_read(const char *run_dir, size_t max_records, al_egress_batch *b,
		   al_err *err);
/* The batch's records are committed: unlink its files. */
void al_egress_ack(const char *run_dir, const al_egress_batch *b);
/* File i of the batch: its records (*first, *n) ... */
void al_egress_batch_file(const al_egress_batch *b, size_t i, size_t *first,
			  size_t *n);
/* ... are in: unlink it; or PostgreSQL refuses them on their own: move
 * it to bad/ (logged with why). */
void al_egress_ack_file(const char *run_dir, const al_egress_batch *b,
			size_t i);
void al_egress_reject_file(const char *run_dir, const al_egress_batch *b,
			   size_t i, const char *why);
/* Put back to empty (keeping the allocations) / free. */
void al_egress_batch_reset(al_egress_batch *b);
void al_egress_batch_free(al_egress_batch *b);
/* How many of sandbox's files wait for the controller (0 also when its
 * directory is gone): a writer that exited is ingested when this is 0. */
int al_egress_pending(const char *run_dir, const char *sandbox);
/* Remove the (empty) directory of sandbox; 0, or -1 when it is not
 * empty or gone. */
int al_egress_dir_remove(const char *run_dir, const char *sandbox);

#endif
