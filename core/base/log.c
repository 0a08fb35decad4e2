#include "base/log.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 2048
/* Below this a cap would rotate on every line. */
#define CAP_MIN (16u * LINE_MAX_BYTES)

static char log_prog[32] = "airlock";
static enum al_log_level log_min = AL_LOG_INFO;

/* Both bounds are shared by the threads of a process (fcgi workers). */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

/* Tokens in thousandths of a line, so that slow rates refill smoothly. */
static struct {
	uint64_t burst_milli;
	uint64_t per_sec;
	uint64_t milli;
	int64_t last_ms;
	uint64_t suppressed;
} bucket;

static struct {
	char path[PATH_MAX];
	uint64_t cap;
} sink;

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The file stderr is, when it is a regular file we append to. */
static void cap_stderr_file(void)
{
	int fl = fcntl(STDERR_FILENO, F_GETFL);
	struct stat fst, pst;
	if (fl < 0 || !(fl & O_APPEND) || fstat(STDERR_FILENO, &fst) < 0 ||
	    !S_ISREG(fst.st_mode))
		return;
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/fd/2", path, sizeof path - 1);
	if (n <= 0)
		return;
	path[n] = '\0';
	if (stat(path, &pst) < 0 || pst.st_ino != fst.st_ino ||
	    pst.st_dev != fst.st_dev)
		return;
	al_log_cap(path, AL_LOG_CAP_DEFAULT);
}

void al_log_init(const char *prog, enum al_log_level min_level)
{
	snprintf(log_prog, sizeof log_prog, "%s", prog);
	log_min = min_level;
	cap_stderr_file();
}

void al_log_limit(unsigned burst, unsigned per_sec)
{
	pthread_mutex_lock(&log_mu);
	bucket.burst_milli = (uint64_t)burst * 1000;
	bucket.per_sec = per_sec;
	bucket.milli = bucket.burst_milli;
	bucket.last_ms = mono_ms();
	pthread_mutex_unlock(&log_mu);
}

void al_log_cap(const char *path, uint64_t cap)
{
	pthread_mutex_lock(&log_mu);
	sink.cap = 0;
	if (path != NULL && cap != 0 && strlen(path) < sizeof sink.path) {
		snprintf(sink.path, sizeof sink.path, "%s", path);
		sink.cap = cap < CAP_MIN ? CAP_MIN : cap;
	}
	pthread_mutex_unlock(&log_mu);
}

/* 1 if a line may go out now. Called with log_mu held. */
static int bucket_take(void)
{
	if (bucket.burst_milli == 0)
		return 1;
	int64_t now = mono_ms();
	uint64_t dt = now > bucket.last_ms ? (uint64_t)(now - bucket.last_ms)
					   : 0;
	bucket.last_ms = now;
	bucket.milli += dt * bucket.per_sec;
	if (bucket.milli > bucket.burst_milli)
		bucket.milli = bucket.burst_milli;
	if (bucket.milli < 1000) {
		bucket.suppressed++;
		return 0;
	}
	bucket.milli -= 1000;
	return 1;
}

/* The capped file's lock, held around each check-and-append so that
 * writers in several processes (every shim appends to one shim.log)
 * cannot all see room for one more line and together pass the cap, nor
 * append to a file another has just rotated away. -1 without a cap. */
static int sink_lock(void)
{
	if (sink.cap == 0)
		return -1;
	char lock[sizeof sink.path + 8];
	snprintf(lock, sizeof lock, "%s.lock", sink.path);
	/* Opened per line: a descriptor inherited across fork() would share
	 * its lock with the parent instead of excluding it. */
	int lfd = open(lock, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lfd >= 0)
		flock(lfd, LOCK_EX);
	return lfd;
}

/* Rotate or reopen the capped file so that len more bytes fit. Called
 * with log_mu and the sink's lock held. */
static void sink_prepare(size_t len)
{
	if (sink.cap == 0)
		return;
	struct stat fst, pst;
	if (fstat(STDERR_FILENO, &fst) < 0)
		return;
	int same = stat(sink.path, &pst) == 0 && pst.st_ino == fst.st_ino &&
		   pst.st_dev == fst.st_dev;
	if (same && (uint64_t)fst.st_size + len <= sink.cap)
		return;
	char old[sizeof sink.path + 8];
	snprintf(old, sizeof old, "%s.1", sink.path);
	/* Another writer may have rotated since this one opened the file:
	 * only a file still past the cap moves. */
	if (same && S_ISREG(pst.st_mode))
		rename(sink.path, old);
	int fd = open(sink.path,
		      O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
		      0640);
	if (fd >= 0) {
		dup2(fd, STDERR_FILENO);
		close(fd);
	}
}

static size_t format_line(char *line, size_t size, enum al_log_level level,
			  const char *fmt, va_list ap)
{
	static const char *names[] = {"debug", "info", "warn", "error"};
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, size,
			 "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s[%d] %s: ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
			 tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
			 log_prog, (int)getpid(), names[level]);
	if (n > 0 && (size_t)n < size)
		vsnprintf(line + n, size - (size_t)n, fmt, ap);
	/* Keep one event on one line, whatever the message held. */
	size_t len = strnlen(line, size - 2);
	for (size_t i = 0; i < len; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	line[len] = '\n';
	return len + 1;
}

static void emit(const char *line, size_t len)
{
	int lfd = sink_lock();
	sink_prepare(len);
	/* One write so lines from concurrent processes do not interleave. */
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
	if (lfd >= 0)
		close(lfd);
}

static void emit_fmt(enum al_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void emit_fmt(enum al_log_level level, const char *fmt, ...)
{
	char line[LINE_MAX_BYTES];
	va_list ap;
	va_start(ap, fmt);
	size_t len = format_line(line, sizeof line, level, fmt, ap);
	va_end(ap);
	emit(line, len);
}

/* Called with log_mu held. */
static void emit_suppressed(void)
{
	if (bucket.suppressed == 0)
		return;
	emit_fmt(AL_LOG_WARN, "%llu log lines suppressed (rate limit)",
		 (unsigned long long)bucket.suppressed);
	bucket.suppressed = 0;
}

void al_log_flush(void)
{
	pthread_mutex_lock(&log_mu);
	emit_suppressed();
	pthread_mutex_unlock(&log_mu);
}

void al_log(enum al_log_level level, const char *fmt, ...)
{
	if (level < log_min)
		return;
	char line[LINE_MAX_BYTES];
	va_list ap;
	va_start(ap, fmt);
	size_t len = format_line(line, sizeof line, level, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&log_mu);
	if (bucket_take()) {
		emit_suppressed();
		emit(line, len);
	}
	pthread_mutex_unlock(&log_mu);
}
