/* A loop-mounted btrfs of the tests' own in a temp dir, for the tests
 * of the pool (test_store, test_poolcap): the group setup mounts it,
 * NEED_BTRFS() skips a test, saying why, where it could not. Needs root
 * and btrfs-progs. */
#ifndef AL_TEST_BTRFS_LOOP_H
#define AL_TEST_BTRFS_LOOP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shrun.h"

static char tmpdir[] = "/tmp/al-pool-XXXXXX";
static char mnt[256];
static char img[256];
static int mounted;
static int made_tmp;
static const char *why_skip = "not set up";

static int group_setup(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		why_skip = "needs root";
		return 0;
	}
	if (run("command -v mkfs.btrfs >/dev/null 2>&1") != 0) {
		why_skip = "mkfs.btrfs not installed";
		return 0;
	}
	if (mkdtemp(tmpdir) == NULL)
		return -1;
	made_tmp = 1;
	snprintf(img, sizeof img, "%s/pool.img", tmpdir);
	snprintf(mnt, sizeof mnt, "%s/mnt", tmpdir);
	if (mkdir(mnt, 0700) < 0)
		return -1;
	if (run("truncate -s 256M %s && mkfs.btrfs -q %s >/dev/null 2>&1 && "
		"mount -o loop %s %s",
		img, img, img, mnt) != 0) {
		why_skip = "cannot make and mount a loop btrfs";
		return 0;
	}
	mounted = 1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	if (mounted)
		umount2(mnt, MNT_DETACH);
	if (made_tmp)
		run("rm -rf %s", tmpdir);
	return 0;
}

#define NEED_BTRFS()                                                           \
	do {                                                                   \
		if (!mounted) {                                                \
			print_message("skip: %s\n", why_skip);                 \
			skip();                                                \
		}                                                              \
	} while (0)

#endif
