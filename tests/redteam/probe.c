/* probe: what the red-team suite runs as root inside a sandbox, for the
 * attempts busybox cannot make. Each prints one line "<what>: <outcome>"
 * and exits 0 when the kernel refused, 1 when the attempt succeeded
 * (an escape), 2 on a usage or setup error.
 *   probe handle          open_by_handle_at: "/" by its own handle, and a
 *                         forged handle of the btrfs top-level subvolume
 *   probe ptrace PID      PTRACE_ATTACH, PTRACE_SEIZE, /proc/PID/mem,
 *                         process_vm_readv
 *   probe inotify N SECS  make up to N inotify instances, print how many,
 *                         hold them SECS seconds (exit 0 when >= 1) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <unistd.h>

static int handle(void)
{
	struct {
		struct file_handle fh;
		unsigned char buf[128];
	} h;
	int mount_id, escaped = 0;
	h.fh.handle_bytes = sizeof h.buf;
	if (name_to_handle_at(AT_FDCWD, "/", &h.fh, &mount_id, 0) < 0) {
		printf("name_to_handle_at /: %s\n", strerror(errno));
	} else {
		int root = open("/", O_RDONLY | O_DIRECTORY);
		int fd = open_by_handle_at(root, &h.fh, O_RDONLY);
		printf("open_by_handle_at own root: %s\n",
		       fd >= 0 ? "OPENED" : strerror(errno));
		escaped |= fd >= 0;
	}
	/* btrfs FILEID_BTRFS_WITHOUT_PARENT: objectid 256 (a subvolume's
	 * root directory) of root 5, the top level: the whole pool. */
	struct {
		struct file_handle fh;
		unsigned char buf[20];
	} f = {.fh = {.handle_bytes = 20, .handle_type = 0x4d}};
	unsigned long long objectid = 256, root_objectid = 5;
	memcpy(f.fh.f_handle, &objectid, 8);
	memcpy(f.fh.f_handle + 8, &root_objectid, 8); /* gen: 0 */
	int root = open("/", O_RDONLY | O_DIRECTORY);
	int fd = open_by_handle_at(root, &f.fh, O_RDONLY);
	printf("open_by_handle_at forged pool root: %s\n",
	       fd >= 0 ? "OPENED" : strerror(errno));
	escaped |= fd >= 0;
	return escaped;
}

static int trace(pid_t pid)
{
	int escaped = 0;
	long r = ptrace(PTRACE_ATTACH, pid, NULL, NULL);
	printf("PTRACE_ATTACH %d: %s\n", (int)pid,
	       r == 0 ? "ATTACHED" : strerror(errno));
	escaped |= r == 0;
	if (r == 0)
		ptrace(PTRACE_DETACH, pid, NULL, NULL);
	r = ptrace(PTRACE_SEIZE, pid, NULL, NULL);
	printf("PTRACE_SEIZE %d: %s\n", (int)pid,
	       r == 0 ? "SEIZED" : strerror(errno));
	escaped |= r == 0;
	if (r == 0)
		ptrace(PTRACE_DETACH, pid, NULL, NULL);
	char path[64], byte;
	snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
	int fd = open(path, O_RDONLY);
	printf("open %s: %s\n", path, fd >= 0 ? "OPENED" : strerror(errno));
	escaped |= fd >= 0;
	/* Any address: a refusal comes before the address is looked at. */
	struct iovec local = {&byte, 1}, remote = {(void *)0x400000, 1};
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	printf("process_vm_readv %d: %s\n", (int)pid,
	       n >= 0 || errno == EFAULT ? "ALLOWED" : strerror(errno));
	escaped |= n >= 0 || errno == EFAULT;
	return escaped;
}

static int inotify(int n, int secs)
{
	int got = 0, e = 0;
	for (; got < n; got++) {
		if (inotify_init1(IN_CLOEXEC) < 0) {
			e = errno;
			break;
		}
	}
	printf("inotify instances: %d of %d%s%s\n", got, n, e ? ", then " : "",
	       e ? strerror(e) : "");
	fflush(stdout);
	if (secs > 0)
		sleep((unsigned)secs);
	return got >= 1 ? 0 : 1;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && strcmp(argv[1], "handle") == 0)
		return handle();
	if (argc == 3 && strcmp(argv[1], "ptrace") == 0)
		return trace((pid_t)atoi(argv[2]));
	if (argc == 4 && strcmp(argv[1], "inotify") == 0)
		return inotify(atoi(argv[2]), atoi(argv[3]));
	fprintf(stderr, "usage: probe handle | ptrace PID | inotify N SECS\n");
	return 2;
}
