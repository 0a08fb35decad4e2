/* sandbox_ops: create, delete and the running check, against a
 * PostgreSQL of the test's own (pg_scratch.h) and a loop btrfs pool
 * (btrfs_loop.h), with a stand-in for airlock-shim that gives the start
 * report each test asks of it. What a client and the next create see
 * after every way a start can fail: the error and its Retry-After, the
 * row marked (deleted or error), the project's quota given back; no
 * nginx, fcgi or controller. Skipped, saying why, without root,
 * btrfs-progs or PostgreSQL. */
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

#include "base/capacity.h"
#include "model/project.h"
#include "model/sandbox.h"
#include "model/sandbox_state.h"
#include "pool/poolcap.h"
#include "pool/store.h"
#include "sandbox/sandbox_ops.h"

#include "btrfs_loop.h"
#include "fake_env.h"
#include "pg_scratch.h"

static char state_dir[] = "/tmp/al-ops-XXXXXX";
static int made_state;
static char libexec[300];
static al_config cfg;
static al_db *db;
static int ready;

/* The stand-in shim: started as airlock-shim --id ID --ready-fd 3 (its
 * spec on stdin, unread), it reports on fd 3 what the file "mode"
 * beside it says:
 *   ok      running, under its own pid
 *   full    refused for capacity (the pool is full)
 *   broken  failed (what a jail that did not start reports)
 *   silent  exits without a report (a crash)
 *   gone    the row is deleted meanwhile (a delete that came first),
 *           then running */
static int write_shim(void)
{
	char path[400];
	snprintf(path, sizeof path, "%s/airlock-shim", libexec);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return -1;
	fprintf(f,
		"#!/bin/sh\n"
		"ok() { echo \"OK {\\\"pid\\\":$$,\\\"accel\\\":\\\"\\\"}\" "
		">&3; }\n"
		"case $(cat \"$(dirname \"$0\")/mode\") in\n"
		"ok) ok ;;\n"
		"full) echo 'ERR insufficient_storage the pool is full' >&3 ;;\n"
		"broken) echo 'ERR internal the jail did not start' >&3 ;;\n"
		"silent) ;;\n"
		"gone) psql '%s' -XqAt -c \"UPDATE sandboxes SET state = "
		"'deleted' WHERE id = '$2'\" >/dev/null && ok ;;\n"
		"esac\n",
		pg_conninfo);
	if (fclose(f) != 0 || chmod(path, 0755) < 0)
		return -1;
	return 0;
}

static void shim_says(const char *mode)
{
	char path[400];
	snprintf(path, sizeof path, "%s/mode", libexec);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(mode, f);
	assert_int_equal(fclose(f), 0);
}

/* core/model/sql of the checkout this test was built in (it runs as
 * build-san/tests/test_sandbox_ops). */
static int checkout_sql(char *out, size_t len)
{
	char exe[300];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	for (int up = 0; up < 3; up++) {
		char *slash = strrchr(exe, '/');
		if (slash == NULL)
			return -1;
		*slash = '\0';
	}
	return (size_t)snprintf(out, len, "%s/core/model/sql", exe) < len ? 0
									  : -1;
}

static int setup(void **state)
{
	if (group_setup(state) < 0 || pg_scratch_start() < 0)
		return -1;
	if (!mounted || !pg_up)
		return 0;
	if (mkdtemp(state_dir) == NULL)
		return -1;
	made_state = 1;
	snprintf(libexec, sizeof libexec, "%s/libexec", state_dir);
	static char sql[400];
	if (run("mkdir -p %s/log %s/run %s", state_dir, state_dir, libexec) !=
		    0 ||
	    write_shim() < 0 || checkout_sql(sql, sizeof sql) < 0)
		return -1;
	/* One live sandbox per project: what a failed start gives back is
	 * seen by the next create. */
	static const char *env[] = {"AIRLOCK_STATE",
				    state_dir,
				    "AIRLOCK_DB",
				    pg_conninfo,
				    "AIRLOCK_LIBEXEC",
				    libexec,
				    "AIRLOCK_SQL_DIR",
				    sql,
				    "AIRLOCK_QUOTA_SANDBOXES",
				    "1",
				    "AIRLOCK_POOL_PROJECT_PCT",
				    "100",
				    NULL};
	fake_env = env;
	al_err err = {0};
	if (al_config_load_from(&cfg, fake_env_lookup, &err) < 0) {
		print_message("config: %s\n", err.msg);
		return -1;
	}
	snprintf(cfg.pool_dir, sizeof cfg.pool_dir, "%s", mnt);
	db = al_db_open(cfg.db_conninfo, &err);
	if (db == NULL || al_db_migrate(db, cfg.sql_dir, &err) < 0 ||
	    al_store_quota_enable(mnt, &err) < 0 ||
	    al_poolcap_init(&cfg, &err) < 0) {
		print_message("setup: %s\n", err.msg);
		return -1;
	}
	ready = 1;
	return 0;
}

static int teardown(void **state)
{
	if (db != NULL)
		al_db_close(db);
	pg_scratch_stop();
	if (made_state)
		run("rm -rf %s", state_dir);
	return group_teardown(state);
}

#define NEED_STACKLESS()                                                       \
	do {                                                                   \
		NEED_BTRFS();                                                  \
		NEED_PG();                                                     \
		assert_true(ready);                                            \
	} while (0)

static const al_identity member = {.key_id = 1,
				   .project = "default",
				   .role = AL_ROLE_MEMBER};
static const al_identity admin = {.key_id = 2,
				  .project = "default",
				  .role = AL_ROLE_ADMIN};

/* A create of body by who: the operation's result, its error and
 * Retry-After; *out (if not NULL) gets the row of a success. */
static int create(const al_identity *who, const char *body, al_sandbox *out,
		  int *retry, al_err *err)
{
	al_create_req req;
	al_err_clear(err);
	assert_int_equal(al_create_req_parse(body, strlen(body),
					     cfg.default_timeout_s,
					     cfg.max_timeout_s, &req, err),
			 0);
	al_sandbox sb;
	int rc = al_sandbox_ops_create(&cfg, db, who, &req, &sb, retry, err);
	al_create_req_free(&req);
	if (rc == 0) {
		if (out != NULL)
			*out = sb;
		else
			al_sandbox_free_fields(&sb);
	}
	return rc;
}

/* How many of the default project's sandboxes tagged {"t": tag} are in
 * state st (-1: any but deleted); the id of the last into id (if not
 * NULL). */
static size_t count(const char *tag, int st, char id[64])
{
	al_err err = {0};
	json_object *filter = json_object_new_object();
	json_object_object_add(filter, "t", json_object_new_string(tag));
	json_object *arr = NULL;
	assert_int_equal(al_sandbox_list(db, "default", st, filter, &arr, &err),
			 0);
	json_object_put(filter);
	size_t n = json_object_array_length(arr);
	if (n > 0 && id != NULL) {
		json_object *v = NULL;
		json_object_object_get_ex(json_object_array_get_idx(arr, n - 1),
					  "id", &v);
		snprintf(id, 64, "%s", json_object_get_string(v));
	}
	json_object_put(arr);
	return n;
}

/* After each test, whatever it failed to delete: the next one starts
 * with the project's quota free. */
static int delete_live(void **state)
{
	(void)state;
	if (!ready)
		return 0;
	al_err err = {0};
	json_object *arr = NULL;
	if (al_sandbox_list(db, "default", -1, NULL, &arr, &err) < 0)
		return -1;
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		json_object *v = NULL;
		json_object_object_get_ex(json_object_array_get_idx(arr, i),
					  "id", &v);
		(void)al_sandbox_ops_delete(&cfg, db, json_object_get_string(v),
					    NULL, &err);
	}
	json_object_put(arr);
	return 0;
}

/* The project's one live sandbox is free again: a create runs (and is
 * deleted). */
static void quota_free_again(void)
{
	al_err err;
	int retry = -1;
	al_sandbox sb;
	shim_says("ok");
	assert_int_equal(create(&member, "{\"metadata\":{\"t\":\"again\"}}",
				&sb, &retry, &err),
			 0);
	assert_int_equal(sb.state, AL_ST_RUNNING);
	assert_int_equal(al_sandbox_ops_delete(&cfg, db, sb.id, NULL, &err), 0);
	al_sandbox_free_fields(&sb);
}

/* A create that runs, the running check, a second create past the
 * quota, and the delete (no shim answers: the row is marked at once). */
static void test_create_run_delete(void **state)
{
	(void)state;
	NEED_STACKLESS();
	al_err err;
	int retry = -1;
	al_sandbox sb;
	shim_says("ok");
	assert_int_equal(create(&member, "{\"metadata\":{\"t\":\"run\"}}", &sb,
				&retry, &err),
			 0);
	assert_int_equal(sb.state, AL_ST_RUNNING);
	assert_string_equal(sb.project, "default");
	assert_string_equal(sb.template_name, "minimal");
	assert_string_equal(sb.driver, "ns");
	assert_true(sb.shim_pid > 1);
	assert_int_equal(al_sandbox_ops_running(&cfg, db, sb.id, "default",
						&err),
			 0);
	/* Another project's key does not see it at all. */
	assert_int_equal(al_sandbox_ops_running(&cfg, db, sb.id, "other", &err),
			 -1);
	assert_int_equal(err.code, AL_ENOENT);
	assert_int_equal(al_sandbox_ops_delete(&cfg, db, sb.id, "other", &err),
			 -1);
	assert_int_equal(err.code, AL_ENOENT);

	/* The project's one live sandbox is taken: no row is written. */
	assert_int_equal(create(&member, "{\"metadata\":{\"t\":\"run2\"}}",
				NULL, &retry, &err),
			 -1);
	assert_int_equal(err.code, AL_EQUOTA);
	assert_int_equal(retry, AL_QUOTA_RETRY_S);
	assert_int_equal(count("run2", AL_ST_DELETED, NULL), 0);
	assert_int_equal(count("run2", -1, NULL), 0);

	assert_int_equal(al_sandbox_ops_delete(&cfg, db, sb.id, NULL, &err), 0);
	assert_int_equal(al_sandbox_ops_running(&cfg, db, sb.id, NULL, &err),
			 -1);
	assert_int_equal(err.code, AL_ENOENT);
	/* Twice: the second finds nothing. */
	assert_int_equal(al_sandbox_ops_delete(&cfg, db, sb.id, NULL, &err),
			 -1);
	assert_int_equal(err.code, AL_ENOENT);
	assert_int_equal(count("run", AL_ST_DELETED, NULL), 1);
	al_sandbox_free_fields(&sb);
}

/* The shim refused for capacity: unavailable with Retry-After, the row
 * deleted (it never existed for the client), the quota given back. */
static void test_refused_for_capacity(void **state)
{
	(void)state;
	NEED_STACKLESS();
	al_err err;
	int retry = -1;
	shim_says("full");
	assert_int_equal(create(&member, "{\"metadata\":{\"t\":\"full\"}}",
				NULL, &retry, &err),
			 -1);
	assert_int_equal(err.code, AL_EUNAVAIL);
	assert_non_null(strstr(err.msg, "the pool is full"));
	assert_int_equal(retry, AL_CAPACITY_RETRY_S);
	assert_int_equal(count("full", -1, NULL), 0);
	assert_int_equal(count("full", AL_ST_DELETED, NULL), 1);

	quota_free_again();
}

/* A start that failed, with a reason or without one (the shim died):
 * a server failure, no Retry-After, the row in error with the reason
 * (the nth of this test's), the quota given back (an error row is not
 * live). */
static void failed_start(const char *mode, const char *says, size_t nth)
{
	al_err err;
	int retry = -1;
	char id[64] = "";
	shim_says(mode);
	assert_int_equal(create(&member, "{\"metadata\":{\"t\":\"fail\"}}",
				NULL, &retry, &err),
			 -1);
	assert_int_equal(err.code, AL_EINTERNAL);
	assert_non_null(strstr(err.msg, says));
	assert_int_equal(retry, 0);
	assert_int_equal(count("fail", AL_ST_ERROR, id), nth);
	al_sandbox sb;
	assert_int_equal(al_sandbox_get(db, id, &sb, &err), 0);
	assert_int_equal(sb.state, AL_ST_ERROR);
	assert_non_null(strstr(sb.error, says));
	al_sandbox_free_fields(&sb);
	/* Neither exec nor files go to it. */
	assert_int_equal(al_sandbox_ops_running(&cfg, db, id, "default", &err),
			 -1);
	assert_int_equal(err.code, AL_ESTATE);
	assert_non_null(strstr(err.msg, "is error, not running"));

	quota_free_again();
}

static void test_start_failed(void **state)
{
	(void)state;
	NEED_STACKLESS();
	failed_start("broken", "the jail did not start", 1);
	failed_start("silent", "exited while starting", 2);
}

/* The row was deleted between the shim's start and the running mark:
 * the create fails as the server's, the row stays deleted (not
 * error), and the quota is free. */
static void test_deleted_while_starting(void **state)
{
	(void)state;
	NEED_STACKLESS();
	al_err err;
	int retry = -1;
	shim_says("gone");
	assert_int_equal(create(&member, "{\"metadata\":{\"t\":\"gone\"}}",
				NULL, &retry, &err),
			 -1);
	assert_int_equal(err.code, AL_EINTERNAL);
	assert_int_equal(retry, 0);
	assert_int_equal(count("gone", -1, NULL), 0);
	assert_int_equal(count("gone", AL_ST_DELETED, NULL), 1);

	quota_free_again();
}

/* Refusals decided before a row is written: nothing is left, and
 * Retry-After only where asking again can help. */
static void test_refused_before_the_row(void **state)
{
	(void)state;
	NEED_STACKLESS();
	al_err err;
	int retry = -1;
	shim_says("ok");
	static const struct {
		const al_identity *who;
		const char *body;
		al_code code;
		const char *says;
	} cases[] = {
		{&member, "{\"project\":\"other\",\"metadata\":{\"t\":\"no\"}}",
		 AL_EPERM, "only admin keys"},
		{&admin, "{\"project\":\"nosuch\",\"metadata\":{\"t\":\"no\"}}",
		 AL_EINVAL, "nosuch"},
		{&member,
		 "{\"template\":\"nosuch\",\"metadata\":{\"t\":\"no\"}}",
		 AL_ENOENT, "nosuch"},
		/* The VM snapshot's shape before the host: refused whether
		 * vm runs here or not. */
		{&member,
		 "{\"driver\":\"vm\",\"memory_mb\":1024,\"metadata\":{\"t\":"
		 "\"no\"}}",
		 AL_EINVAL, "'memory_mb' of a vm sandbox"},
		/* More CPUs than the host's (AIRLOCK_MAX_CPUS): a vm would
		 * need more vCPUs than there are. */
		{&member,
		 "{\"driver\":\"vm\",\"cpus\":1000,\"metadata\":{\"t\":"
		 "\"no\"}}",
		 AL_EINVAL, "'cpus' is at most"},
		/* No guest kernel in this state directory: unavailable, and
		 * no Retry-After (asking again does not help). */
		{&member, "{\"driver\":\"vm\",\"metadata\":{\"t\":\"no\"}}",
		 AL_EUNAVAIL, "vm driver unavailable"},
		{&member, "{\"memory_mb\":1048576,\"metadata\":{\"t\":\"no\"}}",
		 AL_EINVAL, "memory_mb"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		retry = -1;
		if (create(cases[i].who, cases[i].body, NULL, &retry, &err) !=
			    -1 ||
		    err.code != cases[i].code ||
		    strstr(err.msg, cases[i].says) == NULL || retry != 0)
			fail_msg("%s: got %s (%s), Retry-After %d",
				 cases[i].body, al_code_name(err.code), err.msg,
				 retry);
	}
	assert_int_equal(count("no", -1, NULL), 0);
	assert_int_equal(count("no", AL_ST_DELETED, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_create_run_delete, delete_live),
		cmocka_unit_test_teardown(test_refused_for_capacity,
					  delete_live),
		cmocka_unit_test_teardown(test_start_failed, delete_live),
		cmocka_unit_test_teardown(test_deleted_while_starting,
					  delete_live),
		cmocka_unit_test_teardown(test_refused_before_the_row,
					  delete_live),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
