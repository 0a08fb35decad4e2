/* The spool (core/sandbox/spool.h): what a shim writes is what the controller
 * reads, in (sandbox, seq) order; a file that is not an event is moved
 * to bad/ and never applied; an acknowledged event is gone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/sandbox_state.h"
#include "sandbox/spool.h"

static al_config cfg;

static int setup(void **state)
{
	(void)state;
	char tmpl[] = "/tmp/al-spool-XXXXXX";
	if (mkdtemp(tmpl) == NULL)
		return -1;
	memset(&cfg, 0, sizeof cfg);
	snprintf(cfg.run_dir, sizeof cfg.run_dir, "%s", tmpl);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[AL_PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", cfg.run_dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void put_file(const char *name, const char *content)
{
	char p[AL_PATH_MAX + 128];
	snprintf(p, sizeof p, "%s/events", cfg.run_dir);
	mkdir(p, 0700);
	snprintf(p, sizeof p, "%s/events/%s", cfg.run_dir, name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

static int exists(const char *rel)
{
	char p[AL_PATH_MAX + 128];
	snprintf(p, sizeof p, "%s/events/%s", cfg.run_dir, rel);
	return access(p, F_OK) == 0;
}

static void test_write_read_ack(void **state)
{
	(void)state;
	al_err err = {0};
	/* A second event of the same sandbox sorts after the first, and
	 * bytes that are not UTF-8 do not make the file unreadable. */
	assert_int_equal(al_spool_write(&cfg, "sbx-b", AL_EV_FAIL,
					"init exited \xff\xfe with 1", &err),
			 0);
	assert_int_equal(al_spool_write(&cfg, "sbx-a", AL_EV_DELETE, "deleted",
					&err),
			 0);
	assert_int_equal(al_spool_write(&cfg, "sbx-b", AL_EV_DELETE, "deleted",
					&err),
			 0);
	assert_true(al_spool_pending(&cfg, "sbx-a"));
	assert_false(al_spool_pending(&cfg, "sbx"));
	al_spool_entry e[8];
	int n = al_spool_read(&cfg, e, 8, &err);
	assert_int_equal(n, 3);
	assert_string_equal(e[0].e.id, "sbx-a");
	assert_int_equal(e[0].e.ev, AL_EV_DELETE);
	assert_string_equal(e[1].e.id, "sbx-b");
	assert_int_equal(e[1].e.ev, AL_EV_FAIL);
	assert_string_equal(e[1].e.detail, "init exited ?? with 1");
	assert_true(e[1].e.at_ms > 0);
	assert_string_equal(e[2].e.id, "sbx-b");
	assert_int_equal(e[2].e.ev, AL_EV_DELETE);
	assert_true(e[2].seq > e[1].seq);
	/* A batch smaller than what waits takes the oldest first. */
	assert_int_equal(al_spool_read(&cfg, e, 2, &err), 2);
	assert_string_equal(e[1].e.id, "sbx-b");
	assert_int_equal(e[1].e.ev, AL_EV_FAIL);
	for (int i = 0; i < 2; i++)
		al_spool_ack(&cfg, &e[i]);
	assert_false(al_spool_pending(&cfg, "sbx-a"));
	n = al_spool_read(&cfg, e, 8, &err);
	assert_int_equal(n, 1);
	assert_int_equal(e[0].e.ev, AL_EV_DELETE);
	al_spool_ack(&cfg, &e[0]);
	assert_int_equal(al_spool_read(&cfg, e, 8, &err), 0);
}

static void test_only_shim_events(void **state)
{
	(void)state;
	al_err err = {0};
	/* READY is fcgi's to record (al_sandbox_mark_running), never a
	 * shim's; and no event goes under an id that is not one. */
	assert_int_equal(al_spool_write(&cfg, "sbx", AL_EV_READY, "x", &err),
			 -1);
	assert_int_equal(al_spool_write(&cfg, "../x", AL_EV_FAIL, "x", &err),
			 -1);
}

static void test_bad_files_quarantined(void **state)
{
	(void)state;
	put_file("good.5", "{\"id\":\"good\",\"seq\":5,\"event\":\"fail\","
			   "\"detail\":\"x\",\"at_ms\":1}");
	/* The name and the content disagree. */
	put_file("other.5", "{\"id\":\"good\",\"seq\":5,\"event\":\"fail\","
			    "\"detail\":\"x\",\"at_ms\":1}");
	put_file("ready.1", "{\"id\":\"ready\",\"seq\":1,\"event\":\"ready\","
			    "\"detail\":\"x\",\"at_ms\":1}");
	put_file("trunc.1", "{\"id\":\"trunc\",\"seq\":1,\"ev");
	put_file("noseq", "{}");
	put_file("lead.01", "{\"id\":\"lead\",\"seq\":1,\"event\":\"fail\","
			    "\"detail\":\"x\",\"at_ms\":1}");
	put_file("extra.2",
		 "{\"id\":\"extra\",\"seq\":2,\"event\":\"fail\","
		 "\"detail\":\"x\",\"at_ms\":1,\"state\":\"running\"}");
	/* A shim's file half-written a moment ago: left for it. */
	put_file(".young.1.tmp", "{");
	al_spool_entry e[8];
	al_err err = {0};
	int n = al_spool_read(&cfg, e, 8, &err);
	assert_int_equal(n, 1);
	assert_string_equal(e[0].e.id, "good");
	assert_int_equal(e[0].e.ev, AL_EV_FAIL);
	static const char *const bad[] = {"other.5", "ready.1", "trunc.1",
					  "noseq",   "lead.01", "extra.2"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char rel[64];
		snprintf(rel, sizeof rel, "bad/%s", bad[i]);
		assert_false(exists(bad[i]));
		assert_true(exists(rel));
	}
	assert_true(exists(".young.1.tmp"));
	al_spool_ack(&cfg, &e[0]);
	assert_false(exists("good.5"));
}

static void test_parse_limits(void **state)
{
	(void)state;
	al_spool_entry e;
	al_err err = {0};
	char big[AL_SPOOL_FILE_MAX + 64];
	memset(big, ' ', sizeof big);
	big[sizeof big - 1] = '\0';
	assert_int_equal(al_spool_parse("a.1", big, strlen(big), &e, &err), -1);
	/* A detail over 255 bytes is not one a shim writes. */
	char longd[600];
	snprintf(
		longd, sizeof longd,
		"{\"id\":\"a\",\"seq\":1,\"event\":\"fail\",\"detail\":\"%0300d"
		"\",\"at_ms\":1}",
		0);
	assert_int_equal(al_spool_parse("a.1", longd, strlen(longd), &e, &err),
			 -1);
	static const char ok[] = "{\"id\":\"a\",\"seq\":18446744073709551,"
				 "\"event\":\"delete\",\"detail\":\"\","
				 "\"at_ms\":1}";
	assert_int_equal(al_spool_parse("a.18446744073709551", ok,
					sizeof ok - 1, &e, &err),
			 0);
	assert_int_equal(e.seq, 18446744073709551ull);
	assert_int_equal(al_spool_parse("a.1", "", 0, &e, &err), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_read_ack, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_only_shim_events, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bad_files_quarantined,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_parse_limits, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
