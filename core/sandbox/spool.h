/* spool: the transitions a shim makes on its own (its sandbox ended:
 * fail, delete), durable on the host until the controller has them in
 * PostgreSQL. The shim holds no database connection; a restart of
 * PostgreSQL or of the controller loses none of them.
 *
 *   run/events/<sandbox id>.<seq>   one event, JSON (al_spool_pack):
 *       {"id":"...","seq":N,"event":"fail","detail":"...","at_ms":N}
 *   run/events/.<id>.<seq>.tmp      being written (the shim writes it,
 *                                   fsyncs it, renames it, fsyncs the
 *                                   directory)
 *   run/events/bad/                 files that failed to parse, kept for
 *                                   the operator (and logged)
 *
 * seq orders a sandbox's events (unix microseconds when the shim wrote
 * it, strictly increasing within a shim). The controller reads the
 * directory (woken by inotify, and on every tick), applies the events in
 * (id, seq) order in one transaction per batch, and unlinks each file
 * only after the commit: the unlink is the acknowledgement. Applying an
 * event twice (a crash between commit and unlink) is harmless: the state
 * table rejects the second one (al_sandbox_record_events). */
#ifndef AL_SPOOL_H
#define AL_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "base/err.h"
#include "model/sandbox.h"
#include "model/sandbox_state.h"

/* A spool file is a few hundred bytes; anything bigger is not one. */
#define AL_SPOOL_FILE_MAX 4096

typedef struct al_spool_entry {
	al_sandbox_event e;
	uint64_t seq;
	char name[96]; /* file name in run/events */
} al_spool_entry;

/* The file's content for e (NUL-terminated, malloc'ed; NULL on OOM). */
char *al_spool_pack(const al_spool_entry *e, al_err *err);
/* Check file name (no directory) and content buf[0..len): the name is
 * <id>.<seq> and matches the content, the event is one a shim spools
 * (fail, delete), detail is UTF-8 under 256 bytes. -1 (AL_EINVAL)
 * otherwise; out is filled on success. */
int al_spool_parse(const char *name, const void *buf, size_t len,
		   al_spool_entry *out, al_err *err);

/* The shim: record that sandbox id went through ev (detail: why; any
 * bytes, made valid UTF-8 and cut to fit), durably, before it exits. */
int al_spool_write(const al_config *cfg, const char *id, al_event ev,
		   const char *detail, al_err *err);

/* The controller: an inotify fd that becomes readable when an event
 * file appears (the directory is created if missing); -1 (err) if the
 * kernel refuses one (then the tick's scan is all there is). */
int al_spool_watch(const al_config *cfg, al_err *err);
/* Read away what the watch fd has queued. */
void al_spool_watch_clear(int fd);
/* Up to max pending events into out, in (id, seq) order: how many, or
 * -1 (err) when the directory cannot be read. Files that do not parse
 * are moved to bad/ and logged; stale temporary files of a shim that
 * died mid-write are removed. */
int al_spool_read(const al_config *cfg, al_spool_entry *out, int max,
		  al_err *err);
/* The event is in PostgreSQL: remove its file. */
void al_spool_ack(const al_config *cfg, const al_spool_entry *e);
/* Move e's file to run/events/bad/ (logged with why): an event
 * PostgreSQL refuses on its own while the connection works would block
 * the spool for ever. */
void al_spool_reject(const al_config *cfg, const al_spool_entry *e,
		     const char *why);
/* 1 if an event of sandbox id waits in the spool. */
int al_spool_pending(const al_config *cfg, const char *id);

#endif
