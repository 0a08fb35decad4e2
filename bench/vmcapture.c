/* bench/vmcapture: a vm suspend's capture beside QEMU's own way, at the
 * driver level (the peer of bench/lifecycle_api.py's API suspend).
 *
 *   vmcapture --template STATE/pool/templates/minimal [--rounds 3]
 *             [--mib 64]
 *
 * Runs with AIRLOCK_STATE set to a running stack's (its pool, guest
 * kernel and the controller's vm-mem server, which shares the template's
 * RAM): each round starts a vm from a btrfs snapshot of the template as
 * a shim does (no network), lets the guest write MIB MiB into a tmpfs
 * (guest RAM), quiets its agent (PAUSE), stops it, and then
 *   capture  the driver's capture() into a fresh directory on the pool
 *            (vm/capture.h: device state, pagemap scan, the written
 *            pages into a reflink of the template's RAM, fsynced);
 *   peer     QEMU's migrate of the same stopped VM to a file on the
 *            pool (fd:, then fsync): the plain way to save a VM.
 * Then: the pagemap scan alone over a mapping of the guest's RAM size
 * and of 4x that, 64 MiB written in each (this process's own mappings:
 * every vm has one RAM size, AL_VM_MEM_MB, so no 4x guest can be made;
 * the scan is the only step of a capture that grows with RAM size).
 * Prints p50/max per step and key=value lines. Exit 0 when every round
 * ran. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "base/config.h"
#include "base/log.h"
#include "driver.h"
#include "proto/agentproto.h"
#include "vm/capture.h"
#include "vm/guest.h"
#include "vm/machine.h"

#define ANSWER_MS 120000
#define MAX_ROUNDS 50

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

static double p50(const double *xs, int n)
{
	double s[MAX_ROUNDS];
	memcpy(s, xs, (size_t)n * sizeof *s);
	qsort(s, (size_t)n, sizeof *s, cmp_d);
	return s[(n - 1) / 2];
}

static double maxof(const double *xs, int n)
{
	double m = xs[0];
	for (int i = 1; i < n; i++)
		m = xs[i] > m ? xs[i] : m;
	return m;
}

static int sh(const char *cmd)
{
	return system(cmd) == 0 ? 0 : -1;
}

/* The agent's first frame: HELLO. */
static int hello(int fd, al_frame_reader *r, al_err *err)
{
	al_frame f;
	if (al_frame_recv(fd, r, &f, al_now_ms() + ANSWER_MS, err) < 0)
		return -1;
	int ok = f.type == AL_F_HELLO;
	al_frame_free(&f);
	return ok ? 0 : al_err_set(err, AL_EPROTO, 0, "no HELLO");
}

/* sh -c cmd in the guest, to its EXIT: 0 when it exited 0. */
static int guest_sh(int fd, al_frame_reader *r, uint32_t id, const char *cmd,
		    al_err *err)
{
	json_object *req = json_object_new_object(),
		    *a = json_object_new_array();
	json_object_array_add(a, json_object_new_string("sh"));
	json_object_array_add(a, json_object_new_string("-c"));
	json_object_array_add(a, json_object_new_string(cmd));
	json_object_object_add(req, "cmd", a);
	json_object_object_add(req, "stdin", json_object_new_boolean(0));
	const char *s = json_object_to_json_string(req);
	int rc = al_frame_send(fd, AL_F_EXEC, id, s, strlen(s), err);
	json_object_put(req);
	while (rc == 0) {
		al_frame f;
		if (al_frame_recv(fd, r, &f, al_now_ms() + ANSWER_MS, err) < 0)
			return -1;
		uint16_t t = f.id == id ? f.type : 0;
		if (t == AL_F_ERROR || t == AL_F_EXIT) {
			json_object *o = json_tokener_parse((char *)f.payload);
			json_object *v = NULL;
			int code = json_object_object_get_ex(o, "exit_code", &v)
					   ? json_object_get_int(v)
					   : -1;
			json_object_put(o);
			al_frame_free(&f);
			return code == 0 ? 0
					 : al_err_set(err, AL_EPROTO, 0,
						      "%s: exit %d", cmd, code);
		}
		al_frame_free(&f);
	}
	return -1;
}

/* A request answered by RESULT (PAUSE, RESUME). */
static int agent_request(int fd, al_frame_reader *r, uint16_t type, uint32_t id,
			 al_err *err)
{
	if (al_frame_send(fd, type, id, "{}", 2, err) < 0)
		return -1;
	for (;;) {
		al_frame f;
		if (al_frame_recv(fd, r, &f, al_now_ms() + ANSWER_MS, err) < 0)
			return -1;
		int mine = f.id == id;
		uint16_t t = f.type;
		al_frame_free(&f);
		if (mine)
			return t == AL_F_RESULT
				       ? 0
				       : al_err_set(err, AL_EPROTO, 0,
						    "%s answered %s",
						    al_frame_type_name(type),
						    al_frame_type_name(t));
	}
}

typedef struct round_ms {
	double capture, state, scan, write, migrate;
	double cap_mib, mig_mib;
	uint64_t dirty;
} round_ms;

/* One round: a vm of the template, MIB written, captured, migrated. */
static int one_round(const al_driver *drv, const char *tmpl, const char *pool,
		     int k, int mib, round_ms *o, al_err *err)
{
	char id[32], root[1024], dir[1100], mig[1100], cmd[4096];
	snprintf(id, sizeof id, "vmcapture-%d-%d", (int)getpid(), k);
	snprintf(root, sizeof root, "%.900s/bench-%s", pool, id);
	snprintf(cmd, sizeof cmd,
		 "btrfs -q subvolume snapshot %s %s >/dev/null", tmpl, root);
	if (sh(cmd) < 0)
		return al_err_set(err, AL_ESYS, 0, "%s failed", cmd);
	al_sandbox_spec s = {.id = id,
			     .rootfs = root,
			     .hostname = id,
			     .agent = "/sbin/airlock-agent"};
	al_driver_handle h;
	al_frame_reader r;
	al_frame_reader_init(&r);
	int rc = -1, started = 0;
	struct stat sb;
	snprintf(dir, sizeof dir, "%s/capture", root);
	snprintf(mig, sizeof mig, "%s/migrate.bin", root);
	if (drv->start(&s, &h, err) < 0)
		goto out;
	started = 1;
	snprintf(cmd, sizeof cmd,
		 "mkdir -p /fill && mount -t tmpfs -o size=%dm fill /fill && "
		 "dd if=/dev/urandom of=/fill/a bs=1M count=%d 2>/dev/null",
		 mib + 16, mib);
	if (hello(h.agent_fd, &r, err) < 0 ||
	    guest_sh(h.agent_fd, &r, 1, cmd, err) < 0 ||
	    agent_request(h.agent_fd, &r, AL_F_PAUSE, AL_REQ_ID_PAUSE, err) <
		    0 ||
	    drv->pause(&h, err) < 0)
		goto out;
	if (mkdir(dir, 0700) < 0) {
		al_err_sys(err, AL_ESYS, errno, "mkdir %s", dir);
		goto out;
	}
	al_capture_stats st = {0};
	double t = now_ms();
	if (drv->capture(&h, dir, &st, err) < 0)
		goto out;
	o->capture = now_ms() - t;
	o->state = st.state_ms;
	o->scan = st.scan_ms;
	o->write = st.write_ms;
	o->dirty = st.dirty_pages;
	o->cap_mib = (double)st.bytes / 1048576.0;
	int fd = open(mig, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		al_err_sys(err, AL_ESYS, errno, "open %s", mig);
		goto out;
	}
	t = now_ms();
	int m = al_vm_machine_save(al_vm_driver_machine(&h), fd, err);
	if (m == 0 && fsync(fd) < 0)
		m = al_err_sys(err, AL_ESYS, errno, "fsync %s", mig);
	o->migrate = now_ms() - t;
	if (m == 0 && fstat(fd, &sb) == 0)
		o->mig_mib = (double)sb.st_size / 1048576.0;
	close(fd);
	rc = m;
out:
	if (started) {
		al_err e2 = {0};
		if (drv->stop(&h, &e2) < 0)
			fprintf(stderr, "vmcapture: stop %s: %s\n", id, e2.msg);
	}
	al_frame_reader_free(&r);
	snprintf(cmd, sizeof cmd,
		 "rm -rf %s/capture %s/migrate.bin; btrfs -q subvolume delete "
		 "%s >/dev/null",
		 root, root, root);
	if (sh(cmd) < 0)
		fprintf(stderr, "vmcapture: could not remove %s\n", root);
	return rc;
}

/* The pagemap scan of a private mapping of ram bytes, 64 MiB of it
 * written: the one step of a capture that grows with the RAM's size. */
static double scan_ms(uint64_t ram, al_err *err)
{
	int fd = memfd_create("vmcapture-scan", MFD_CLOEXEC);
	struct stat sb;
	if (fd < 0 || ftruncate(fd, (off_t)ram) < 0 || fstat(fd, &sb) < 0)
		return al_err_sys(err, AL_ESYS, errno, "memfd");
	uint8_t *p = mmap(NULL, ram, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd,
			  0);
	uint8_t *map = calloc(1, ram / 4096 / 8);
	int self = al_vmcap_proc_open(getpid(), -1, err);
	double ms = -1;
	if (p != MAP_FAILED && map != NULL && self >= 0) {
		for (uint64_t i = 0; i < (64u << 20); i += 4096)
			p[(i * 3) % ram] = 1;
		uint64_t start;
		double t = now_ms();
		if (al_vmcap_dirty_pages(self, sb.st_dev, sb.st_ino, ram, map,
					 &start, err) == 0)
			ms = now_ms() - t;
	}
	if (self >= 0)
		close(self);
	free(map);
	if (p != MAP_FAILED)
		munmap(p, ram);
	close(fd);
	return ms;
}

int main(int argc, char **argv)
{
	const char *tmpl = NULL;
	int rounds = 3, mib = 64;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--template") == 0 && i + 1 < argc)
			tmpl = argv[++i];
		else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc)
			mib = atoi(argv[++i]);
		else
			tmpl = NULL, i = argc;
	}
	if (tmpl == NULL || rounds < 1 || rounds > MAX_ROUNDS || mib < 1 ||
	    mib > AL_VM_MEM_MB / 2) {
		fprintf(stderr,
			"usage: vmcapture --template DIR [--rounds "
			"1-%d] [--mib 1-%d]\n",
			MAX_ROUNDS, AL_VM_MEM_MB / 2);
		return 100;
	}
	al_log_init("vmcapture", AL_LOG_WARN);
	al_err err = {0};
	al_config cfg;
	const al_driver *drv = al_driver_find("vm", &err);
	if (drv == NULL || al_config_load(&cfg, &err) < 0) {
		fprintf(stderr, "vmcapture: %s\n", err.msg);
		return 111;
	}
	round_ms o[MAX_ROUNDS] = {0};
	double cap[MAX_ROUNDS], mig[MAX_ROUNDS], st[MAX_ROUNDS], sc[MAX_ROUNDS],
		wr[MAX_ROUNDS], ratio[MAX_ROUNDS];
	for (int k = 0; k < rounds; k++) {
		if (one_round(drv, tmpl, cfg.pool_dir, k, mib, &o[k], &err) <
		    0) {
			fprintf(stderr, "vmcapture: round %d: %s\n", k,
				err.msg);
			return 111;
		}
		cap[k] = o[k].capture;
		mig[k] = o[k].migrate;
		st[k] = o[k].state;
		sc[k] = o[k].scan;
		wr[k] = o[k].write;
		ratio[k] = o[k].migrate / o[k].capture;
	}
	printf("\nvm capture at the driver level (the stack's template, "
	       "%d MiB RAM), the guest having written %d MiB, %d rounds "
	       "(a new vm each); ms\n",
	       AL_VM_MEM_MB, mib, rounds);
	printf("  capture: %llu dirty pages (%.1f MiB), %.1f MiB written "
	       "(round 1)\n",
	       (unsigned long long)o[0].dirty,
	       (double)o[0].dirty * 4096 / 1048576.0, o[0].cap_mib);
	printf("  %-44s p50 %8.1f  max %8.1f\n", "capture (driver, fsynced)",
	       p50(cap, rounds), maxof(cap, rounds));
	printf("  %-44s p50 %8.1f  max %8.1f\n", "  device state",
	       p50(st, rounds), maxof(st, rounds));
	printf("  %-44s p50 %8.1f  max %8.1f\n", "  pagemap scan",
	       p50(sc, rounds), maxof(sc, rounds));
	printf("  %-44s p50 %8.1f  max %8.1f\n", "  pages written",
	       p50(wr, rounds), maxof(wr, rounds));
	printf("  %-44s p50 %8.1f  max %8.1f   (%.1f MiB)\n",
	       "peer: QEMU migrate to a file, fsynced", p50(mig, rounds),
	       maxof(mig, rounds), o[0].mig_mib);
	printf("  migrate / capture, p50 of the rounds: %.1fx\n",
	       p50(ratio, rounds));
	uint64_t ram = (uint64_t)AL_VM_MEM_MB << 20;
	double s1 = scan_ms(ram, &err), s4 = scan_ms(4 * ram, &err);
	if (s1 < 0 || s4 < 0) {
		fprintf(stderr, "vmcapture: scan: %s\n", err.msg);
		return 111;
	}
	printf("  pagemap scan, 64 MiB written, of %d MiB: %.1f ms; of %d "
	       "MiB: %.1f ms (one RAM size per vm: this process's own "
	       "mappings)\n",
	       AL_VM_MEM_MB, s1, 4 * AL_VM_MEM_MB, s4);
	printf("vmcapture_capture_p50_ms=%.1f\n", p50(cap, rounds));
	printf("vmcapture_state_p50_ms=%.1f\n", p50(st, rounds));
	printf("vmcapture_scan_p50_ms=%.1f\n", p50(sc, rounds));
	printf("vmcapture_write_p50_ms=%.1f\n", p50(wr, rounds));
	printf("vmcapture_migrate_p50_ms=%.1f\n", p50(mig, rounds));
	printf("vmcapture_migrate_vs_capture_p50_ratio=%.1f\n",
	       p50(ratio, rounds));
	printf("vmcapture_scan_%dmib_ms=%.2f\n", AL_VM_MEM_MB, s1);
	printf("vmcapture_scan_%dmib_ms=%.2f\n", 4 * AL_VM_MEM_MB, s4);
	/* What 4x the RAM adds to a capture: the longer scan alone. */
	printf("vmcapture_4x_ram_growth_pct=%.1f\n",
	       100.0 * (s4 - s1) / p50(cap, rounds));
	return 0;
}
