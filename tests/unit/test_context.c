/* core/context: a hostile build context tar never writes outside its
 * directory; hashes are stable; COPY stays inside the rootfs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "base/rmtree.h"
#include "template/context.h"

/* One tar entry to craft. */
typedef struct tent {
	const char *name;
	mode_t type; /* AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFCHR, AE_IFIFO, or
		      * 0 for a hardlink */
	const char *data; /* file data, symlink or hardlink target */
	mode_t perm;
} tent;

static char base[64];

/* A tar of ents in a memfd, at offset 0. */
static int make_tar(const tent *ents, size_t n, int gzip)
{
	int fd = memfd_create("tar", MFD_CLOEXEC);
	assert_true(fd >= 0);
	struct archive *a = archive_write_new();
	assert_int_equal(archive_write_set_format_pax_restricted(a),
			 ARCHIVE_OK);
	if (gzip)
		assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_fd(a, fd), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, ents[i].name);
		mode_t perm = ents[i].perm != 0 ? ents[i].perm : 0644;
		if (ents[i].type == 0) {
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_hardlink(e, ents[i].data);
		} else {
			archive_entry_set_filetype(e, ents[i].type);
		}
		archive_entry_set_perm(e, perm);
		if (ents[i].type == AE_IFLNK)
			archive_entry_set_symlink(e, ents[i].data);
		if (ents[i].type == AE_IFCHR)
			archive_entry_set_rdev(e, makedev(1, 3));
		size_t len = ents[i].type == AE_IFREG && ents[i].data != NULL
				     ? strlen(ents[i].data)
				     : 0;
		archive_entry_set_size(e, (la_int64_t)len);
		assert_true(archive_write_header(a, e) >= ARCHIVE_WARN);
		if (len > 0)
			assert_int_equal(archive_write_data(a, ents[i].data,
							    len),
					 (la_ssize_t)len);
		archive_entry_free(e);
	}
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static void path_of(char *out, const char *rel)
{
	snprintf(out, 512, "%s/%s", base, rel);
}

static void write_file(const char *rel, const char *data, mode_t mode)
{
	char p[512];
	path_of(p, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static void mkdir_rel(const char *rel)
{
	char p[512];
	path_of(p, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static int exists(const char *rel)
{
	char p[512];
	struct stat st;
	path_of(p, rel);
	return lstat(p, &st) == 0;
}

static void read_rel(const char *rel, char *buf, size_t cap)
{
	char p[512];
	path_of(p, rel);
	int fd = open(p, O_RDONLY);
	if (fd < 0)
		fail_msg("open %s: %s", p, strerror(errno));
	ssize_t n = read(fd, buf, cap - 1);
	assert_true(n >= 0);
	buf[n] = '\0';
	close(fd);
}

static int setup(void **state)
{
	(void)state;
	strcpy(base, "/tmp/test_context_XXXXXX");
	assert_non_null(mkdtemp(base));
	mkdir_rel("ctx");
	mkdir_rel("outside");
	write_file("canary", "original", 0644);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	al_err err = {0};
	assert_int_equal(al_rmtree(base, &err), 0);
	assert_int_equal(access(base, F_OK), -1);
	return 0;
}

/* Unpack ents into base/ctx, expecting code (AL_OK for success). */
static void unpack_expect(const tent *ents, size_t n, al_code code,
			  const char *needle)
{
	char dir[512];
	path_of(dir, "ctx");
	al_err err = {0};
	int fd = make_tar(ents, n, 0);
	int rc = al_context_unpack(fd, dir, NULL, &err);
	close(fd);
	if (code == AL_OK) {
		if (rc != 0)
			fail_msg("unpack failed: %s", err.msg);
		return;
	}
	if (rc != -1)
		fail_msg("hostile tar accepted");
	if (err.code != code)
		fail_msg("code %d, want %d: %s", err.code, code, err.msg);
	if (needle != NULL && strstr(err.msg, needle) == NULL)
		fail_msg("message '%s' lacks '%s'", err.msg, needle);
}

/* Nothing but what setup made exists outside ctx. */
static void assert_outside_untouched(void)
{
	char buf[64];
	read_rel("canary", buf, sizeof buf);
	assert_string_equal(buf, "original");
	char p[512];
	path_of(p, "canary");
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_nlink, 1);
	assert_false(exists("x"));
	assert_false(exists("pwned"));
	assert_false(exists("outside/pwned"));
	assert_false(exists("abs"));
}

static void reset_ctx(void)
{
	char dir[512];
	al_err err = {0};
	path_of(dir, "ctx");
	assert_int_equal(al_rmtree(dir, &err), 0);
	mkdir_rel("ctx");
}

static void test_unpack_refuses_escapes(void **state)
{
	(void)state;
	char abs[512];
	path_of(abs, "abs");
	char canary[512];
	path_of(canary, "canary");
	char outside[512];
	path_of(outside, "outside");

	const tent dotdot[] = {{"../x", AE_IFREG, "escaped", 0}};
	unpack_expect(dotdot, 1, AL_EPATH, "'..'");
	reset_ctx();
	const tent dotdot2[] = {{"a/../../x", AE_IFREG, "escaped", 0}};
	unpack_expect(dotdot2, 1, AL_EPATH, "'..'");
	reset_ctx();
	const tent absolute[] = {{abs, AE_IFREG, "escaped", 0}};
	unpack_expect(absolute, 1, AL_EPATH, "absolute");
	reset_ctx();

	/* A symlink to outside, then a file written through it. */
	const tent through_abs[] = {
		{"link", AE_IFLNK, outside, 0},
		{"link/pwned", AE_IFREG, "escaped", 0},
	};
	unpack_expect(through_abs, 2, AL_EPATH, "symlink");
	reset_ctx();
	const tent through_rel[] = {
		{"d", AE_IFDIR, NULL, 0755},
		{"d/up", AE_IFLNK, "../..", 0},
		{"d/up/pwned", AE_IFREG, "escaped", 0},
	};
	unpack_expect(through_rel, 3, AL_EPATH, "symlink");
	reset_ctx();
	/* A symlink, then a file of the same name: replaced, not followed. */
	const tent replace[] = {
		{"victim", AE_IFLNK, canary, 0},
		{"victim", AE_IFREG, "mine", 0},
	};
	unpack_expect(replace, 2, AL_OK, NULL);
	char buf[64];
	read_rel("ctx/victim", buf, sizeof buf);
	assert_string_equal(buf, "mine");
	reset_ctx();

	/* Hardlinks to outside, by '..', by absolute name, via a symlink. */
	const tent hl_up[] = {{"h", 0, "../canary", 0}};
	unpack_expect(hl_up, 1, AL_EPATH, "'..'");
	reset_ctx();
	const tent hl_abs[] = {{"h", 0, canary, 0}};
	unpack_expect(hl_abs, 1, AL_EPATH, "absolute");
	reset_ctx();
	const tent hl_sym[] = {
		{"s", AE_IFLNK, base, 0},
		{"h", 0, "s/canary", 0},
	};
	unpack_expect(hl_sym, 2, AL_EPATH, "symlink");
	reset_ctx();
	const tent hl_missing[] = {{"h", 0, "nothere", 0}};
	unpack_expect(hl_missing, 1, AL_EPATH, "earlier file");
	reset_ctx();
	const tent hl_missing_dir[] = {{"h", 0, "no/such/file", 0}};
	unpack_expect(hl_missing_dir, 1, AL_EPATH, "earlier file");
	reset_ctx();
	/* A hardlink, then a file of its name: the target keeps its data. */
	const tent hl_then_write[] = {
		{"orig", AE_IFREG, "orig", 0},
		{"h", 0, "orig", 0},
		{"h", AE_IFREG, "changed", 0},
	};
	unpack_expect(hl_then_write, 3, AL_OK, NULL);
	read_rel("ctx/orig", buf, sizeof buf);
	assert_string_equal(buf, "orig");
	read_rel("ctx/h", buf, sizeof buf);
	assert_string_equal(buf, "changed");
	reset_ctx();

	const tent dev[] = {{"null", AE_IFCHR, NULL, 0666}};
	unpack_expect(dev, 1, AL_EPATH, "device");
	reset_ctx();
	const tent fifo[] = {{"p", AE_IFIFO, NULL, 0644}};
	unpack_expect(fifo, 1, AL_EPATH, "FIFO");
	assert_false(exists("ctx/p"));
	reset_ctx();

	assert_outside_untouched();
}

static void test_unpack_tree_and_modes(void **state)
{
	(void)state;
	const tent ok[] = {
		{"./", AE_IFDIR, NULL, 0755},
		{"./app/", AE_IFDIR, NULL, 0750},
		{"./app/run.sh", AE_IFREG, "#!/bin/sh\n", 04755},
		{"implicit/dirs/file", AE_IFREG, "x", 0600},
		{"app/link", AE_IFLNK, "/etc/passwd", 0777},
		{"hard", 0, "implicit/dirs/file", 0},
		{"app", AE_IFDIR, NULL, 0700},
	};
	unpack_expect(ok, sizeof ok / sizeof ok[0], AL_OK, NULL);
	char p[512];
	struct stat st;
	path_of(p, "ctx/app/run.sh");
	assert_int_equal(lstat(p, &st), 0);
	/* setuid dropped. */
	assert_int_equal(st.st_mode & 07777, 0755);
	path_of(p, "ctx/app");
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	path_of(p, "ctx/implicit/dirs/file");
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_nlink, 2);
	char target[128];
	path_of(p, "ctx/app/link");
	ssize_t n = readlink(p, target, sizeof target - 1);
	assert_true(n > 0);
	target[n] = '\0';
	assert_string_equal(target, "/etc/passwd");

	/* The target must be empty. */
	char dir[512];
	path_of(dir, "ctx");
	al_err err = {0};
	int fd = make_tar(ok, 1, 0);
	assert_int_equal(al_context_unpack(fd, dir, NULL, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	close(fd);
	reset_ctx();

	/* gzip-compressed. */
	fd = make_tar(ok, sizeof ok / sizeof ok[0], 1);
	assert_int_equal(al_context_unpack(fd, dir, NULL, &err), 0);
	close(fd);
	assert_true(exists("ctx/implicit/dirs/file"));
	reset_ctx();
	assert_outside_untouched();
}

static void test_unpack_limits_and_garbage(void **state)
{
	(void)state;
	char dir[512];
	path_of(dir, "ctx");
	const tent ents[] = {
		{"a", AE_IFREG, "0123456789", 0},
		{"b", AE_IFREG, "0123456789", 0},
		{"c", AE_IFDIR, NULL, 0},
	};
	al_err err = {0};
	al_context_limits lim = {.max_bytes = 15, .max_entries = 10};
	int fd = make_tar(ents, 3, 0);
	assert_int_equal(al_context_unpack(fd, dir, &lim, &err), -1);
	assert_int_equal(err.code, AL_ETOOBIG);
	close(fd);
	reset_ctx();

	lim.max_bytes = 20;
	lim.max_entries = 2;
	fd = make_tar(ents, 3, 0);
	assert_int_equal(al_context_unpack(fd, dir, &lim, &err), -1);
	assert_int_equal(err.code, AL_ETOOBIG);
	assert_non_null(strstr(err.msg, "entries"));
	close(fd);
	reset_ctx();

	lim.max_entries = 3;
	fd = make_tar(ents, 3, 0);
	assert_int_equal(al_context_unpack(fd, dir, &lim, &err), 0);
	close(fd);
	reset_ctx();

	fd = memfd_create("junk", MFD_CLOEXEC);
	assert_int_equal(write(fd, "this is not a tar file at all\n", 30), 30);
	lseek(fd, 0, SEEK_SET);
	assert_int_equal(al_context_unpack(fd, dir, NULL, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	close(fd);
	reset_ctx();

	/* A truncated tar (header promises more data than there is). */
	fd = make_tar(ents, 1, 0);
	assert_int_equal(ftruncate(fd, 600), 0);
	assert_int_equal(al_context_unpack(fd, dir, NULL, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	close(fd);
	reset_ctx();
	assert_outside_untouched();
}

static void hash_of(const char *rel_dir, const char *src, char *out)
{
	char dir[512];
	path_of(dir, rel_dir);
	al_err err = {0};
	if (al_context_hash(dir, src, out, &err) != 0)
		fail_msg("hash: %s", err.msg);
	assert_int_equal(strlen(out), 64);
}

static void make_tree(const char *root, int reversed)
{
	char p[512];
	snprintf(p, sizeof p, "%s", root);
	mkdir_rel(p);
	const char *files[] = {"a.txt", "b/c.txt", "b/d.txt"};
	snprintf(p, sizeof p, "%s/b", root);
	mkdir_rel(p);
	for (int i = 0; i < 3; i++) {
		int k = reversed ? 2 - i : i;
		snprintf(p, sizeof p, "%s/%s", root, files[k]);
		write_file(p, files[k], 0644);
	}
	snprintf(p, sizeof p, "%s/%s/b/link", base, root);
	assert_int_equal(symlink("c.txt", p), 0);
}

static void test_hash(void **state)
{
	(void)state;
	char h1[65], h2[65], h3[65];
	make_tree("t1", 0);
	make_tree("t2", 1);
	hash_of("t1", ".", h1);
	hash_of("t1", ".", h2);
	assert_string_equal(h1, h2);
	/* Same content, created in another order: same hash. */
	hash_of("t2", ".", h2);
	assert_string_equal(h1, h2);
	/* Times do not matter. */
	char p[512];
	path_of(p, "t2/a.txt");
	struct timespec ts[2] = {{1, 0}, {1, 0}};
	assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
	hash_of("t2", ".", h2);
	assert_string_equal(h1, h2);
	/* Content, mode, symlink target and names do. */
	write_file("t2/a.txt", "A.txt", 0644);
	hash_of("t2", ".", h2);
	assert_string_not_equal(h1, h2);
	write_file("t2/a.txt", "a.txt", 0755);
	hash_of("t2", ".", h2);
	assert_string_not_equal(h1, h2);
	write_file("t2/a.txt", "a.txt", 0644);
	hash_of("t2", ".", h2);
	assert_string_equal(h1, h2);
	path_of(p, "t2/b/link");
	unlink(p);
	assert_int_equal(symlink("d.txt", p), 0);
	hash_of("t2", ".", h2);
	assert_string_not_equal(h1, h2);
	unlink(p);
	assert_int_equal(symlink("c.txt", p), 0);
	char q[512];
	path_of(p, "t2/b/d.txt");
	path_of(q, "t2/b/e.txt");
	assert_int_equal(rename(p, q), 0);
	hash_of("t2", ".", h2);
	assert_string_not_equal(h1, h2);

	/* Subtrees and files; the source's own name is not part of it. */
	hash_of("t1", "b", h2);
	hash_of("t1", "./b/", h3);
	assert_string_equal(h2, h3);
	assert_string_not_equal(h1, h2);
	hash_of("t1", "b/c.txt", h3);
	assert_string_not_equal(h2, h3);
	hash_of("t2", "b/c.txt", h2);
	assert_string_equal(h2, h3);

	char dir[512];
	path_of(dir, "t1");
	al_err err = {0};
	assert_int_equal(al_context_hash(dir, "nope", h2, &err), -1);
	assert_int_equal(err.code, AL_ENOENT);
	assert_int_equal(al_context_hash(dir, "../t2", h2, &err), -1);
	assert_int_equal(err.code, AL_EPATH);
	assert_int_equal(al_context_hash(dir, "b/link/x", h2, &err), -1);
	assert_int_equal(err.code, AL_EPATH);

	const char *srcs[] = {"a.txt", "b"};
	const char *srcs2[] = {"b", "a.txt"};
	assert_int_equal(al_context_hash_srcs(dir, srcs, 2, h2, &err), 0);
	assert_int_equal(al_context_hash_srcs(dir, srcs2, 2, h3, &err), 0);
	assert_string_not_equal(h2, h3);
	assert_int_equal(al_context_hash_srcs(dir, srcs, 1, h3, &err), 0);
	assert_string_not_equal(h2, h3);
}

static void copy_ok(const char *src, const char *dest, int chmod_bits,
		    uid_t uid, gid_t gid)
{
	char ctx[512], root[512];
	path_of(ctx, "t1");
	path_of(root, "rootfs");
	al_err err = {0};
	if (al_context_copy(ctx, src, root, dest, chmod_bits, uid, gid, &err) !=
	    0)
		fail_msg("copy %s -> %s: %s", src, dest, err.msg);
}

static void test_copy(void **state)
{
	(void)state;
	char buf[64];
	char p[512];
	struct stat st;
	make_tree("t1", 0);
	mkdir_rel("rootfs");
	mkdir_rel("rootfs/usr");
	mkdir_rel("rootfs/usr/bin");
	/* Symlinks in the rootfs that point out of it, absolute and
	 * relative, and a legitimate one. */
	path_of(p, "rootfs/etc");
	assert_int_equal(symlink("/", p), 0);
	path_of(p, "rootfs/up");
	assert_int_equal(symlink("../..", p), 0);
	path_of(p, "rootfs/bin");
	assert_int_equal(symlink("usr/bin", p), 0);
	char canary[512];
	path_of(canary, "canary");
	path_of(p, "rootfs/victim");
	assert_int_equal(symlink(canary, p), 0);

	/* /etc -> / keeps /etc/passwd inside the rootfs. */
	copy_ok("a.txt", "/etc/passwd", -1, getuid(), getgid());
	read_rel("rootfs/passwd", buf, sizeof buf);
	assert_string_equal(buf, "a.txt");
	copy_ok("a.txt", "/up/pwned", -1, getuid(), getgid());
	assert_true(exists("rootfs/pwned"));
	assert_false(exists("pwned"));
	copy_ok("b", "/up/up/", -1, getuid(), getgid());
	assert_true(exists("rootfs/c.txt"));
	assert_false(exists("c.txt"));
	/* /bin -> usr/bin is followed inside the rootfs. */
	copy_ok("a.txt", "/bin/", 0755, getuid(), getgid());
	path_of(p, "rootfs/usr/bin/a.txt");
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	/* A file over a symlink replaces the symlink, never its target. */
	copy_ok("a.txt", "/victim", -1, getuid(), getgid());
	read_rel("canary", buf, sizeof buf);
	assert_string_equal(buf, "original");
	path_of(p, "rootfs/victim");
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISREG(st.st_mode));

	/* Docker rules: directory contents, dest '/', existing dir. */
	copy_ok("b", "/opt/app", -1, getuid(), getgid());
	read_rel("rootfs/opt/app/c.txt", buf, sizeof buf);
	assert_string_equal(buf, "b/c.txt");
	path_of(p, "rootfs/opt/app/link");
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_false(exists("rootfs/opt/app/b"));
	copy_ok("a.txt", "/opt/app", -1, getuid(), getgid());
	assert_true(exists("rootfs/opt/app/a.txt"));
	copy_ok("a.txt", "/srv/new/", -1, getuid(), getgid());
	assert_true(exists("rootfs/srv/new/a.txt"));
	copy_ok("b/c.txt", "/srv/renamed", -1, getuid(), getgid());
	read_rel("rootfs/srv/renamed", buf, sizeof buf);
	assert_string_equal(buf, "b/c.txt");
	copy_ok(".", "/whole/", -1, getuid(), getgid());
	assert_true(exists("rootfs/whole/a.txt"));
	assert_true(exists("rootfs/whole/b/d.txt"));

	/* Owner. */
	if (geteuid() == 0) {
		copy_ok("b", "/owned", 0640, 1234, 5678);
		path_of(p, "rootfs/owned/c.txt");
		assert_int_equal(lstat(p, &st), 0);
		assert_int_equal(st.st_uid, 1234);
		assert_int_equal(st.st_gid, 5678);
		assert_int_equal(st.st_mode & 07777, 0640);
		path_of(p, "rootfs/owned/link");
		assert_int_equal(lstat(p, &st), 0);
		assert_int_equal(st.st_uid, 1234);
	}

	/* Refused: sources outside the context or through its symlinks. */
	char ctx[512], root[512];
	path_of(ctx, "t1");
	path_of(root, "rootfs");
	al_err err = {0};
	assert_int_equal(al_context_copy(ctx, "../canary", root, "/x", -1,
					 getuid(), getgid(), &err),
			 -1);
	assert_int_equal(err.code, AL_EPATH);
	assert_int_equal(al_context_copy(ctx, "b/link/x", root, "/x", -1,
					 getuid(), getgid(), &err),
			 -1);
	assert_int_equal(err.code, AL_EPATH);
	assert_int_equal(al_context_copy(ctx, "nope", root, "/x", -1, getuid(),
					 getgid(), &err),
			 -1);
	assert_int_equal(err.code, AL_ENOENT);
	assert_int_equal(al_context_copy(ctx, "a.txt", root, "rel", -1,
					 getuid(), getgid(), &err),
			 -1);
	assert_int_equal(err.code, AL_EPATH);
	assert_outside_untouched();
}

static void test_pack_roundtrip(void **state)
{
	(void)state;
	make_tree("t1", 0);
	mkdir_rel("t1/empty");
	write_file("t1/b/exec.sh", "#!/bin/sh\n", 0755);
	char dir[512];
	path_of(dir, "t1");
	int fd = memfd_create("pack", MFD_CLOEXEC);
	assert_true(fd >= 0);
	al_err err = {0};
	assert_int_equal(al_context_pack(dir, fd, &err), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	char out[512];
	path_of(out, "ctx");
	if (al_context_unpack(fd, out, NULL, &err) != 0)
		fail_msg("unpack: %s", err.msg);
	close(fd);
	char h1[65], h2[65];
	hash_of("t1", ".", h1);
	hash_of("ctx", ".", h2);
	assert_string_equal(h1, h2);
	assert_true(exists("ctx/empty"));

	/* Packing twice gives the same bytes. */
	int f1 = memfd_create("p1", MFD_CLOEXEC);
	int f2 = memfd_create("p2", MFD_CLOEXEC);
	assert_int_equal(al_context_pack(dir, f1, &err), 0);
	assert_int_equal(al_context_pack(dir, f2, &err), 0);
	off_t l1 = lseek(f1, 0, SEEK_END), l2 = lseek(f2, 0, SEEK_END);
	assert_int_equal(l1, l2);
	char *m1 = malloc((size_t)l1), *m2 = malloc((size_t)l2);
	assert_int_equal(pread(f1, m1, (size_t)l1, 0), l1);
	assert_int_equal(pread(f2, m2, (size_t)l2, 0), l2);
	assert_memory_equal(m1, m2, (size_t)l1);
	free(m1);
	free(m2);
	close(f1);
	close(f2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_unpack_refuses_escapes,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_unpack_tree_and_modes,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_unpack_limits_and_garbage,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_hash, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pack_roundtrip, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
