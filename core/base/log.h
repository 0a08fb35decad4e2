/* log: one line per event on stderr: "time prog[pid] level: message".
 * Library code logs only through this (never stdout). Secrets never go
 * into a log line: callers pass ids and codes, not keys or env values.
 *
 * A hostile sandbox must not be able to fill the host's disk through a
 * log, so two bounds apply to every line of a process:
 *  - a token bucket (al_log_limit): lines past it are counted, not
 *    written, and the next line that passes is preceded by one
 *    "N lines suppressed" line. A shim serves one sandbox, so its bucket
 *    is that sandbox's.
 *  - a size cap on the file that stderr is (al_log_cap): when it passes
 *    the cap it is renamed to <file>.1 (replacing the last one) and a new
 *    one is opened onto fd 2. Many processes append to one file (all
 *    shims share log/shim.log, all with O_APPEND): the writer that sees
 *    it past the cap rotates it under a lock on <file>.lock, and every
 *    writer whose fd 2 is no longer the file at that path reopens it. One
 *    file and its .1 together stay under twice the cap plus a line. */
#ifndef AL_LOG_H
#define AL_LOG_H

#include <stdint.h>

enum al_log_level { AL_LOG_DEBUG, AL_LOG_INFO, AL_LOG_WARN, AL_LOG_ERROR };

/* Default cap of a log file (al_log_init applies it to a stderr that is
 * a regular file opened for appending). */
#define AL_LOG_CAP_DEFAULT (2u << 20)
/* The limit of a process that serves one sandbox or build (shim,
 * builder): its guest can provoke lines (bad frames, session errors), so
 * bursts of 200 lines and 10 a second after, whatever it does. */
#define AL_LOG_SANDBOX_BURST 200
#define AL_LOG_SANDBOX_PER_SEC 10

/* Name shown in every line; set once by main. When stderr is a regular
 * file opened O_APPEND it gets the default cap (al_log_cap). */
void al_log_init(const char *prog, enum al_log_level min_level);
/* Allow bursts of `burst` lines and `per_sec` lines a second after; 0, 0
 * lifts the limit. */
void al_log_limit(unsigned burst, unsigned per_sec);
/* Cap stderr, the file at path, at cap bytes (0: no cap). */
void al_log_cap(const char *path, uint64_t cap);
/* Write the "N lines suppressed" line now if lines are pending (before
 * exiting). */
void al_log_flush(void);
void al_log(enum al_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define al_debug(...) al_log(AL_LOG_DEBUG, __VA_ARGS__)
#define al_info(...) al_log(AL_LOG_INFO, __VA_ARGS__)
#define al_warn(...) al_log(AL_LOG_WARN, __VA_ARGS__)
#define al_error(...) al_log(AL_LOG_ERROR, __VA_ARGS__)

#endif
