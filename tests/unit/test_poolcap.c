/* poolcap: the share of the pool sandboxes may write, each project's part
 * of it, and a create's disk against them; on a loop btrfs of the test's
 * own (btrfs_loop.h), whose tests are skipped, saying why, without root. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pool/poolcap.h"

#include "btrfs_loop.h"

#define MIB ((uint64_t)1 << 20)

static al_config cfg_for(uint64_t reserve_mb, uint32_t pct)
{
	al_config c;
	memset(&c, 0, sizeof c);
	snprintf(c.pool_dir, sizeof c.pool_dir, "%s", mnt);
	c.pool_reserve_mb = reserve_mb;
	c.pool_project_pct = pct;
	return c;
}

static void test_arithmetic(void **state)
{
	(void)state;
	al_config c = cfg_for(0, 50);
	/* No reserve set: a tenth of the pool. */
	assert_int_equal(al_poolcap_reserve(&c, 1000 * MIB), 100 * MIB);
	c.pool_reserve_mb = 300;
	assert_int_equal(al_poolcap_reserve(&c, 1000 * MIB), 300 * MIB);
	/* What sandboxes hold plus what is free beyond the reserve. */
	assert_int_equal(al_poolcap_share_of(200, 500, 300), 400);
	assert_int_equal(al_poolcap_share_of(200, 100, 300), 200);
	assert_int_equal(al_poolcap_share_of(0, 0, 0), 0);
	/* Half the share, never above the project's quota. */
	assert_int_equal(al_poolcap_project_bytes(&c, 1000 * MIB, 1 << 20),
			 500 * MIB);
	assert_int_equal(al_poolcap_project_bytes(&c, 1000 * MIB, 64),
			 64 * MIB);
	c.pool_project_pct = 100;
	assert_int_equal(al_poolcap_project_bytes(&c, 1000 * MIB, UINT64_MAX),
			 1000 * MIB);
}

static void fill(const char *dir, int mb, int *e)
{
	static char buf[1 << 20];
	char p[600];
	snprintf(p, sizeof p, "%s/fill", dir);
	memset(buf, 0x5a, sizeof buf);
	*e = 0;
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	for (int i = 0; i < mb && *e == 0; i++)
		if (write(fd, buf, sizeof buf) < 0)
			*e = errno;
	if (*e == 0 && fsync(fd) < 0)
		*e = errno;
	close(fd);
}

/* From the controller's start to a project at its cap. */
static void test_pool(void **state)
{
	(void)state;
	NEED_BTRFS();
	al_err err = {0};
	assert_int_equal(al_store_quota_enable(mnt, &err), 0);

	/* A reserve as big as the pool: said at start, naming it. */
	al_config c = cfg_for(1 << 20, 50);
	assert_int_equal(al_poolcap_init(&c, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	assert_non_null(strstr(err.msg, "AIRLOCK_POOL_RESERVE_MB"));

	/* 256 MiB pool, 128 MiB reserve: sandboxes share the rest less
	 * what the filesystem itself holds. */
	c = cfg_for(128, 50);
	assert_int_equal(al_poolcap_init(&c, &err), 0);
	uint64_t share, used, cap;
	assert_int_equal(al_poolcap_share(&c, &share, &err), 0);
	print_message("share of a 256 MiB pool, 128 MiB kept: %llu MiB\n",
		      (unsigned long long)(share / MIB));
	assert_in_range(share / MIB, 40, 128);
	assert_int_equal(al_store_group_usage(mnt, AL_POOLCAP_ALL, &used, &cap,
					      &err),
			 0);
	assert_int_equal(cap, share);

	/* A disk bigger than the project's half: refused when asked,
	 * lowered when it was only the default. */
	uint64_t disk = 4096 * MIB, gcap;
	assert_int_equal(al_poolcap_admit(&c, 1, 1 << 20, 1, &disk, &gcap,
					  &err),
			 -1);
	assert_int_equal(err.code, AL_EINVAL);
	assert_non_null(strstr(err.msg, "'disk_mb' is at most"));
	assert_non_null(strstr(err.msg, "AIRLOCK_POOL_PROJECT_PCT"));
	assert_int_equal(al_poolcap_admit(&c, 1, 1 << 20, 0, &disk, &gcap,
					  &err),
			 0);
	assert_int_equal(disk, gcap);
	assert_int_equal(gcap, share / 100 * 50);
	/* A project's own quota below its half is its cap. */
	disk = 8 * MIB;
	assert_int_equal(al_poolcap_admit(&c, 2, 16, 1, &disk, &gcap, &err), 0);
	assert_int_equal(gcap, 16 * MIB);

	/* A standby joins the standbys' group, then is claimed by project
	 * 1; a second sandbox of it starts in its group directly. */
	char tmpl[512], s1[512], s2[512];
	snprintf(tmpl, sizeof tmpl, "%s/pc-tmpl", mnt);
	snprintf(s1, sizeof s1, "%s/pc-s1", mnt);
	snprintf(s2, sizeof s2, "%s/pc-s2", mnt);
	assert_int_equal(al_store_subvol_create(tmpl, &err), 0);
	assert_int_equal(al_store_snapshot(tmpl, s1, &err), 0);
	assert_int_equal(al_store_snapshot(tmpl, s2, &err), 0);
	assert_int_equal(al_poolcap_join(&c, s1, 0, 0, 0, &err), 0);
	assert_int_equal(al_poolcap_join(&c, s1, 1, 24 * MIB, 1, &err), 0);
	assert_int_equal(al_poolcap_join(&c, s2, 1, 24 * MIB, 0, &err), 0);
	int e1, e2;
	fill(s1, 16, &e1);
	fill(s2, 16, &e2);
	assert_int_equal(e1, 0);
	assert_int_equal(e2, EDQUOT);
	sync();
	assert_int_equal(al_poolcap_project_usage(&c, 1, &used, &cap, &err), 0);
	print_message("project 1 at its 24 MiB cap: %llu MiB written\n",
		      (unsigned long long)(used / MIB));
	assert_int_equal(cap, 24 * MIB);
	/* At its cap, the project's next create is refused: its sandbox
	 * could not write a byte. Another project's is not. */
	c.pool_project_pct = 100;
	disk = 16 * MIB;
	assert_int_equal(al_store_group_set(mnt, AL_POOLCAP_PROJECT(1),
					    AL_POOLCAP_ALL, used, &err),
			 0);
	assert_int_equal(al_poolcap_admit(&c, 1, used / MIB, 1, &disk, &gcap,
					  &err),
			 -1);
	assert_int_equal(err.code, AL_EQUOTA);
	assert_non_null(strstr(err.msg, "this project's sandboxes have"));
	disk = 16 * MIB;
	assert_int_equal(al_poolcap_admit(&c, 3, 1 << 20, 1, &disk, &gcap,
					  &err),
			 0);
	/* A project without a group yet has used nothing. */
	assert_int_equal(al_poolcap_project_usage(&c, 3, &used, &cap, &err), 0);
	assert_int_equal(used, 0);
	assert_int_equal(cap, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arithmetic),
		cmocka_unit_test(test_pool),
	};
	return cmocka_run_group_tests_name("poolcap", tests, group_setup,
					   group_teardown);
}
