/* core/vmmem: template RAM reaches clones as a memfd nobody can write,
 * root included, that QEMU can still open and map privately; clones of
 * one template version share one copy the controller serves. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/file.h"
#include "vm/mem.h"

#define MIB (1024 * 1024)

/* The byte at offset off of a pattern seeded with seed. */
static unsigned char pat(off_t off, unsigned seed)
{
	uint64_t x = (uint64_t)off * 2654435761u + seed;
	return (unsigned char)(x ^ (x >> 13) ^ (x >> 29));
}

/* Write [from, to) of the pattern at the same offsets of fd. */
static void fill(int fd, off_t from, off_t to, unsigned seed)
{
	static unsigned char buf[65536];
	for (off_t o = from; o < to;) {
		size_t n = (size_t)(to - o) < sizeof buf ? (size_t)(to - o)
							 : sizeof buf;
		for (size_t i = 0; i < n; i++)
			buf[i] = pat(o + (off_t)i, seed);
		assert_int_equal(pwrite(fd, buf, n, o), (ssize_t)n);
		o += (off_t)n;
	}
}

/* Does fd hold the pattern in [from, to)? (zeros when seed is ~0u) */
static int holds(int fd, off_t from, off_t to, unsigned seed)
{
	static unsigned char buf[65536];
	for (off_t o = from; o < to;) {
		size_t n = (size_t)(to - o) < sizeof buf ? (size_t)(to - o)
							 : sizeof buf;
		if (pread(fd, buf, n, o) != (ssize_t)n)
			return 0;
		for (size_t i = 0; i < n; i++) {
			unsigned char want = seed == ~0u
						     ? 0
						     : pat(o + (off_t)i, seed);
			if (buf[i] != want)
				return 0;
		}
		o += (off_t)n;
	}
	return 1;
}

/* A 4 MiB test image: data [0, 1.5 MiB), a 1 MiB hole, data to 4 MiB
 * (the last byte included). */
#define IMG_SIZE (4 * MIB)
#define HOLE_FROM (3 * MIB / 2)
#define HOLE_TO (5 * MIB / 2)

static int make_image(const char *path, unsigned seed)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, IMG_SIZE), 0);
	fill(fd, 0, HOLE_FROM, seed);
	fill(fd, HOLE_TO, IMG_SIZE, seed);
	return fd;
}

static int image_ok(int fd, unsigned seed)
{
	struct stat st;
	return fstat(fd, &st) == 0 && st.st_size == IMG_SIZE &&
	       holds(fd, 0, HOLE_FROM, seed) &&
	       holds(fd, HOLE_FROM, HOLE_TO, ~0u) &&
	       holds(fd, HOLE_TO, IMG_SIZE, seed);
}

static int cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);
	return fl >= 0 && (fl & FD_CLOEXEC) != 0;
}

static void rm_rf(const char *path)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
	assert_int_equal(system(cmd), 0);
}

/* ---- the sealed copy ---- */

static void test_sealed_copy(void **state)
{
	(void)state;
	char path[] = "/tmp/airlock-test-vmmem-XXXXXX";
	int tf = mkstemp(path);
	assert_true(tf >= 0);
	close(tf);
	int src = make_image(path, 7);
	/* The test means something only where the source has the hole. */
	off_t d = lseek(src, HOLE_FROM, SEEK_DATA);
	close(src);
	if (d != HOLE_TO) {
		unlink(path);
		print_message("/tmp does not report holes: skipped\n");
		skip();
	}

	al_err err = {0};
	int fd = al_vmmem_sealed_copy(path, &err);
	if (fd < 0)
		fail_msg("sealed copy: %s", err.msg);
	assert_true(cloexec(fd));
	assert_true(image_ok(fd, 7));
	assert_true(al_vmmem_is_sealed(fd));
	/* The hole stayed a hole: no pages behind it. */
	assert_int_equal(lseek(fd, HOLE_FROM, SEEK_DATA), HOLE_TO);
	assert_int_equal(lseek(fd, 0, SEEK_HOLE), HOLE_FROM);

	/* No write by any path, root or not. */
	errno = 0;
	assert_int_equal(pwrite(fd, "x", 1, 0), -1);
	assert_int_equal(errno, EPERM);
	errno = 0;
	assert_int_equal(write(fd, "x", 1), -1);
	assert_int_equal(errno, EPERM);
	errno = 0;
	assert_int_equal(pwrite(fd, "x", 1, HOLE_FROM), -1);
	assert_int_equal(errno, EPERM);
	assert_ptr_equal(mmap(NULL, IMG_SIZE, PROT_READ | PROT_WRITE,
			      MAP_SHARED, fd, 0),
			 MAP_FAILED);
	/* Neither shrink, nor grow, nor punch, nor unseal. */
	errno = 0;
	assert_int_equal(ftruncate(fd, MIB), -1);
	assert_int_equal(errno, EPERM);
	errno = 0;
	assert_int_equal(ftruncate(fd, 2 * IMG_SIZE), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(fallocate(fd,
				   FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				   0, MIB),
			 -1);
	assert_int_equal(fallocate(fd, 0, IMG_SIZE, MIB), -1);
	errno = 0;
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), -1);
	assert_int_equal(errno, EPERM);

	/* What QEMU (share=off) does: a private writable mapping. Its
	 * writes stay in the mapping. */
	unsigned char *m = mmap(NULL, IMG_SIZE, PROT_READ | PROT_WRITE,
				MAP_PRIVATE, fd, 0);
	assert_ptr_not_equal(m, MAP_FAILED);
	assert_int_equal(m[5], pat(5, 7));
	assert_int_equal(m[HOLE_FROM + 5], 0);
	memset(m, 0xAA, 2 * MIB);
	m[IMG_SIZE - 1] = 0x55;
	assert_int_equal(munmap(m, IMG_SIZE), 0);
	assert_true(image_ok(fd, 7));

	/* QEMU gets it by fd and opens /proc/self/fd/N read-write: that
	 * open works, a write through it does not. */
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	int rw = open(proc, O_RDWR | O_CLOEXEC);
	assert_true(rw >= 0);
	assert_true(al_vmmem_is_sealed(rw));
	errno = 0;
	assert_int_equal(write(rw, "x", 1), -1);
	assert_int_equal(errno, EPERM);
	assert_ptr_equal(mmap(NULL, MIB, PROT_WRITE, MAP_SHARED, rw, 0),
			 MAP_FAILED);
	close(rw);
	assert_true(image_ok(fd, 7));
	close(fd);

	/* Changing the source later does not reach the copy already made,
	 * and a new copy follows the source. */
	fd = al_vmmem_sealed_copy(path, &err);
	assert_true(fd >= 0);
	src = make_image(path, 9);
	close(src);
	assert_true(image_ok(fd, 7));
	close(fd);
	fd = al_vmmem_sealed_copy(path, &err);
	assert_true(fd >= 0);
	assert_true(image_ok(fd, 9));
	close(fd);
	unlink(path);
}

static void test_sealed_copy_refuses(void **state)
{
	(void)state;
	al_err err = {0};
	assert_int_equal(al_vmmem_sealed_copy("/nonexistent/airlock-test-mem",
					      &err),
			 -1);
	assert_int_equal(err.code, AL_ENOENT);

	/* A symlink is not followed: a template's mem is a plain file. */
	char dir[] = "/tmp/airlock-test-vmmem-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char real[80], link[80];
	snprintf(real, sizeof real, "%s/real", dir);
	snprintf(link, sizeof link, "%s/mem", dir);
	int fd = open(real, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "secret", 6), 6);
	close(fd);
	assert_int_equal(symlink(real, link), 0);
	al_err_clear(&err);
	assert_int_equal(al_vmmem_sealed_copy(link, &err), -1);
	assert_int_not_equal(err.code, AL_OK);

	/* An empty file gives an empty sealed memfd. */
	assert_int_equal(truncate(real, 0), 0);
	fd = al_vmmem_sealed_copy(real, &err);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_true(al_vmmem_is_sealed(fd));
	close(fd);
	rm_rf(dir);
}

/* ---- al_file_copy_sparse (core/base/file.h) ---- */

static void test_copy_sparse_files(void **state)
{
	(void)state;
	char dir[] = "/tmp/airlock-test-vmmem-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char a[80], b[80], c[80];
	snprintf(a, sizeof a, "%s/a", dir);
	snprintf(b, sizeof b, "%s/b", dir);
	snprintf(c, sizeof c, "%s/c", dir);

	/* Data, hole, data to the end. */
	int in = make_image(a, 3);
	int out = open(b, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(out >= 0);
	al_err err = {0};
	assert_int_equal(al_file_copy_sparse(in, out, &err), 0);
	assert_true(image_ok(out, 3));
	close(out);

	/* A file ending in a hole keeps its size; one that is all hole
	 * too. The copy goes to a write-only descriptor, as a disk clone
	 * opens it. */
	assert_int_equal(ftruncate(in, 0), 0);
	assert_int_equal(ftruncate(in, 3 * MIB), 0);
	fill(in, 0, MIB, 4);
	out = open(c, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(out >= 0);
	assert_int_equal(al_file_copy_sparse(in, out, &err), 0);
	close(out);
	out = open(c, O_RDONLY | O_CLOEXEC);
	assert_true(out >= 0);
	struct stat st;
	assert_int_equal(fstat(out, &st), 0);
	assert_int_equal(st.st_size, 3 * MIB);
	assert_true(holds(out, 0, MIB, 4));
	assert_true(holds(out, MIB, 3 * MIB, ~0u));
	close(out);

	assert_int_equal(ftruncate(in, 0), 0);
	assert_int_equal(ftruncate(in, 2 * MIB), 0);
	out = open(c, O_RDWR | O_TRUNC | O_CLOEXEC);
	assert_true(out >= 0);
	assert_int_equal(al_file_copy_sparse(in, out, &err), 0);
	assert_int_equal(fstat(out, &st), 0);
	assert_int_equal(st.st_size, 2 * MIB);
	assert_true(holds(out, 0, 2 * MIB, ~0u));
	close(out);

	/* A destination it cannot write is an error, not a short copy. */
	fill(in, 0, MIB, 5);
	out = open(c, O_RDONLY | O_CLOEXEC);
	assert_true(out >= 0);
	al_err_clear(&err);
	assert_int_equal(al_file_copy_sparse(in, out, &err), -1);
	assert_int_not_equal(err.code, AL_OK);
	close(out);
	close(in);
	rm_rf(dir);
}

/* ---- al_file_clone (core/base/file.h) ---- */

static void test_file_clone(void **state)
{
	(void)state;
	char dir[] = "/tmp/airlock-test-clone-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char a[80], b[80], c[80], full[80], big[96];
	snprintf(a, sizeof a, "%s/a", dir);
	snprintf(b, sizeof b, "%s/b", dir);
	snprintf(c, sizeof c, "%s/c", dir);
	snprintf(full, sizeof full, "%s/full", dir);
	close(make_image(a, 6));
	al_err err = {0};
	uint64_t size = 0;

	/* A copy (or reflink) with its size, holes and all; synced too. */
	assert_int_equal(al_file_clone(a, b, AL_FILE_CLONE_SYNC, &size, &err),
			 0);
	assert_int_equal(size, IMG_SIZE);
	int fd = open(b, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0 && image_ok(fd, 6));
	close(fd);

	/* Never through a symlink, either end: the link's target stays as
	 * it was. */
	assert_int_equal(symlink(a, c), 0);
	al_err_clear(&err);
	assert_int_equal(al_file_clone(b, c, 0, NULL, &err), -1);
	assert_int_equal(al_file_clone(c, b, 0, NULL, &err), -1);
	fd = open(a, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0 && image_ok(fd, 6));
	close(fd);
	unlink(c);

	/* A missing source creates nothing. */
	assert_int_equal(al_file_clone(c, full, 0, NULL, &err), -1);
	assert_int_equal(access(full, F_OK), -1);

	/* A filesystem too small for the copy: AL_EUNAVAIL (the caller says
	 * "full"), and no partial file is left. */
	assert_int_equal(mkdir(full, 0700), 0);
	if (mount("none", full, "tmpfs", 0, "size=1m") < 0) {
		rm_rf(dir);
		skip(); /* needs root (make test runs as root) */
	}
	snprintf(big, sizeof big, "%s/copy", full);
	al_err_clear(&err);
	assert_int_equal(al_file_clone(a, big, 0, NULL, &err), -1);
	assert_int_equal(err.code, AL_EUNAVAIL);
	assert_int_equal(access(big, F_OK), -1);
	assert_int_equal(umount(full), 0);
	rm_rf(dir);
}

/* ---- is_sealed ---- */

static void test_is_sealed_only_when_fully(void **state)
{
	(void)state;
	int plain = memfd_create("t", MFD_CLOEXEC);
	assert_true(plain >= 0);
	assert_false(al_vmmem_is_sealed(plain));
	int sealable = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(sealable >= 0);
	assert_false(al_vmmem_is_sealed(sealable));
	/* Write-sealed but still open to more seals: not every seal, so
	 * not what a clone may be given. */
	assert_int_equal(fcntl(sealable, F_ADD_SEALS,
			       F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK),
			 0);
	assert_false(al_vmmem_is_sealed(sealable));
	assert_int_equal(fcntl(sealable, F_ADD_SEALS, F_SEAL_SEAL), 0);
	assert_true(al_vmmem_is_sealed(sealable));
	close(plain);
	close(sealable);

	char path[] = "/tmp/airlock-test-vmmem-XXXXXX";
	int f = mkstemp(path);
	assert_true(f >= 0);
	assert_false(al_vmmem_is_sealed(f));
	close(f);
	unlink(path);
	assert_false(al_vmmem_is_sealed(-1));
}

/* ---- the server ---- */

typedef struct tree {
	char top[64];  /* the state dir */
	char run[96];  /* top/run */
	char pool[96]; /* top/pool */
	char vm[128];  /* top/pool/vm/t: a template's VM dir */
} tree;

static void write_mem(const char *vmdir, unsigned seed)
{
	char p[256], tmp[256];
	snprintf(p, sizeof p, "%s/mem", vmdir);
	snprintf(tmp, sizeof tmp, "%s/mem.new", vmdir);
	int fd = make_image(tmp, seed);
	close(fd);
	/* A new template version is a new file (new inode), as a
	 * snapshot is written and renamed into place. */
	assert_int_equal(rename(tmp, p), 0);
}

static void make_tree(tree *t)
{
	snprintf(t->top, sizeof t->top, "/tmp/airlock-test-vmmem-XXXXXX");
	assert_non_null(mkdtemp(t->top));
	assert_int_equal(chmod(t->top, 0755), 0);
	snprintf(t->run, sizeof t->run, "%s/run", t->top);
	snprintf(t->pool, sizeof t->pool, "%s/pool", t->top);
	snprintf(t->vm, sizeof t->vm, "%s/vm", t->pool);
	assert_int_equal(mkdir(t->run, 0755), 0);
	assert_int_equal(mkdir(t->pool, 0755), 0);
	assert_int_equal(mkdir(t->vm, 0755), 0);
	snprintf(t->vm, sizeof t->vm, "%s/vm/t", t->pool);
	assert_int_equal(mkdir(t->vm, 0755), 0);
	write_mem(t->vm, 1);
}

static ino_t ino_of(int fd)
{
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	return st.st_ino;
}

/* Get vmdir's RAM; check it is sealed, close-on-exec, and holds seed. */
static int get_ok(const tree *t, const char *vmdir, unsigned seed,
		  int want_shared)
{
	al_err err = {0};
	int shared = -1;
	int fd = al_vmmem_get(t->run, vmdir, &shared, &err);
	if (fd < 0)
		fail_msg("get %s: %s", vmdir, err.msg);
	assert_int_equal(shared, want_shared);
	assert_true(al_vmmem_is_sealed(fd));
	assert_true(cloexec(fd));
	assert_true(image_ok(fd, seed));
	return fd;
}

static void test_server_shares(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		print_message("needs root (root-owned RAM, peer check)\n");
		skip();
	}
	tree t;
	make_tree(&t);

	/* No server yet: a private copy, still sealed and right. */
	int fd = get_ok(&t, t.vm, 1, 0);
	ino_t private1 = ino_of(fd);
	close(fd);

	al_err err = {0};
	al_vmmem_server *s = al_vmmem_serve(t.run, t.pool, &err);
	if (s == NULL)
		fail_msg("serve: %s", err.msg);

	/* Two clones of one template version share one copy. */
	int a = get_ok(&t, t.vm, 1, 1);
	int b = get_ok(&t, t.vm, 1, 1);
	assert_int_equal(ino_of(a), ino_of(b));
	assert_int_not_equal(ino_of(a), private1);
	/* The same template named another way is the same copy. */
	char alias[256];
	snprintf(alias, sizeof alias, "%s/vm/../vm/t/", t.pool);
	int c = get_ok(&t, alias, 1, 1);
	assert_int_equal(ino_of(c), ino_of(a));
	close(c);

	/* Outside the pool: refused by the server, the client makes its
	 * own copy, the right bytes, sealed, not the shared one. */
	char other[128];
	snprintf(other, sizeof other, "%s/other", t.top);
	assert_int_equal(mkdir(other, 0755), 0);
	write_mem(other, 2);
	c = get_ok(&t, other, 2, 0);
	close(c);
	/* ... also when a path under the pool leads out of it. */
	char esc[256], lnk[256];
	snprintf(esc, sizeof esc, "%s/vm/../../other", t.pool);
	c = get_ok(&t, esc, 2, 0);
	close(c);
	snprintf(lnk, sizeof lnk, "%s/vm/link", t.pool);
	assert_int_equal(symlink(other, lnk), 0);
	c = get_ok(&t, lnk, 2, 0);
	close(c);

	/* RAM that is not root's is not shared. */
	char u[128];
	snprintf(u, sizeof u, "%s/vm/u", t.pool);
	assert_int_equal(mkdir(u, 0755), 0);
	write_mem(u, 3);
	char umem[160];
	snprintf(umem, sizeof umem, "%s/mem", u);
	assert_int_equal(chown(umem, 1234, 1234), 0);
	c = get_ok(&t, u, 3, 0);
	close(c);

	/* A mem that is a symlink is neither served nor copied. */
	char sl[128], slmem[160], target[160];
	snprintf(sl, sizeof sl, "%s/vm/sl", t.pool);
	assert_int_equal(mkdir(sl, 0755), 0);
	snprintf(slmem, sizeof slmem, "%s/mem", sl);
	snprintf(target, sizeof target, "%s/mem", t.vm);
	assert_int_equal(symlink(target, slmem), 0);
	int shared = -1;
	al_err_clear(&err);
	assert_int_equal(al_vmmem_get(t.run, sl, &shared, &err), -1);
	assert_int_equal(shared, 0);

	/* A VM dir that does not exist: an error, no fd. */
	char missing[256];
	snprintf(missing, sizeof missing, "%s/vm/missing", t.pool);
	shared = -1;
	al_err_clear(&err);
	assert_int_equal(al_vmmem_get(t.run, missing, &shared, &err), -1);
	assert_int_equal(shared, 0);
	assert_int_not_equal(err.code, AL_OK);

	/* A new template version (new file): after a prune, clones get a
	 * copy of the new bytes; the clones running keep the old ones. */
	write_mem(t.vm, 4);
	al_vmmem_prune(s);
	c = get_ok(&t, t.vm, 4, 1);
	assert_int_not_equal(ino_of(c), ino_of(a));
	int d = get_ok(&t, t.vm, 4, 1);
	assert_int_equal(ino_of(d), ino_of(c));
	assert_true(image_ok(a, 1));
	assert_true(image_ok(b, 1));
	close(a);
	close(b);
	close(c);
	close(d);
	/* Rewritten without a prune: still never the stale bytes. */
	write_mem(t.vm, 5);
	c = get_ok(&t, t.vm, 5, 1);
	close(c);
	al_vmmem_prune(s);
	al_vmmem_prune(NULL);

	al_vmmem_stop(s);
	al_vmmem_stop(NULL);
	/* Stopped: back to private copies. */
	c = get_ok(&t, t.vm, 5, 0);
	close(c);
	rm_rf(t.top);
}

/* Only root may ask: the socket is root's, and a non-root peer that
 * reaches it anyway is refused. */
static void test_server_refuses_non_root(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		print_message("needs root\n");
		skip();
	}
	tree t;
	make_tree(&t);
	al_err err = {0};
	al_vmmem_server *s = al_vmmem_serve(t.run, t.pool, &err);
	assert_non_null(s);
	char sock[160];
	snprintf(sock, sizeof sock, "%s/%s", t.run, AL_VMMEM_SOCK);
	struct stat st;
	assert_int_equal(stat(sock, &st), 0);
	assert_int_equal(st.st_mode & 077, 0);
	/* Open the socket up, then ask as nobody: no shared copy. */
	assert_int_equal(chmod(sock, 0777), 0);
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		int r = -2;
		if (setgroups(0, NULL) == 0 && setgid(65534) == 0 &&
		    setuid(65534) == 0) {
			al_err e = {0};
			int shared = -1;
			int fd = al_vmmem_get(t.run, t.vm, &shared, &e);
			/* shared, or 0 for a private copy (mem is 0644). */
			r = fd < 0 ? -1 : shared;
		}
		(void)!write(p[1], &r, sizeof r);
		_exit(0);
	}
	close(p[1]);
	int r = -3;
	assert_int_equal(read(p[0], &r, sizeof r), (ssize_t)sizeof r);
	close(p[0]);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(r, 0);
	/* Root still gets the shared copy. */
	int fd = get_ok(&t, t.vm, 1, 1);
	close(fd);
	al_vmmem_stop(s);
	rm_rf(t.top);
}

/* A request longer than the server reads must not be answered for a
 * prefix of it: pool/vm/t////...///missing names no template. */
static void test_server_long_request(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		print_message("needs root\n");
		skip();
	}
	tree t;
	make_tree(&t);
	al_err err = {0};
	al_vmmem_server *s = al_vmmem_serve(t.run, t.pool, &err);
	assert_non_null(s);
	char lng[1024];
	size_t n = strlen(t.vm);
	memcpy(lng, t.vm, n);
	while (n < 700)
		lng[n++] = '/';
	snprintf(lng + n, sizeof lng - n, "missing");
	int shared = -1;
	int fd = al_vmmem_get(t.run, lng, &shared, &err);
	if (fd >= 0)
		close(fd);

	/* The same request sent raw, as any root client could: the
	 * server itself answers with an error and no descriptor. */
	int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(c >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int sl = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", t.run,
			  AL_VMMEM_SOCK);
	assert_true(sl > 0 && (size_t)sl < sizeof sa.sun_path);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(send(c, lng, strlen(lng), 0), (ssize_t)strlen(lng));
	char reply[256];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = {reply, sizeof reply};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = cm.b,
			   .msg_controllen = sizeof cm.b};
	ssize_t got = recvmsg(c, &m, MSG_CMSG_CLOEXEC);
	close(c);
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	int raw_fd = -1;
	if (h != NULL && h->cmsg_type == SCM_RIGHTS)
		memcpy(&raw_fd, CMSG_DATA(h), sizeof raw_fd);
	if (raw_fd >= 0)
		close(raw_fd);

	al_vmmem_stop(s);
	rm_rf(t.top);
	assert_int_equal(fd, -1);
	assert_int_equal(shared, 0);
	assert_true(got >= 1);
	assert_int_equal(reply[0], 'E');
	assert_int_equal(raw_fd, -1);
}

/* A server that hands out an unsealed memfd is not trusted: the client
 * falls back to its own sealed copy. */
static void test_client_refuses_unsealed(void **state)
{
	(void)state;
	tree t;
	make_tree(&t);
	char sock[160];
	snprintf(sock, sizeof sock, "%s/%s", t.run, AL_VMMEM_SOCK);
	int l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(l >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
	assert_true(n > 0 && (size_t)n < sizeof sa.sun_path);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(l, 4), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		char req[512];
		if (c < 0 || recv(c, req, sizeof req, 0) <= 0)
			_exit(1);
		int m = memfd_create("evil", MFD_CLOEXEC);
		if (m < 0 || ftruncate(m, IMG_SIZE) < 0)
			_exit(1);
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int))];
		} cm;
		memset(&cm, 0, sizeof cm);
		struct iovec iov = {"Y", 1};
		struct msghdr msg = {.msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = cm.b,
				     .msg_controllen = sizeof cm.b};
		struct cmsghdr *h = CMSG_FIRSTHDR(&msg);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(h), &m, sizeof m);
		_exit(sendmsg(c, &msg, 0) == 1 ? 0 : 1);
	}
	close(l);
	int fd = get_ok(&t, t.vm, 1, 0);
	close(fd);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	/* The fake server did hand its fd over: the refusal was real. */
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	rm_rf(t.top);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sealed_copy),
		cmocka_unit_test(test_sealed_copy_refuses),
		cmocka_unit_test(test_copy_sparse_files),
		cmocka_unit_test(test_file_clone),
		cmocka_unit_test(test_is_sealed_only_when_fully),
		cmocka_unit_test(test_server_shares),
		cmocka_unit_test(test_server_refuses_non_root),
		cmocka_unit_test(test_server_long_request),
		cmocka_unit_test(test_client_refuses_unsealed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
