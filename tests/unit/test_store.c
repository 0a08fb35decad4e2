/* store: subvolumes, snapshots, qgroup limits and pool checks on a real
 * btrfs (a loop-mounted image in a temp dir). Needs root and btrfs-progs;
 * otherwise every test is reported as skipped. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pool/store.h"

#include "btrfs_loop.h"

static void path(char *out, size_t len, const char *rel)
{
	snprintf(out, len, "%s/%s", mnt, rel);
}

static void write_file(const char *p, const char *content)
{
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(content, f);
	assert_int_equal(fclose(f), 0);
}

static int read_file(const char *p, char *buf, size_t len)
{
	FILE *f = fopen(p, "r");
	if (f == NULL)
		return -1;
	size_t n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
	return 0;
}

static void test_check(void **state)
{
	(void)state;
	NEED_BTRFS();
	al_err err = {0};
	assert_int_equal(al_store_check(mnt, &err), 0);
	/* The temp dir itself is on the host's filesystem, not btrfs. */
	assert_int_equal(al_store_check(tmpdir, &err), -1);
	assert_int_equal(err.code, AL_EUNAVAIL);
	assert_int_equal(al_store_check("/nonexistent/pool", &err), -1);
	assert_int_equal(err.code, AL_ENOENT);
}

static void test_create_and_is_subvol(void **state)
{
	(void)state;
	NEED_BTRFS();
	al_err err = {0};
	char sv[512], plain[512], missing[512];
	path(sv, sizeof sv, "sv1");
	path(plain, sizeof plain, "plain");
	path(missing, sizeof missing, "missing");
	assert_int_equal(al_store_subvol_create(sv, &err), 0);
	assert_int_equal(al_store_is_subvol(sv, &err), 1);
	assert_int_equal(mkdir(plain, 0755), 0);
	assert_int_equal(al_store_is_subvol(plain, &err), 0);
	assert_int_equal(al_store_is_subvol(missing, &err), 0);
	assert_int_equal(al_store_is_subvol(tmpdir, &err), 0); /* not btrfs */

	assert_int_equal(al_store_subvol_create(sv, &err), -1);
	assert_int_equal(err.code, AL_EEXIST);
	char nested[512];
	path(nested, sizeof nested, "no/such/parent");
	assert_int_equal(al_store_subvol_create(nested, &err), -1);
	assert_int_equal(err.code, AL_ENOENT);
}

static void test_snapshot_independent(void **state)
{
	(void)state;
	NEED_BTRFS();
	al_err err = {0};
	char src[512], dst[512], p[600], buf[64];
	path(src, sizeof src, "tmpl");
	path(dst, sizeof dst, "sbx");
	assert_int_equal(al_store_subvol_create(src, &err), 0);
	snprintf(p, sizeof p, "%s/hello", src);
	write_file(p, "template\n");

	assert_int_equal(al_store_snapshot(src, dst, &err), 0);
	assert_int_equal(al_store_is_subvol(dst, &err), 1);
	snprintf(p, sizeof p, "%s/hello", dst);
	assert_int_equal(read_file(p, buf, sizeof buf), 0);
	assert_string_equal(buf, "template\n");

	/* Writes in the snapshot stay there. */
	write_file(p, "changed\n");
	snprintf(p, sizeof p, "%s/new", dst);
	write_file(p, "only in sandbox\n");
	snprintf(p, sizeof p, "%s/hello", src);
	assert_int_equal(read_file(p, buf, sizeof buf), 0);
	assert_string_equal(buf, "template\n");
	snprintf(p, sizeof p, "%s/new", src);
	assert_int_equal(access(p, F_OK), -1);

	/* And writes in the source after the snapshot do not leak in. */
	snprintf(p, sizeof p, "%s/later", src);
	write_file(p, "x");
	snprintf(p, sizeof p, "%s/later", dst);
	assert_int_equal(access(p, F_OK), -1);

	/* dst exists now: a second snapshot onto it fails. */
	assert_int_equal(al_store_snapshot(src, dst, &err), -1);
	assert_int_equal(err.code, AL_EEXIST);
	char missing[512];
	path(missing, sizeof missing, "missing");
	char dst2[512];
	path(dst2, sizeof dst2, "sbx2");
	assert_int_equal(al_store_snapshot(missing, dst2, &err), -1);
	assert_int_equal(access(dst2, F_OK), -1);
}

static void test_delete(void **state)
{
	(void)state;
	NEED_BTRFS();
	al_err err = {0};
	char outer[512], inner[600], p[700], plain[512];
	path(outer, sizeof outer, "del");
	assert_int_equal(al_store_subvol_create(outer, &err), 0);
	/* A subvolume a sandbox made inside its root. */
	snprintf(inner, sizeof inner, "%s/inner", outer);
	assert_int_equal(al_store_subvol_create(inner, &err), 0);
	snprintf(p, sizeof p, "%s/f", inner);
	write_file(p, "x");

	assert_int_equal(al_store_subvol_delete(outer, &err), 0);
	assert_int_equal(access(outer, F_OK), -1);
	assert_int_equal(errno, ENOENT);
	/* Idempotent. */
	assert_int_equal(al_store_subvol_delete(outer, &err), 0);

	/* A plain directory is refused and left alone. */
	path(plain, sizeof plain, "plaindel");
	assert_int_equal(mkdir(plain, 0755), 0);
	assert_int_equal(al_store_subvol_delete(plain, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	assert_int_equal(access(plain, F_OK), 0);
}

/* Write up to mb MiB of fresh data to p, fsync'ed; the whole MiB written
 * before the first failure, its errno in *e (0: none). A short write is
 * not a failure: the next write says why it was short. */
static int fill(const char *p, int mb, int *e)
{
	static char buf[1 << 20];
	memset(buf, 0xa5, sizeof buf);
	*e = 0;
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	uint64_t total = (uint64_t)mb << 20, done = 0;
	while (done < total) {
		size_t chunk = sizeof buf - (size_t)(done % sizeof buf);
		ssize_t n = write(fd, buf, chunk);
		if (n < 0) {
			*e = errno;
			break;
		}
		done += (uint64_t)n;
	}
	if (*e == 0 && fsync(fd) < 0)
		*e = errno;
	close(fd);
	return (int)(done >> 20);
}

/* Runs before test_quota turns quotas on. */
static void test_limit_needs_quota(void **state)
{
	(void)state;
	NEED_BTRFS();
	al_err err = {0};
	char sv[512];
	path(sv, sizeof sv, "noquota");
	assert_int_equal(al_store_subvol_create(sv, &err), 0);
	assert_int_equal(al_store_limit(sv, 8u << 20, &err), -1);
	assert_int_equal(err.code, AL_EUNAVAIL);
	assert_non_null(strstr(err.msg, "quotas are off"));
	char missing[512];
	path(missing, sizeof missing, "missing-sv");
	assert_int_equal(al_store_limit(missing, 8u << 20, &err), -1);
	assert_int_equal(err.code, AL_ENOENT);
}

/* The cap on a pool under root whose quotas are on, in either mode. */
static void check_cap(const char *root)
{
	al_err err = {0};
	char tmpl[512], sbx[512], nb[512], p[600];
	/* A template bigger than the sandbox's cap: shared extents are
	 * not the sandbox's to pay for. */
	snprintf(tmpl, sizeof tmpl, "%s/qtmpl", root);
	assert_int_equal(al_store_subvol_create(tmpl, &err), 0);
	snprintf(p, sizeof p, "%s/big", tmpl);
	int e;
	assert_int_equal(fill(p, 24, &e), 24);
	assert_int_equal(e, 0);
	snprintf(sbx, sizeof sbx, "%s/qsbx", root);
	snprintf(nb, sizeof nb, "%s/qneighbour", root);
	assert_int_equal(al_store_snapshot(tmpl, sbx, &err), 0);
	assert_int_equal(al_store_snapshot(tmpl, nb, &err), 0);
	assert_int_equal(al_store_limit(sbx, 8u << 20, &err), 0);
	assert_int_equal(al_store_limit(nb, 64u << 20, &err), 0);

	/* 32 MiB of new data into an 8 MiB cap: stops near 8 MiB with
	 * EDQUOT (what a writer in the sandbox sees). */
	snprintf(p, sizeof p, "%s/new", sbx);
	int got = fill(p, 32, &e);
	print_message("capped at 8 MiB: wrote %d MiB, then %s\n", got,
		      strerror(e));
	assert_int_equal(e, EDQUOT);
	assert_in_range(got, 4, 9);

	/* The neighbour's writes are untouched by it. */
	snprintf(p, sizeof p, "%s/new", nb);
	assert_int_equal(fill(p, 32, &e), 32);
	assert_int_equal(e, 0);

	/* Lifting the cap lets the sandbox write again. */
	assert_int_equal(al_store_limit(sbx, 0, &err), 0);
	snprintf(p, sizeof p, "%s/more", sbx);
	assert_int_equal(fill(p, 16, &e), 16);
	assert_int_equal(e, 0);
}

/* Simple quotas where the kernel has them (Linux 6.7), else full. */
static void test_quota(void **state)
{
	(void)state;
	NEED_BTRFS();
	al_err err = {0};
	assert_int_equal(al_store_quota_enable(mnt, &err), 0);
	assert_int_equal(al_store_quota_enable(mnt, &err), 0); /* again */
	check_cap(mnt);
}

/* A pool whose full qgroups were on before (what Debian 12's kernel
 * has): enabling is a no-op and the cap works the same. */
static void test_quota_full_qgroups(void **state)
{
	(void)state;
	NEED_BTRFS();
	char img2[300], mnt2[300];
	snprintf(img2, sizeof img2, "%s/full.img", tmpdir);
	snprintf(mnt2, sizeof mnt2, "%s/full", tmpdir);
	assert_int_equal(mkdir(mnt2, 0700), 0);
	if (run("truncate -s 256M %s && mkfs.btrfs -q %s >/dev/null 2>&1 && "
		"mount -o loop %s %s && btrfs quota enable %s",
		img2, img2, img2, mnt2, mnt2) != 0) {
		umount2(mnt2, MNT_DETACH);
		fail_msg("cannot make a second loop btrfs with full qgroups");
	}
	al_err err = {0};
	assert_int_equal(al_store_quota_enable(mnt2, &err), 0);
	check_cap(mnt2);
	umount2(mnt2, MNT_DETACH);
}

/* Groups over sandboxes (core/pool/poolcap.h's levels): a project's group
 * caps what its sandboxes write together, the group of all caps the
 * projects together, and a sandbox moved between groups takes its data
 * with it. Runs after test_quota turned quotas on. */
static void test_groups(void **state)
{
	(void)state;
	NEED_BTRFS();
	al_err err = {0};
	const uint64_t all = AL_STORE_QGROUP(2, 0), a = AL_STORE_QGROUP(1, 1),
		       b = AL_STORE_QGROUP(1, 2), idle = AL_STORE_QGROUP(1, 3);
	assert_int_equal(al_store_group_set(mnt, all, 0, 48u << 20, &err), 0);
	assert_int_equal(al_store_group_set(mnt, a, all, 24u << 20, &err), 0);
	assert_int_equal(al_store_group_set(mnt, b, all, 40u << 20, &err), 0);
	assert_int_equal(al_store_group_set(mnt, idle, all, 0, &err), 0);
	/* Again: idempotent, and a new cap replaces the old. */
	assert_int_equal(al_store_group_set(mnt, a, all, 16u << 20, &err), 0);
	uint64_t used, cap;
	assert_int_equal(al_store_group_usage(mnt, a, &used, &cap, &err), 0);
	assert_int_equal(cap, 16u << 20);
	assert_int_equal(al_store_group_usage(mnt, idle, &used, &cap, &err), 0);
	assert_int_equal(cap, 0);
	/* A level-0 group, or a parent not above the group, is refused. */
	assert_int_equal(al_store_group_set(mnt, AL_STORE_QGROUP(0, 7), 0, 0,
					    &err),
			 -1);
	assert_int_equal(al_store_group_set(mnt, a, b, 0, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	assert_int_equal(al_store_group_usage(mnt, AL_STORE_QGROUP(1, 99),
					      &used, &cap, &err),
			 -1);
	assert_int_equal(err.code, AL_ENOENT);

	char tmpl[512], a1[512], a2[512], b1[512], p[600];
	path(tmpl, sizeof tmpl, "gtmpl");
	path(a1, sizeof a1, "ga1");
	path(a2, sizeof a2, "ga2");
	path(b1, sizeof b1, "gb1");
	assert_int_equal(al_store_subvol_create(tmpl, &err), 0);
	assert_int_equal(al_store_snapshot(tmpl, a1, &err), 0);
	assert_int_equal(al_store_snapshot(tmpl, a2, &err), 0);
	assert_int_equal(al_store_snapshot(tmpl, b1, &err), 0);
	/* a2 starts as a standby would, in the idle group, and moves. */
	assert_int_equal(al_store_group_join(a1, a, 0, &err), 0);
	assert_int_equal(al_store_group_join(a2, idle, 0, &err), 0);
	assert_int_equal(al_store_group_join(a2, a, idle, &err), 0);
	assert_int_equal(al_store_group_join(a2, a, idle, &err), 0); /* again */
	assert_int_equal(al_store_group_join(b1, b, 0, &err), 0);

	/* Two sandboxes of project a, each uncapped on its own: together
	 * they stop near a's 16 MiB. */
	int e1, e2, e;
	snprintf(p, sizeof p, "%s/f", a1);
	int w1 = fill(p, 12, &e1);
	snprintf(p, sizeof p, "%s/f", a2);
	int w2 = fill(p, 12, &e2);
	print_message("project a (16 MiB): %d + %d MiB, then %s\n", w1, w2,
		      strerror(e2));
	assert_int_equal(e1, 0);
	assert_int_equal(e2, EDQUOT);
	assert_in_range(w1 + w2, 12, 17);
	sync();
	assert_int_equal(al_store_group_usage(mnt, a, &used, &cap, &err), 0);
	assert_in_range(used >> 20, 12, 17);

	/* Project b still writes, until all sandboxes reach 48 MiB. */
	snprintf(p, sizeof p, "%s/f", b1);
	int wb = fill(p, 40, &e);
	print_message("project b after a: %d MiB, then %s\n", wb, strerror(e));
	assert_int_equal(e, EDQUOT);
	assert_in_range(wb + w1 + w2, 40, 49);
	assert_true(wb >= 24);
	sync();
	assert_int_equal(al_store_group_usage(mnt, all, &used, &cap, &err), 0);
	assert_int_equal(cap, 48u << 20);
	assert_in_range(used >> 20, 40, 49);

	/* A deleted sandbox gives its group its room back. */
	assert_int_equal(al_store_subvol_delete(a1, &err), 0);
	assert_int_equal(al_store_subvol_delete(a2, &err), 0);
	assert_int_equal(al_store_subvol_delete(b1, &err), 0);
	assert_int_equal(al_store_subvol_delete(tmpl, &err), 0);
	/* The kernel's cleaner frees a deleted subvolume's extents in the
	 * background; this waits for it. */
	assert_int_equal(run("btrfs subvolume sync %s", mnt), 0);
	sync();
	assert_int_equal(al_store_group_usage(mnt, all, &used, &cap, &err), 0);
	print_message("all sandboxes after their deletes: %llu bytes\n",
		      (unsigned long long)used);
	assert_true(used < (1u << 20));
	/* Lift the cap: later tests write freely. */
	assert_int_equal(al_store_group_set(mnt, all, 0, 0, &err), 0);
}

static void test_room(void **state)
{
	(void)state;
	NEED_BTRFS();
	al_err err = {0};
	unsigned before, after;
	char p[600];
	assert_int_equal(al_store_used_pct(mnt, &before, &err), 0);
	assert_in_range(before, 1, 90);
	assert_int_equal(al_store_room(mnt, before + 1, &err), 0);

	/* Take most of what is left. */
	struct statvfs sv;
	assert_int_equal(statvfs(mnt, &sv), 0);
	off_t take = (off_t)((double)sv.f_bavail * sv.f_frsize * 0.8);
	snprintf(p, sizeof p, "%s/ballast", mnt);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(fallocate(fd, 0, 0, take), 0);
	assert_int_equal(fsync(fd), 0);
	close(fd);
	sync();
	assert_int_equal(al_store_used_pct(mnt, &after, &err), 0);
	print_message("pool used: %u %% before, %u %% with ballast\n", before,
		      after);
	assert_true(after >= before + 5 && after < 100);
	assert_int_equal(al_store_room(mnt, before + 1, &err), -1);
	assert_int_equal(err.code, AL_ENOSPACE);
	assert_non_null(strstr(err.msg, "AIRLOCK_POOL_FULL_PCT"));
	assert_int_equal(al_store_room(mnt, after, &err), -1);
	assert_int_equal(al_store_room(mnt, after + 1, &err), 0);
	assert_int_equal(unlink(p), 0);

	assert_int_equal(al_store_used_pct("/nonexistent/pool", &after, &err),
			 -1);
	assert_int_equal(err.code, AL_ENOENT);
}

static void test_on_pool(void **state)
{
	(void)state;
	NEED_BTRFS();
	al_err err = {0};
	char dir[512], sv[512];
	path(dir, sizeof dir, "plain-on-pool");
	assert_int_equal(mkdir(dir, 0700), 0);
	path(sv, sizeof sv, "sv-on-pool");
	assert_int_equal(al_store_subvol_create(sv, &err), 0);
	assert_int_equal(al_store_on_pool(mnt, mnt, &err), 1);
	assert_int_equal(al_store_on_pool(mnt, dir, &err), 1);
	/* Another subvolume has its own st_dev but is the same pool. */
	assert_int_equal(al_store_on_pool(mnt, sv, &err), 1);
	assert_int_equal(al_store_on_pool(mnt, tmpdir, &err), 0);
	assert_int_equal(al_store_on_pool(mnt, "/nonexistent/x", &err), -1);
	assert_int_equal(err.code, AL_ENOENT);
	assert_int_equal(al_store_on_pool(tmpdir, tmpdir, &err), -1);
	assert_int_equal(err.code, AL_EUNAVAIL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_create_and_is_subvol),
		cmocka_unit_test(test_snapshot_independent),
		cmocka_unit_test(test_delete),
		cmocka_unit_test(test_limit_needs_quota),
		cmocka_unit_test(test_quota),
		cmocka_unit_test(test_quota_full_qgroups),
		cmocka_unit_test(test_groups),
		cmocka_unit_test(test_room),
		cmocka_unit_test(test_on_pool),
	};
	return cmocka_run_group_tests_name("store", tests, group_setup,
					   group_teardown);
}
