/* log: one line per event on stderr: "time prog[pid] level: message".
 * Library code logs only through this (never stdout). Secrets never go
 * into a log line: callers pass ids and codes, not keys or env values. */
#ifndef AL_LOG_H
#define AL_LOG_H

enum al_log_level { AL_LOG_DEBUG, AL_LOG_INFO, AL_LOG_WARN, AL_LOG_ERROR };

/* Name shown in every line; set once by main. */
void al_log_init(const char *prog, enum al_log_level min_level);
void al_log(enum al_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define al_debug(...) al_log(AL_LOG_DEBUG, __VA_ARGS__)
#define al_info(...) al_log(AL_LOG_INFO, __VA_ARGS__)
#define al_warn(...) al_log(AL_LOG_WARN, __VA_ARGS__)
#define al_error(...) al_log(AL_LOG_ERROR, __VA_ARGS__)

#endif
