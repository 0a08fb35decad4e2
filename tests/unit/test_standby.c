/* Warm-pool standbys (core/sandbox/standby.h) against fake shims listening where
 * real ones do: names are made and read back the same way; only a
 * standby of the sandbox's template and driver is claimed; a retired
 * standby is out of the pool at once, still reachable, and ended by
 * al_standby_end_retired; a dead standby's socket is released, a live
 * one's is not. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/agentproto.h"
#include "sandbox/shimspec.h"
#include "sandbox/standby.h"

static al_config cfg;
static char base[64];

static int setup(void **state)
{
	(void)state;
	snprintf(base, sizeof base, "/tmp/al-standby-XXXXXX");
	if (mkdtemp(base) == NULL)
		return -1;
	memset(&cfg, 0, sizeof cfg);
	snprintf(cfg.run_dir, sizeof cfg.run_dir, "%s/run", base);
	snprintf(cfg.pool_dir, sizeof cfg.pool_dir, "%s/pool", base);
	char p[AL_PATH_MAX + 16];
	snprintf(p, sizeof p, "%s/pool", cfg.run_dir);
	if (mkdir(cfg.run_dir, 0700) < 0 || mkdir(p, 0700) < 0 ||
	    mkdir(cfg.pool_dir, 0700) < 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[96];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
	return system(cmd) == 0 ? 0 : -1;
}

/* A shim of a standby, as far as its socket goes: it answers one CLAIM
 * (as ready) or DESTROY, then unlinks its socket the way a shim does and
 * stops listening. Connections that send nothing (looks) are closed. */
typedef struct fake {
	char tmpl[64], driver[16], slot[64];
	int fd;
	pthread_t thread;
	int ended_by; /* the frame type it answered, 0 none yet */
} fake;

static void *fake_main(void *arg)
{
	fake *f = arg;
	for (;;) {
		int c = accept(f->fd, NULL, NULL);
		if (c < 0)
			return NULL; /* shut down by fake_stop */
		al_frame_reader r;
		al_frame fr;
		al_err err = {0};
		al_frame_reader_init(&r);
		int got = al_frame_recv(c, &r, &fr, al_now_ms() + 5000, &err);
		al_frame_reader_free(&r);
		if (got < 0) {
			close(c);
			continue;
		}
		const char *res = fr.type == AL_F_CLAIM
					  ? "{\"pid\":4242,\"accel\":\"tcg\"}"
					  : "{}";
		f->ended_by = fr.type;
		al_standby_unlink(&cfg, f->tmpl, f->driver, f->slot);
		al_frame_send(c, AL_F_RESULT, fr.id, res, strlen(res), &err);
		al_frame_free(&fr);
		close(c);
		close(f->fd);
		f->fd = -1;
		return NULL;
	}
}

static void fake_start(fake *f, const char *tmpl, const char *driver,
		       int version)
{
	al_err err = {0};
	memset(f, 0, sizeof *f);
	snprintf(f->tmpl, sizeof f->tmpl, "%s", tmpl);
	snprintf(f->driver, sizeof f->driver, "%s", driver);
	assert_int_equal(al_standby_slot(version, f->slot, sizeof f->slot,
					 &err),
			 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	assert_int_equal(al_standby_socket(&cfg, tmpl, driver, f->slot,
					   sa.sun_path, sizeof sa.sun_path,
					   &err),
			 0);
	f->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(f->fd >= 0);
	assert_int_equal(bind(f->fd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(f->fd, 8), 0);
	assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

static void fake_stop(fake *f)
{
	if (f->fd >= 0)
		shutdown(f->fd, SHUT_RDWR);
	pthread_join(f->thread, NULL);
	if (f->fd >= 0)
		close(f->fd);
	al_standby_unlink(&cfg, f->tmpl, f->driver, f->slot);
}

static int exists(int retired, const fake *f)
{
	char p[AL_PATH_MAX + 256];
	snprintf(p, sizeof p, "%s/pool%s/%s.%s.%s.sock", cfg.run_dir,
		 retired ? "/retired" : "", f->tmpl, f->driver, f->slot);
	return access(p, F_OK) == 0;
}

/* A claim for sandbox id of minimal version, under ns: 0 or
 * AL_DECLINED, as al_standby_claim. */
static int claim(const char *id, int version, al_shim_ready *ready)
{
	al_sandbox sb = {.template_version = version,
			 .limits = {.disk_bytes = 1 << 30}};
	snprintf(sb.id, sizeof sb.id, "%s", id);
	snprintf(sb.template_name, sizeof sb.template_name, "minimal");
	snprintf(sb.driver, sizeof sb.driver, "ns");
	return al_standby_claim(&cfg, &sb, al_now_ms() + 5000, ready);
}

static void test_names(void **state)
{
	(void)state;
	al_err err = {0};
	char slot[64], other[64], path[AL_PATH_MAX];
	assert_int_equal(al_standby_slot(7, slot, sizeof slot, &err), 0);
	assert_int_equal(strncmp(slot, "standby-v7-", 11), 0);
	assert_int_equal(strlen(slot), 11 + 12);
	assert_true(al_id_valid(slot));
	assert_int_equal(al_standby_slot(7, other, sizeof other, &err), 0);
	assert_string_not_equal(slot, other);
	assert_int_equal(al_standby_socket(&cfg, "minimal", "ns", slot, path,
					   sizeof path, &err),
			 0);
	char want[AL_PATH_MAX + 128];
	snprintf(want, sizeof want, "%s/pool/minimal.ns.%s.sock", cfg.run_dir,
		 slot);
	assert_string_equal(path, want);
	/* Nothing that would put a dot (or a slash) in the name. */
	assert_int_equal(al_standby_socket(&cfg, "mini.mal", "ns", slot, path,
					   sizeof path, &err),
			 -1);
	assert_int_equal(al_standby_socket(&cfg, "minimal", "n.s", slot, path,
					   sizeof path, &err),
			 -1);
	assert_int_equal(al_standby_socket(&cfg, "minimal", "ns", "../x", path,
					   sizeof path, &err),
			 -1);
	assert_int_equal(al_standby_slot(1, slot, 12, &err), -1);
}

static void test_count_reads_the_names_it_made(void **state)
{
	(void)state;
	fake a, b, c, d;
	fake_start(&a, "minimal", "ns", 2);
	fake_start(&b, "minimal", "ns", 3);
	fake_start(&c, "minimal", "vm", 3);
	/* A template whose name the other's starts with is another one. */
	fake_start(&d, "minimal-2", "ns", 3);
	/* Not standbys: ignored. */
	char junk[AL_PATH_MAX + 32];
	snprintf(junk, sizeof junk, "%s/pool/minimal.ns.sock", cfg.run_dir);
	FILE *jf = fopen(junk, "w");
	assert_non_null(jf);
	fclose(jf);
	assert_int_equal(al_standby_count(&cfg, "minimal", "ns", 0), 2);
	assert_int_equal(al_standby_count(&cfg, "minimal", "ns", 3), 1);
	assert_int_equal(al_standby_count(&cfg, "minimal", "ns", 4), 0);
	assert_int_equal(al_standby_count(&cfg, "minimal", "vm", 0), 1);
	assert_int_equal(al_standby_count(&cfg, "minimal-2", "ns", 0), 1);
	assert_int_equal(al_standby_count(&cfg, "minima", "ns", 0), 0);
	/* Every one is alive, and known by its slot. */
	assert_int_equal(al_standby_reap(&cfg), 4);
	assert_true(al_standby_alive(&cfg, b.slot));
	assert_false(al_standby_alive(&cfg, "standby-v3-nosuchslot0"));
	unlink(junk);
	fake_stop(&a);
	fake_stop(&b);
	fake_stop(&c);
	fake_stop(&d);
	assert_int_equal(al_standby_count(&cfg, "minimal", "ns", 0), 0);
}

static void test_claim_takes_its_template_and_driver(void **state)
{
	(void)state;
	fake other_driver, other_tmpl, mine;
	fake_start(&other_driver, "minimal", "vm", 1);
	fake_start(&other_tmpl, "app", "ns", 1);
	al_shim_ready ready = {0};
	/* None of its own: declined, the others untouched. */
	assert_int_equal(claim("sbx-claimer", 1, &ready), AL_DECLINED);
	assert_int_equal(other_driver.ended_by, 0);
	assert_int_equal(other_tmpl.ended_by, 0);

	fake_start(&mine, "minimal", "ns", 1);
	assert_int_equal(claim("sbx-claimer", 1, &ready), 0);
	assert_int_equal(ready.pid, 4242);
	assert_string_equal(ready.accel, "tcg");
	pthread_join(mine.thread, NULL);
	assert_int_equal(mine.ended_by, AL_F_CLAIM);
	/* A claimed standby has left the pool. */
	assert_false(exists(0, &mine));
	assert_int_equal(al_standby_count(&cfg, "minimal", "ns", 0), 0);
	assert_int_equal(other_driver.ended_by, 0);
	assert_int_equal(other_tmpl.ended_by, 0);
	fake_stop(&other_driver);
	fake_stop(&other_tmpl);
}

static void test_retired_leave_the_pool_and_are_ended(void **state)
{
	(void)state;
	fake old, cur, cur2, vm, app;
	fake_start(&old, "minimal", "ns", 1);
	fake_start(&cur, "minimal", "ns", 2);
	fake_start(&cur2, "minimal", "ns", 2);
	fake_start(&vm, "minimal", "vm", 2);
	fake_start(&app, "app", "ns", 1);

	/* The pool shrinks by one: one of minimal/ns goes, at once. */
	assert_int_equal(al_standby_retire_some(&cfg, "minimal", "ns", 1), 1);
	assert_int_equal(al_standby_count(&cfg, "minimal", "ns", 0), 2);
	/* Retired, but its shim still there (and still counted alive, so
	 * that reconcile keeps its rootfs until it is ended). */
	assert_int_equal(al_standby_reap(&cfg), 5);

	/* A template deleted: every driver's go; a claim finds none. */
	assert_int_equal(al_standby_retire_all(&cfg, "minimal", NULL), 3);
	assert_int_equal(al_standby_count(&cfg, "minimal", "ns", 0), 0);
	assert_int_equal(al_standby_count(&cfg, "minimal", "vm", 0), 0);
	assert_int_equal(al_standby_count(&cfg, "app", "ns", 0), 1);
	al_shim_ready ready = {0};
	assert_int_equal(claim("sbx-late", 2, &ready), AL_DECLINED);
	fake *gone[] = {&old, &cur, &cur2, &vm};
	for (size_t i = 0; i < 4; i++) {
		assert_false(exists(0, gone[i]));
		assert_true(exists(1, gone[i]));
		assert_true(al_standby_alive(&cfg, gone[i]->slot));
	}

	/* The controller ends them through their shims: asked to
	 * destroy, each unlinked its socket where it was. */
	assert_int_equal(al_standby_end_retired(&cfg), 4);
	for (size_t i = 0; i < 4; i++) {
		pthread_join(gone[i]->thread, NULL);
		assert_int_equal(gone[i]->ended_by, AL_F_DESTROY);
		assert_false(exists(1, gone[i]));
	}
	assert_int_equal(al_standby_end_retired(&cfg), 0);
	assert_int_equal(app.ended_by, 0);
	fake_stop(&app);
}

static int keep_v2(const char *tmpl, const char *driver, int version, void *arg)
{
	(void)driver;
	(void)arg;
	return strcmp(tmpl, "minimal") == 0 && version == 2;
}

static void test_retire_unless(void **state)
{
	(void)state;
	fake old, cur, gone;
	fake_start(&old, "minimal", "ns", 1);
	fake_start(&cur, "minimal", "vm", 2);
	fake_start(&gone, "deleted", "ns", 2);
	assert_int_equal(al_standby_retire_unless(&cfg, keep_v2, NULL), 2);
	assert_true(exists(1, &old));
	assert_true(exists(1, &gone));
	assert_true(exists(0, &cur));
	assert_int_equal(al_standby_end_retired(&cfg), 2);
	pthread_join(old.thread, NULL);
	pthread_join(gone.thread, NULL);
	assert_int_equal(cur.ended_by, 0);
	fake_stop(&cur);
}

static void test_dead_standbys_are_released(void **state)
{
	(void)state;
	fake live, dead, dead_retired;
	fake_start(&live, "minimal", "ns", 1);
	fake_start(&dead, "minimal", "ns", 1);
	fake_start(&dead_retired, "minimal", "vm", 1);
	assert_int_equal(al_standby_retire_all(&cfg, "minimal", "vm"), 1);
	/* A shim killed: its listener gone, its socket file left. */
	shutdown(dead.fd, SHUT_RDWR);
	pthread_join(dead.thread, NULL);
	close(dead.fd);
	shutdown(dead_retired.fd, SHUT_RDWR);
	pthread_join(dead_retired.thread, NULL);
	close(dead_retired.fd);
	assert_true(exists(0, &dead));
	assert_false(al_standby_alive(&cfg, dead.slot));
	assert_true(al_standby_alive(&cfg, live.slot));

	assert_int_equal(al_standby_reap(&cfg), 1);
	assert_false(exists(0, &dead));
	assert_false(exists(1, &dead_retired));
	assert_true(exists(0, &live));
	assert_int_equal(live.ended_by, 0);
	/* A retired one that died meanwhile is released on its end too. */
	fake again;
	fake_start(&again, "minimal", "vm", 1);
	assert_int_equal(al_standby_retire_all(&cfg, "minimal", "vm"), 1);
	shutdown(again.fd, SHUT_RDWR);
	pthread_join(again.thread, NULL);
	close(again.fd);
	assert_int_equal(al_standby_end_retired(&cfg), 0);
	assert_false(exists(1, &again));
	fake_stop(&live);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_names, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_count_reads_the_names_it_made, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_claim_takes_its_template_and_driver, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_retired_leave_the_pool_and_are_ended, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_retire_unless, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_dead_standbys_are_released,
						setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
