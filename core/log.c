#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char log_prog[32] = "airlock";
static enum al_log_level log_min = AL_LOG_INFO;

void al_log_init(const char *prog, enum al_log_level min_level)
{
	snprintf(log_prog, sizeof log_prog, "%s", prog);
	log_min = min_level;
}

void al_log(enum al_log_level level, const char *fmt, ...)
{
	static const char *names[] = {"debug", "info", "warn", "error"};
	if (level < log_min)
		return;
	char line[2048];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof line,
			 "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s[%d] %s: ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
			 tm.tm_hour, tm.tm_min, tm.tm_sec,
			 ts.tv_nsec / 1000000, log_prog, (int)getpid(),
			 names[level]);
	va_list ap;
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof line)
		vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	va_end(ap);
	/* Keep one event on one line, whatever the message held. */
	size_t len = strnlen(line, sizeof line - 2);
	for (size_t i = 0; i < len; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	line[len] = '\n';
	/* One write so lines from concurrent processes do not interleave. */
	ssize_t w = write(STDERR_FILENO, line, len + 1);
	(void)w;
}
