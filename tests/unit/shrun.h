/* run(): a shell command line, printf-style, for the unit tests that
 * set up what they test with the host's tools (mkfs, mount, cp). */
#ifndef AL_TEST_SHRUN_H
#define AL_TEST_SHRUN_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	return system(cmd);
}

#endif
