/* A PostgreSQL cluster of the test's own in a temp dir, for the tests
 * of what core does with its rows: pg_scratch_start() runs initdb and
 * the server (as the postgres user, on a unix socket only, trust
 * authentication: the directory is root's and postgres'), NEED_PG()
 * skips a test, saying why, where it could not. Needs root and the
 * PostgreSQL server package (make deps). */
#ifndef AL_TEST_PG_SCRATCH_H
#define AL_TEST_PG_SCRATCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shrun.h"

static char pg_dir[] = "/tmp/al-pg-XXXXXX";
static char pg_bin[128];
static char pg_conninfo[256];
static int pg_up;
static int pg_made_dir;
static const char *pg_why_skip = "not set up";

/* 0 with pg_conninfo set, or 0 with pg_why_skip set (NEED_PG skips);
 * -1 only when the temp dir cannot be made. */
static int pg_scratch_start(void)
{
	if (geteuid() != 0) {
		pg_why_skip = "needs root";
		return 0;
	}
	FILE *p = popen("ls -d /usr/lib/postgresql/*/bin 2>/dev/null | "
			"sort -V | tail -n 1",
			"r");
	if (p == NULL)
		return -1;
	if (fgets(pg_bin, sizeof pg_bin, p) == NULL)
		pg_bin[0] = '\0';
	pclose(p);
	pg_bin[strcspn(pg_bin, "\n")] = '\0';
	if (pg_bin[0] == '\0' || run("id postgres >/dev/null 2>&1") != 0) {
		pg_why_skip = "PostgreSQL server not installed (make deps)";
		return 0;
	}
	if (mkdtemp(pg_dir) == NULL)
		return -1;
	pg_made_dir = 1;
	/* postgres passes through to its own data and socket dirs. */
	if (chmod(pg_dir, 0711) < 0 || run("mkdir -m 0700 %s/data %s/sock && "
					   "chown postgres: %s/data %s/sock",
					   pg_dir, pg_dir, pg_dir, pg_dir) != 0)
		return -1;
	if (run("cd / && runuser -u postgres -- %s/initdb -D %s/data "
		"-U airlock --auth=trust --no-locale -E UTF8 >%s/initdb.log "
		"2>&1",
		pg_bin, pg_dir, pg_dir) != 0) {
		pg_why_skip = "initdb failed";
		return 0;
	}
	if (run("cd / && runuser -u postgres -- %s/pg_ctl -D %s/data "
		"-l %s/data/pg.log -w -t 60 -s "
		"-o \"-k %s/sock -c listen_addresses=''\" start >/dev/null "
		"2>&1",
		pg_bin, pg_dir, pg_dir, pg_dir) != 0) {
		pg_why_skip = "PostgreSQL did not start";
		return 0;
	}
	pg_up = 1;
	snprintf(pg_conninfo, sizeof pg_conninfo,
		 "host=%s/sock dbname=postgres user=airlock", pg_dir);
	return 0;
}

static void pg_scratch_stop(void)
{
	if (pg_up)
		run("cd / && runuser -u postgres -- %s/pg_ctl -D %s/data "
		    "-m immediate -w -s stop >/dev/null 2>&1",
		    pg_bin, pg_dir);
	if (pg_made_dir)
		run("rm -rf %s", pg_dir);
}

#define NEED_PG()                                                              \
	do {                                                                   \
		if (!pg_up) {                                                  \
			print_message("skip: %s\n", pg_why_skip);              \
			skip();                                                \
		}                                                              \
	} while (0)

#endif
