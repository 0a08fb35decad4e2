/* bench/snapshot: what disk quotas cost a sandbox's start on the pool.
 *
 *   snapshot --pool DIR [--rounds N] [--quota full|simple]
 *
 * DIR is an empty btrfs (bench/snapshot.sh makes one loop image per
 * mode: no quotas, full qgroups, simple quotas). Builds a template
 * subvolume (BENCH_SNAPSHOT_DIRS x 100 small files, default 20, and 64
 * MiB of data), then times N snapshots of it the way the shim makes a
 * sandbox root (al_store_snapshot, plus al_store_limit with quotas), in
 * two series: an idle pool, and a busy one where 8 MiB were written to
 * another subvolume just before each snapshot (with full qgroups a
 * snapshot commits the transaction to account it, which then carries
 * that dirty data). Prints p50/p90/max in milliseconds per series. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/btrfs.h>

#include "pool/store.h"

/* The mode is the bench's choice; al_store_quota_enable picks simple
 * where the kernel has it. */
static int quota_on(const char *pool, int simple)
{
	int fd = open(pool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct btrfs_ioctl_quota_ctl_args a = {.cmd = simple ? 4 : 1};
	int rc = fd < 0 ? -1 : ioctl(fd, BTRFS_IOC_QUOTA_CTL, &a);
	if (rc < 0)
		perror("quota ctl");
	if (fd >= 0)
		close(fd);
	return rc;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int write_bytes(const char *path, size_t n)
{
	static char buf[1 << 20];
	memset(buf, 0x5a, sizeof buf);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	while (n > 0) {
		size_t c = n < sizeof buf ? n : sizeof buf;
		if (write(fd, buf, c) != (ssize_t)c) {
			close(fd);
			return -1;
		}
		n -= c;
	}
	return close(fd);
}

static int tmpl_dirs = 20;

static int make_template(const char *dir, al_err *err)
{
	char p[4096];
	if (al_store_subvol_create(dir, err) < 0)
		return -1;
	for (int d = 0; d < tmpl_dirs; d++) {
		snprintf(p, sizeof p, "%.1000s/d%d", dir, d);
		if (mkdir(p, 0755) < 0)
			return al_err_sys(err, AL_ESYS, errno, "mkdir %s", p);
		for (int f = 0; f < 100; f++) {
			snprintf(p, sizeof p, "%.1000s/d%d/f%d", dir, d, f);
			if (write_bytes(p, 2048) < 0)
				return al_err_sys(err, AL_ESYS, errno, "%s", p);
		}
	}
	snprintf(p, sizeof p, "%.1000s/big", dir);
	if (write_bytes(p, 64u << 20) < 0)
		return al_err_sys(err, AL_ESYS, errno, "%s", p);
	sync();
	return 0;
}

static void report(const char *label, double *t, int n)
{
	qsort(t, (size_t)n, sizeof *t, cmp_d);
	printf("%-40s p50 %7.3f  p90 %7.3f  max %7.3f ms  (n=%d)\n", label,
	       t[n / 2], t[(n * 9) / 10], t[n - 1], n);
}

/* One series: n snapshots (+ limits); busy: dirty the neighbour first. */
static int series(const char *pool, const char *tmpl, int n, int quota,
		  int busy, double *snap, double *lim, al_err *err)
{
	char dst[4096], dirty[4096];
	snprintf(dirty, sizeof dirty, "%.900s/neighbour/dirty", pool);
	for (int i = 0; i < n; i++) {
		snprintf(dst, sizeof dst, "%.900s/s%d-%d", pool, busy, i);
		if (busy && write_bytes(dirty, 8u << 20) < 0)
			return al_err_sys(err, AL_ESYS, errno, "%s", dirty);
		double t0 = now_ms();
		if (al_store_snapshot(tmpl, dst, err) < 0)
			return -1;
		double t1 = now_ms();
		if (quota && al_store_limit(dst, 64u << 20, err) < 0)
			return -1;
		snap[i] = t1 - t0;
		lim[i] = now_ms() - t1;
	}
	for (int i = 0; i < n; i++) {
		snprintf(dst, sizeof dst, "%.900s/s%d-%d", pool, busy, i);
		if (al_store_subvol_delete(dst, err) < 0)
			return -1;
	}
	sync();
	return 0;
}

int main(int argc, char **argv)
{
	const char *pool = NULL;
	int rounds = 100, quota = 0;
	if (getenv("BENCH_SNAPSHOT_DIRS") != NULL)
		tmpl_dirs = atoi(getenv("BENCH_SNAPSHOT_DIRS"));
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--pool") == 0 && i + 1 < argc)
			pool = argv[++i];
		else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (strcmp(argv[i], "--quota") == 0 && i + 1 < argc)
			quota = strcmp(argv[++i], "simple") == 0 ? 2 : 1;
		else
			pool = NULL, i = argc;
	}
	if (pool == NULL || rounds < 2 || rounds > 10000) {
		fprintf(stderr, "usage: snapshot --pool DIR [--rounds N] "
				"[--quota full|simple]\n");
		return 100;
	}
	al_err err = {0};
	char tmpl[1024], nb[1024];
	snprintf(tmpl, sizeof tmpl, "%.900s/template", pool);
	snprintf(nb, sizeof nb, "%.900s/neighbour", pool);
	if (quota && quota_on(pool, quota == 2) < 0)
		return 111;
	if (al_store_check(pool, &err) < 0 || make_template(tmpl, &err) < 0 ||
	    al_store_subvol_create(nb, &err) < 0) {
		fprintf(stderr, "snapshot: %s\n", err.msg);
		return 111;
	}
	double *snap = calloc((size_t)rounds, sizeof *snap);
	double *lim = calloc((size_t)rounds, sizeof *lim);
	if (snap == NULL || lim == NULL)
		return 111;
	const char *q = quota == 2   ? "simple quotas"
			: quota == 1 ? "full qgroups"
				     : "quotas off";
	for (int busy = 0; busy < 2; busy++) {
		if (series(pool, tmpl, rounds, quota, busy, snap, lim, &err) <
		    0) {
			fprintf(stderr, "snapshot: %s\n", err.msg);
			return 111;
		}
		char label[80];
		snprintf(label, sizeof label, "snapshot, %s, %s", q,
			 busy ? "busy pool" : "idle pool");
		report(label, snap, rounds);
		if (quota) {
			snprintf(label, sizeof label, "qgroup limit, %s, %s", q,
				 busy ? "busy pool" : "idle pool");
			report(label, lim, rounds);
		}
	}
	free(snap);
	free(lim);
	return 0;
}
