/* bench/vmboot: the peer of the vm create benchmark. A cold boot of the
 * same guest kernel, initrd and template disk with plain QEMU -M microvm
 * (the command line the vm driver uses for a cold boot, without the
 * snapshot), timed from exec of QEMU to the guest init's ready marker
 * ("AIRLOCK-INIT 1\n") on the virtio-serial port "airlock", i.e. the
 * moment the guest could take its first command.
 *
 *   vmboot --kernel STATE/vm/kernel/vmlinuz --initrd STATE/vm/initrd.img \
 *          --disk VMDIR/disk.ext4 --workdir DIR [--runs 8] [--accel tcg]
 *
 * Each run boots a fresh reflinked copy of the disk (made before the
 * clock starts). Prints p50/p90/p99/min in milliseconds and a last line
 * "vmboot_p50_ms=N" for scripts. Exit 0 when every run reached the
 * marker. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define QEMU "/usr/bin/qemu-system-x86_64"
#define MARKER "AIRLOCK-INIT 1\n"
#define BOOT_TIMEOUT_MS 120000
#define MAX_RUNS 100

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The host TSC rate, as the vm driver measures it: under TCG the guest
 * kernel's own TSC calibration is unreliable on a busy host. */
static unsigned host_tsc_khz(void)
{
#if defined(__x86_64__)
	struct timespec a, b, pause = {0, 20 * 1000 * 1000};
	unsigned lo, hi;
	uint64_t t0, t1;
	int64_t ns;

	clock_gettime(CLOCK_MONOTONIC_RAW, &a);
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	t0 = (uint64_t)hi << 32 | lo;
	nanosleep(&pause, NULL);
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	clock_gettime(CLOCK_MONOTONIC_RAW, &b);
	t1 = (uint64_t)hi << 32 | lo;
	ns = (int64_t)(b.tv_sec - a.tv_sec) * 1000000000 +
	     (b.tv_nsec - a.tv_nsec);
	if (ns > 0 && t1 > t0)
		return (unsigned)((t1 - t0) * 1000000 / (uint64_t)ns);
#endif
	return 0;
}

/* A reflink where the filesystem can, else a plain copy. */
static int clone_file(const char *src, const char *dst)
{
	int in = open(src, O_RDONLY | O_CLOEXEC);
	int out, rc = -1;
	char buf[1 << 16];
	ssize_t n;

	if (in < 0)
		return -1;
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0) {
		close(in);
		return -1;
	}
	if (ioctl(out, FICLONE, in) == 0) {
		rc = 0;
	} else {
		while ((n = read(in, buf, sizeof buf)) > 0)
			if (write(out, buf, (size_t)n) != n)
				break;
		rc = n == 0 ? 0 : -1;
	}
	close(in);
	if (close(out) < 0)
		rc = -1;
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double pct(const double *v, int n, double q)
{
	int k = (int)(q * n + 0.999999);

	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

struct opts {
	const char *kernel, *initrd, *disk, *workdir, *accel;
	int runs;
	unsigned tsc_khz;
};

static pid_t spawn(const struct opts *o, const char *disk, const char *sock,
		   const char *serial)
{
	char append[256], drive[1200], chr[1200], ser[1200];
	char *argv[64];
	int i = 0;
	pid_t pid;

	snprintf(
		append, sizeof append,
		"console=ttyS0 quiet panic=-1 airlock.agent=/sbin/airlock-agent"
		"%s%.0u",
		o->tsc_khz != 0 ? " tsc_early_khz=" : "", o->tsc_khz);
	snprintf(drive, sizeof drive,
		 "id=vda,file=%s,format=raw,if=none,discard=unmap", disk);
	snprintf(chr, sizeof chr, "socket,id=agent,path=%s,server=on,wait=off",
		 sock);
	snprintf(ser, sizeof ser, "file,id=ser,path=%s", serial);
	argv[i++] = QEMU;
	argv[i++] = "-M";
	argv[i++] = "microvm,x-option-roms=off,isa-serial=on,rtc=off,"
		    "memory-backend=mem";
	argv[i++] = "-accel";
	argv[i++] = (char *)o->accel;
	argv[i++] = "-m";
	argv[i++] = "256";
	argv[i++] = "-smp";
	argv[i++] = "1";
	argv[i++] = "-nodefaults";
	argv[i++] = "-no-user-config";
	argv[i++] = "-display";
	argv[i++] = "none";
	argv[i++] = "-no-reboot";
	argv[i++] = "-object";
	argv[i++] = "memory-backend-ram,id=mem,size=256M";
	argv[i++] = "-kernel";
	argv[i++] = (char *)o->kernel;
	argv[i++] = "-initrd";
	argv[i++] = (char *)o->initrd;
	argv[i++] = "-append";
	argv[i++] = append;
	argv[i++] = "-chardev";
	argv[i++] = ser;
	argv[i++] = "-serial";
	argv[i++] = "chardev:ser";
	argv[i++] = "-device";
	argv[i++] = "virtio-serial-device,max_ports=2";
	argv[i++] = "-chardev";
	argv[i++] = chr;
	argv[i++] = "-device";
	argv[i++] = "virtserialport,chardev=agent,name=airlock";
	argv[i++] = "-drive";
	argv[i++] = drive;
	argv[i++] = "-device";
	argv[i++] = "virtio-blk-device,drive=vda";
	argv[i++] = "-object";
	argv[i++] = "rng-random,id=rng,filename=/dev/urandom";
	argv[i++] = "-device";
	argv[i++] = "virtio-rng-device,rng=rng";
	/* The same NIC, attached to nothing, as Airlock's machines: the
	 * guest init waits for it. */
	argv[i++] = "-device";
	argv[i++] = "virtio-net-device,id=net0,mac=52:54:00:12:34:56";
	argv[i] = NULL;

	pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Connect to QEMU's chardev socket (it appears shortly after exec) and
 * read until the marker. 0 on success. */
static int wait_marker(pid_t pid, const char *sock, double deadline)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char buf[256], seen[64] = "";
	size_t seen_len = 0;
	int fd = -1, st;

	if (strlen(sock) >= sizeof sa.sun_path)
		return -1;
	strcpy(sa.sun_path, sock);
	while (fd < 0) {
		if (now_ms() > deadline || waitpid(pid, &st, WNOHANG) == pid)
			return -1;
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
			close(fd);
			fd = -1;
			usleep(500);
		}
	}
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		double left = deadline - now_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		n = read(fd, buf, sizeof buf);
		if (n <= 0)
			break;
		/* Keep the tail so a marker split across reads is found. */
		for (ssize_t i = 0; i < n; i++) {
			if (seen_len == sizeof seen - 1) {
				memmove(seen, seen + 1, seen_len - 1);
				seen_len--;
			}
			seen[seen_len++] = buf[i];
			seen[seen_len] = '\0';
			if (strstr(seen, MARKER) != NULL) {
				close(fd);
				return 0;
			}
		}
	}
	close(fd);
	return -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: vmboot --kernel F --initrd F --disk F "
			"--workdir DIR [--runs N] [--accel tcg|kvm]\n");
	exit(100);
}

int main(int argc, char **argv)
{
	struct opts o = {.accel = "tcg", .runs = 8};
	char disk[1024], sock[1024], serial[1024];
	double t[MAX_RUNS];
	int i;

	for (i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			usage();
		if (strcmp(argv[i], "--kernel") == 0)
			o.kernel = argv[++i];
		else if (strcmp(argv[i], "--initrd") == 0)
			o.initrd = argv[++i];
		else if (strcmp(argv[i], "--disk") == 0)
			o.disk = argv[++i];
		else if (strcmp(argv[i], "--workdir") == 0)
			o.workdir = argv[++i];
		else if (strcmp(argv[i], "--runs") == 0)
			o.runs = atoi(argv[++i]);
		else if (strcmp(argv[i], "--accel") == 0)
			o.accel = argv[++i];
		else
			usage();
	}
	if (o.kernel == NULL || o.initrd == NULL || o.disk == NULL ||
	    o.workdir == NULL || o.runs < 1 || o.runs > MAX_RUNS ||
	    (strcmp(o.accel, "tcg") != 0 && strcmp(o.accel, "kvm") != 0))
		usage();
	if (strcmp(o.accel, "tcg") == 0)
		o.tsc_khz = host_tsc_khz();
	snprintf(disk, sizeof disk, "%s/disk.ext4", o.workdir);
	snprintf(sock, sizeof sock, "%s/agent.sock", o.workdir);
	snprintf(serial, sizeof serial, "%s/serial.log", o.workdir);

	for (i = 0; i < o.runs; i++) {
		double t0, end;
		pid_t pid;
		int ok, st;

		unlink(sock);
		if (clone_file(o.disk, disk) < 0) {
			fprintf(stderr, "vmboot: copy %s: %s\n", o.disk,
				strerror(errno));
			return 1;
		}
		t0 = now_ms();
		pid = spawn(&o, disk, sock, serial);
		if (pid < 0) {
			perror("vmboot: fork");
			return 1;
		}
		ok = wait_marker(pid, sock, t0 + BOOT_TIMEOUT_MS) == 0;
		end = now_ms();
		kill(pid, SIGKILL);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!ok) {
			fprintf(stderr,
				"vmboot: run %d: no marker within %d s "
				"(console: %s)\n",
				i + 1, BOOT_TIMEOUT_MS / 1000, serial);
			return 1;
		}
		t[i] = end - t0;
	}
	unlink(sock);
	unlink(disk);

	qsort(t, (size_t)o.runs, sizeof *t, cmp_double);
	printf("\nPeer: cold boot with plain QEMU -M microvm -accel %s "
	       "(same kernel, initrd, disk), exec -> guest init ready, "
	       "%d runs\n",
	       o.accel, o.runs);
	printf("  %-8s %9s %9s %9s %9s   (ms)\n", "step", "p50", "p90", "p99",
	       "min");
	printf("  %-8s %9.1f %9.1f %9.1f %9.1f\n", "boot", pct(t, o.runs, 0.5),
	       pct(t, o.runs, 0.9), pct(t, o.runs, 0.99), t[0]);
	printf("vmboot_p50_ms=%.1f\n", pct(t, o.runs, 0.5));
	return 0;
}
