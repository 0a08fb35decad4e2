/* Egress records and the gateway's writer (core/net/egress.h): a record
 * packs and unpacks to itself; the writer batches into one file per
 * flush, at most batch records a file; past the cap of unconsumed files
 * it drops records and says how many once there is room again. */
#include <dirent.h>
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

#include "net/egress.h"

static char run_dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(run_dir, sizeof run_dir, "/tmp/al-egress-XXXXXX");
	return mkdtemp(run_dir) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", run_dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_pack_unpack(void **state)
{
	(void)state;
	al_egress_rec r, b;
	al_egress_rec_set(&r, 1700000000123, "sbx1", true, "allow list",
			  AL_EGRESS_HTTPS, "pypi.org", 443, "GET",
			  "/simple/\x7f\"x\"");
	char line[AL_EGRESS_LINE_MAX];
	al_err err = {0};
	int n = al_egress_pack(&r, line, sizeof line, &err);
	assert_true(n > 0);
	assert_int_equal(line[n - 1], '\n');
	assert_int_equal(al_egress_unpack(line, (size_t)n, &b, &err), 0);
	assert_int_equal(b.at_ms, 1700000000123);
	assert_string_equal(b.sandbox, "sbx1");
	assert_true(b.allow);
	assert_string_equal(b.reason, "allow list");
	assert_int_equal(b.protocol, AL_EGRESS_HTTPS);
	assert_string_equal(b.name, "pypi.org");
	assert_int_equal(b.port, 443);
	assert_string_equal(b.method, "GET");
	assert_string_equal(b.path, "/simple/?\"x\"");
	/* A path past the bound is cut to it. */
	char longpath[3000];
	memset(longpath, 'p', sizeof longpath - 1);
	longpath[sizeof longpath - 1] = '\0';
	al_egress_rec_set(&r, 1, "sbx1", false, "deny", AL_EGRESS_HTTP, "a.com",
			  80, "POST", longpath);
	n = al_egress_pack(&r, line, sizeof line, &err);
	assert_true(n > 0);
	assert_int_equal(al_egress_unpack(line, (size_t)n, &b, &err), 0);
	assert_int_equal(strlen(b.path), AL_EGRESS_PATH_MAX);

	static const char *const bad[] = {
		"{}",
		"{\"at_ms\":1,\"sandbox\":\"../s\",\"allow\":true,"
		"\"reason\":\"r\",\"protocol\":\"dns\",\"name\":\"a\","
		"\"port\":0}",
		"{\"at_ms\":1,\"sandbox\":\"s\",\"allow\":true,"
		"\"reason\":\"r\",\"protocol\":\"udp\",\"name\":\"a\","
		"\"port\":0}",
		"{\"at_ms\":1,\"sandbox\":\"s\",\"allow\":true,"
		"\"reason\":\"r\",\"protocol\":\"dns\",\"name\":\"a\","
		"\"port\":70000}",
		"{\"at_ms\":1,\"sandbox\":\"s\",\"allow\":true,"
		"\"reason\":\"r\\n\",\"protocol\":\"dns\",\"name\":\"a\","
		"\"port\":0}",
		"{\"at_ms\":1,\"sandbox\":\"s\",\"allow\":false,"
		"\"reason\":\"r\",\"protocol\":\"dns\",\"name\":\"a\","
		"\"port\":0,\"dropped\":5}",
		"{\"at_ms\":1,\"sandbox\":\"s\",\"allow\":false,"
		"\"reason\":\"r\",\"protocol\":\"dns\",\"name\":\"a\","
		"\"port\":0,\"extra\":1}",
		"{\"at_ms\":253402300800000,\"sandbox\":\"s\",\"allow\":false,"
		"\"reason\":\"r\",\"protocol\":\"dns\",\"name\":\"a\","
		"\"port\":0}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err.code = AL_OK;
		if (al_egress_unpack(bad[i], strlen(bad[i]), &b, &err) != -1)
			fail_msg("accepted: %s", bad[i]);
		assert_int_equal(err.code, AL_EINVAL);
	}
}

/* Names of the batch files in the sandbox's directory, sorted. */
static int list_files(const char *sandbox, char names[][32], int max)
{
	char p[128];
	snprintf(p, sizeof p, "%s/egress/%s", run_dir, sandbox);
	DIR *d = opendir(p);
	assert_non_null(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.' && n < max && strlen(de->d_name) < 32)
			memcpy(names[n++], de->d_name, strlen(de->d_name) + 1);
	closedir(d);
	qsort(names, (size_t)n, 32,
	      (int (*)(const void *, const void *))strcmp);
	return n;
}

/* One file's decisions into *logged and the counts of its count records
 * of reason (NULL: of any) into *counted. */
static void scan_file(const char *sandbox, const char *name, const char *reason,
		      int *logged, uint64_t *counted)
{
	char p[160];
	snprintf(p, sizeof p, "%s/egress/%s/%s", run_dir, sandbox, name);
	FILE *f = fopen(p, "r");
	assert_non_null(f);
	char line[AL_EGRESS_LINE_MAX + 2];
	*logged = 0;
	*counted = 0;
	while (fgets(line, sizeof line, f) != NULL) {
		al_egress_rec r;
		al_err err = {0};
		assert_int_equal(al_egress_unpack(line, strlen(line), &r, &err),
				 0);
		assert_string_equal(r.sandbox, sandbox);
		if (r.dropped == 0)
			(*logged)++;
		else if (reason == NULL || strcmp(r.reason, reason) == 0)
			*counted += r.dropped;
	}
	fclose(f);
}

/* The records of one file; *dropped gets a dropped count if any. */
static int file_records(const char *sandbox, const char *name,
			uint64_t *dropped)
{
	int n;
	scan_file(sandbox, name, NULL, &n, dropped);
	return n;
}

/* Records of reason (a count record's "dropped") in one file. */
static uint64_t file_count(const char *sandbox, const char *name,
			   const char *reason)
{
	int n;
	uint64_t c;
	scan_file(sandbox, name, reason, &n, &c);
	return c;
}

static void add_n(al_egress_writer *w, int n, int64_t now)
{
	for (int i = 0; i < n; i++) {
		al_egress_rec r;
		al_egress_rec_set(&r, 1000 + i, "ignored", i % 2 == 0, "r",
				  AL_EGRESS_DNS, "a.example", 0, NULL, NULL);
		al_egress_writer_add(w, &r, now);
	}
}

/* The writer's own bounds without a log rate: what the batching and
 * reader tests count is every record. */
static const al_egress_writer_limits unrated = {
	.batch = AL_EGRESS_BATCH_MAX,
	.flush_ms = AL_EGRESS_FLUSH_MS,
	.files = AL_EGRESS_FILES_MAX,
};

static void test_writer_batches(void **state)
{
	(void)state;
	al_err err = {0};
	al_egress_writer *w = al_egress_writer_open(run_dir, "sbx1", &unrated,
						    &err);
	assert_non_null(w);
	add_n(w, 10, 5000);
	/* Not yet due: nothing on disk. */
	assert_int_equal(al_egress_writer_due(w), 5000 + AL_EGRESS_FLUSH_MS);
	assert_int_equal(al_egress_writer_flush(w, 5100, false, &err), 0);
	char names[16][32];
	assert_int_equal(list_files("sbx1", names, 16), 0);
	assert_int_equal(al_egress_writer_flush(w, 5250, false, &err), 1);
	assert_int_equal(list_files("sbx1", names, 16), 1);
	uint64_t dropped;
	assert_int_equal(file_records("sbx1", names[0], &dropped), 10);
	assert_int_equal(al_egress_writer_due(w), -1);
	/* 600 records: two full batches of 256 go at once, 88 wait. */
	add_n(w, 600, 6000);
	assert_int_equal(list_files("sbx1", names, 16), 3);
	assert_int_equal(file_records("sbx1", names[1], &dropped), 256);
	assert_int_equal(file_records("sbx1", names[2], &dropped), 256);
	al_egress_writer_close(w);
	assert_int_equal(list_files("sbx1", names, 16), 4);
	assert_int_equal(file_records("sbx1", names[3], &dropped), 88);
	assert_int_equal(dropped, 0);
	/* The directory is the sandbox's alone. */
	struct stat st;
	char p[128];
	snprintf(p, sizeof p, "%s/egress/sbx1", run_dir);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_null(al_egress_writer_open(run_dir, "../x", NULL, &err));
}

static void test_writer_drops_past_cap(void **state)
{
	(void)state;
	al_err err = {0};
	al_egress_writer_limits lim = {.batch = 4, .flush_ms = 100, .files = 3};
	al_egress_writer *w = al_egress_writer_open(run_dir, "sbx2", &lim,
						    &err);
	assert_non_null(w);
	add_n(w, 12, 0); /* three files: the cap */
	char names[16][32];
	assert_int_equal(list_files("sbx2", names, 16), 3);
	add_n(w, 9, 0); /* nobody consumes: dropped */
	assert_int_equal(list_files("sbx2", names, 16), 3);
	assert_true(al_egress_writer_flush(w, 1000, false, &err) == 0);
	assert_int_equal(al_egress_writer_dropped(w), 9);
	/* The controller takes one file: room for one more, which says
	 * how many were lost. */
	char p[160];
	snprintf(p, sizeof p, "%s/egress/sbx2/%s", run_dir, names[0]);
	assert_int_equal(unlink(p), 0);
	add_n(w, 2, 2000);
	assert_int_equal(al_egress_writer_flush(w, 2100, false, &err), 1);
	assert_int_equal(list_files("sbx2", names, 16), 3);
	uint64_t dropped = 0;
	assert_int_equal(file_records("sbx2", names[2], &dropped), 2);
	assert_int_equal(dropped, 9);
	al_egress_writer_close(w);
}

/* A writer that logs 10 records a second, 20 at once. */
static al_egress_writer *open_rated(const char *sandbox)
{
	al_egress_writer_limits lim = unrated;
	lim.rate = 10;
	lim.burst = 20;
	al_err err = {0};
	al_egress_writer *w = al_egress_writer_open(run_dir, sandbox, &lim,
						    &err);
	assert_non_null(w);
	return w;
}

/* Over the rate a record is counted, not logged, and the next file says
 * how many; a count alone is written when its flush is due. */
static void test_writer_rate(void **state)
{
	(void)state;
	al_err err = {0};
	al_egress_writer *w = open_rated("rate1");
	add_n(w, 100, 1000); /* the burst is logged, the rest counted */
	assert_int_equal(al_egress_writer_suppressed(w), 80);
	assert_int_equal(al_egress_writer_dropped(w), 0);
	assert_int_equal(al_egress_writer_flush(w, 1250, false, &err), 1);
	char names[16][32];
	assert_int_equal(list_files("rate1", names, 16), 1);
	uint64_t dropped;
	assert_int_equal(file_records("rate1", names[0], &dropped), 20);
	assert_int_equal(dropped, 80);
	assert_int_equal(file_count("rate1", names[0], AL_EGRESS_REASON_RATE),
			 80);
	/* 750 ms later 7.5 tokens are back: 7 logged, 3 counted. */
	add_n(w, 10, 1750);
	assert_int_equal(al_egress_writer_suppressed(w), 83);
	assert_int_equal(al_egress_writer_flush(w, 1750, true, &err), 1);
	/* 0.6 tokens: only counts wait, and are still due in time. */
	add_n(w, 5, 1760);
	assert_int_equal(al_egress_writer_due(w), 1760 + AL_EGRESS_FLUSH_MS);
	assert_int_equal(al_egress_writer_flush(w, 2009, false, &err), 0);
	assert_int_equal(al_egress_writer_flush(w, 2010, false, &err), 1);
	assert_int_equal(list_files("rate1", names, 16), 3);
	assert_int_equal(file_records("rate1", names[1], &dropped), 7);
	assert_int_equal(dropped, 3);
	assert_int_equal(file_records("rate1", names[2], &dropped), 0);
	assert_int_equal(dropped, 5);
	assert_int_equal(file_count("rate1", names[2], AL_EGRESS_REASON_RATE),
			 5);
	assert_int_equal(al_egress_writer_due(w), -1);
	al_egress_writer_close(w);
	/* A rate needs a burst. */
	al_egress_writer_limits lim = unrated;
	lim.rate = 10;
	assert_null(al_egress_writer_open(run_dir, "rate2", &lim, &err));
}

/* Take every file of sandbox (the controller's part): its decisions
 * into *logged, its counts into *counted; how many files. */
static int consume(const char *sandbox, uint64_t *logged, uint64_t *counted)
{
	char names[64][32];
	int n = list_files(sandbox, names, 64);
	for (int i = 0; i < n; i++) {
		uint64_t dropped;
		*logged += (uint64_t)file_records(sandbox, names[i], &dropped);
		*counted += dropped;
		char p[160];
		snprintf(p, sizeof p, "%s/egress/%s/%s", run_dir, sandbox,
			 names[i]);
		assert_int_equal(unlink(p), 0);
	}
	return n;
}

/* A flood: one decision a millisecond for 10 s at 10/s, burst 20. The
 * log holds at most burst + rate * t decisions, every other one is in
 * a count, and none is lost between the two. */
static void test_writer_rate_flood(void **state)
{
	(void)state;
	al_err err = {0};
	al_egress_writer *w = open_rated("flood");
	uint64_t logged = 0, counted = 0;
	int files = 0;
	const int64_t t0 = 100000, n = 10000;
	for (int64_t t = t0; t < t0 + n; t++) {
		add_n(w, 1, t);
		int64_t due = al_egress_writer_due(w);
		if (due >= 0 && due <= t)
			assert_int_equal(al_egress_writer_flush(w, t, false,
								&err),
					 1);
		if (t % 100 == 0)
			files += consume("flood", &logged, &counted);
	}
	uint64_t suppressed = al_egress_writer_suppressed(w);
	al_egress_writer_close(w);
	files += consume("flood", &logged, &counted);
	assert_true(logged >= 100 && logged <= 20 + 10 * 10);
	assert_int_equal(counted, suppressed);
	assert_int_equal(logged + counted, (uint64_t)n);
	/* One count a flush interval at the most: rows stay bounded too. */
	assert_true(files <= n / AL_EGRESS_FLUSH_MS + 2);
}

static void put(const char *rel, const char *text)
{
	char p[160];
	snprintf(p, sizeof p, "%s/egress/%s", run_dir, rel);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int exists(const char *rel)
{
	char p[160];
	snprintf(p, sizeof p, "%s/egress/%s", run_dir, rel);
	return access(p, F_OK) == 0;
}

static void test_reader(void **state)
{
	(void)state;
	al_err err = {0};
	al_egress_writer *w = al_egress_writer_open(run_dir, "sbx3", &unrated,
						    &err);
	assert_non_null(w);
	add_n(w, 300, 0); /* one file of 256, then 44 at close */
	al_egress_writer_close(w);
	/* Both files wait for the reader (what a finished build waits on). */
	assert_int_equal(al_egress_pending(run_dir, "sbx3"), 2);
	assert_int_equal(al_egress_pending(run_dir, "nosuch"), 0);
	/* A directory with nothing in it, and a gateway's bad files. */
	al_egress_writer_close(al_egress_writer_open(run_dir, "idle", NULL,
						     &err));
	w = al_egress_writer_open(run_dir, "sbx4", &unrated, &err);
	al_egress_writer_close(w);
	put("sbx4/00000000000000000001", "garbage\n");
	put("sbx4/00000000000000000002",
	    "{\"at_ms\":1,\"sandbox\":\"sbx3\",\"allow\":true,"
	    "\"reason\":\"r\",\"protocol\":\"dns\",\"name\":\"a\","
	    "\"port\":0}\n");
	char p[160];
	snprintf(p, sizeof p, "%s/egress/sbx4/00000000000000000003", run_dir);
	assert_int_equal(symlink("/etc/passwd", p), 0);

	al_egress_batch b = {0};
	int files = al_egress_read(run_dir, 10000, &b, &err);
	assert_int_equal(files, 2);
	assert_int_equal(b.n, 300);
	/* Oldest first within a sandbox. */
	assert_int_equal(b.recs[0].at_ms, 1000);
	assert_int_equal(b.recs[299].at_ms, 1000 + 299);
	assert_string_equal(b.recs[0].sandbox, "sbx3");
	bool idle_seen = false;
	for (size_t i = 0; i < b.n_empty; i++)
		idle_seen |= strcmp(b.empty[i], "idle") == 0;
	assert_true(idle_seen);
	assert_true(exists("bad/sbx4.00000000000000000001"));
	assert_true(exists("bad/sbx4.00000000000000000002"));
	assert_true(exists("bad/sbx4.00000000000000000003"));
	/* Nothing is gone before the ack; everything after it. */
	assert_int_equal(al_egress_read(run_dir, 10000, &b, &err), 2);
	al_egress_ack(run_dir, &b);
	assert_int_equal(al_egress_pending(run_dir, "sbx3"), 0);
	assert_int_equal(al_egress_read(run_dir, 10000, &b, &err), 0);
	assert_int_equal(b.n, 0);
	assert_int_equal(al_egress_dir_remove(run_dir, "idle"), 0);
	assert_false(exists("idle"));
	/* A small batch takes whole files only. */
	w = al_egress_writer_open(run_dir, "sbx3", &unrated, &err);
	add_n(w, 300, 0);
	al_egress_writer_close(w);
	assert_int_equal(al_egress_read(run_dir, 10, &b, &err), 1);
	assert_int_equal(b.n, 256);
	al_egress_batch_free(&b);
}

/* Every record carries its place: its file's seq and its line's index,
 * the same however often the file is read; a name that is not a seq is
 * set aside; a new writer never reuses a name still in the directory,
 * even when the clock says an earlier time. */
static void test_reader_places(void **state)
{
	(void)state;
	al_err err = {0};
	al_egress_writer *w = al_egress_writer_open(run_dir, "sbx5", &unrated,
						    &err);
	assert_non_null(w);
	add_n(w, 300, 0);
	al_egress_writer_close(w);
	al_egress_batch b = {0};
	assert_int_equal(al_egress_read(run_dir, 10000, &b, &err), 2);
	uint64_t seq0 = b.recs[0].seq;
	assert_true(seq0 > 0);
	assert_int_equal(b.recs[0].idx, 0);
	assert_int_equal(b.recs[255].seq, seq0);
	assert_int_equal(b.recs[255].idx, 255);
	assert_int_equal(b.recs[256].seq, seq0 + 1);
	assert_int_equal(b.recs[256].idx, 0);
	assert_int_equal(b.recs[299].idx, 43);
	/* Read again (no ack: a controller that died before its unlink):
	 * the same places. */
	assert_int_equal(al_egress_read(run_dir, 10000, &b, &err), 2);
	assert_int_equal(b.recs[0].seq, seq0);
	assert_int_equal(b.recs[299].seq, seq0 + 1);
	assert_int_equal(b.recs[299].idx, 43);
	/* A file from the future (a clock set back since): the next writer
	 * starts past it. */
	put("sbx5/09000000000000000000",
	    "{\"at_ms\":1,\"sandbox\":\"sbx5\",\"allow\":true,"
	    "\"reason\":\"r\",\"protocol\":\"dns\",\"name\":\"a\","
	    "\"port\":0}\n");
	put("sbx5/123", "{}\n");
	put("sbx5/99999999999999999999", "{}\n"); /* past a bigint */
	w = al_egress_writer_open(run_dir, "sbx5", &unrated, &err);
	add_n(w, 1, 0);
	al_egress_writer_close(w);
	char names[16][32];
	assert_int_equal(list_files("sbx5", names, 16), 6);
	assert_string_equal(names[5], "99999999999999999999");
	assert_string_equal(names[3], "09000000000000000001");
	assert_int_equal(al_egress_read(run_dir, 10000, &b, &err), 4);
	assert_true(exists("bad/sbx5.123"));
	assert_true(exists("bad/sbx5.99999999999999999999"));
	assert_int_equal(b.recs[b.n - 1].seq, 9000000000000000001ull);
	assert_int_equal(b.recs[b.n - 2].seq, 9000000000000000000ull);
	al_egress_batch_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pack_unpack),
		cmocka_unit_test_setup_teardown(test_writer_batches, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_writer_drops_past_cap,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_writer_rate, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_writer_rate_flood, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reader, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reader_places, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
