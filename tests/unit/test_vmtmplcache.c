/* core/vm/tmplcache: a template snapshot is found again only for the same
 * root filesystem, kernel and accelerator (any byte, mode or link target
 * that differs gives another key), and an entry is copied out whole or
 * not at all. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "vm/tmplcache.h"

typedef struct fx {
	char dir[64];
	char root[192];
	al_vm_kernel k;
} fx;

static void write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, s, strlen(s)), (ssize_t)strlen(s));
	close(fd);
}

static void pathf(char *out, size_t len, const char *dir, const char *name)
{
	assert_true((size_t)snprintf(out, len, "%s/%s", dir, name) < len);
}

static int setup(void **state)
{
	fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	snprintf(f->dir, sizeof f->dir, "/tmp/test-tmplcache-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	char p[256];
	pathf(f->root, sizeof f->root, f->dir, "root");
	assert_int_equal(mkdir(f->root, 0755), 0);
	pathf(p, sizeof p, f->root, "etc");
	assert_int_equal(mkdir(p, 0755), 0);
	pathf(p, sizeof p, f->root, "etc/hostname");
	write_file(p, "sandbox\n");
	pathf(p, sizeof p, f->root, "tmp"); /* an empty directory */
	assert_int_equal(mkdir(p, 01777), 0);
	pathf(p, sizeof p, f->root, "bin");
	assert_int_equal(mkdir(p, 0755), 0);
	pathf(p, sizeof p, f->root, "bin/sh");
	write_file(p, "#!shell\n");
	assert_int_equal(chmod(p, 0755), 0);
	pathf(p, sizeof p, f->root, "bin/ash");
	assert_int_equal(symlink("sh", p), 0);
	pathf(f->k.vmlinuz, sizeof f->k.vmlinuz, f->dir, "vmlinuz");
	write_file(f->k.vmlinuz, "kernel image");
	pathf(f->k.initrd, sizeof f->k.initrd, f->dir, "initrd.img");
	write_file(f->k.initrd, "initrd");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static void key_of(fx *f, al_vm_accel accel, char *key)
{
	al_err err = {0};
	assert_int_equal(al_vm_tmplcache_key(f->root, &f->k, accel, key, &err),
			 0);
	assert_int_equal(strlen(key), AL_VM_TMPLCACHE_KEY_LEN);
}

static void test_same_tree_same_key(void **state)
{
	fx *f = *state;
	char a[AL_VM_TMPLCACHE_KEY_LEN + 1], b[AL_VM_TMPLCACHE_KEY_LEN + 1];
	key_of(f, AL_VM_TCG, a);
	/* A copy elsewhere, with other mtimes, is the same tree. */
	char copy[160], cmd[400];
	pathf(copy, sizeof copy, f->dir, "copy");
	snprintf(cmd, sizeof cmd, "cp -R --no-preserve=timestamps %s %s",
		 f->root, copy);
	assert_int_equal(system(cmd), 0);
	snprintf(f->root, sizeof f->root, "%s", copy);
	key_of(f, AL_VM_TCG, b);
	assert_string_equal(a, b);
	/* The host's link to its VM dir is not the guest's. */
	char p[256];
	pathf(p, sizeof p, f->root, ".airlock-vm");
	assert_int_equal(symlink("/some/state/dir/vm", p), 0);
	key_of(f, AL_VM_TCG, b);
	assert_string_equal(a, b);
}

/* Each change in turn gives a key unlike the one before it. */
static void test_changes_change_key(void **state)
{
	fx *f = *state;
	char before[AL_VM_TMPLCACHE_KEY_LEN + 1];
	char after[AL_VM_TMPLCACHE_KEY_LEN + 1], p[256];
	key_of(f, AL_VM_TCG, before);

	pathf(p, sizeof p, f->root, "etc/hostname");
	write_file(p, "sandboy\n"); /* one byte, same size */
	key_of(f, AL_VM_TCG, after);
	assert_string_not_equal(before, after);

	memcpy(before, after, sizeof before);
	pathf(p, sizeof p, f->root, "bin/sh");
	assert_int_equal(chmod(p, 0700), 0);
	key_of(f, AL_VM_TCG, after);
	assert_string_not_equal(before, after);

	memcpy(before, after, sizeof before);
	pathf(p, sizeof p, f->root, "bin/ash");
	assert_int_equal(unlink(p), 0);
	assert_int_equal(symlink("sH", p), 0);
	key_of(f, AL_VM_TCG, after);
	assert_string_not_equal(before, after);

	memcpy(before, after, sizeof before);
	pathf(p, sizeof p, f->root, "etc/empty");
	write_file(p, "");
	key_of(f, AL_VM_TCG, after);
	assert_string_not_equal(before, after);

	memcpy(before, after, sizeof before);
	write_file(f->k.initrd, "initrD");
	key_of(f, AL_VM_TCG, after);
	assert_string_not_equal(before, after);

	memcpy(before, after, sizeof before);
	key_of(f, AL_VM_KVM, after);
	assert_string_not_equal(before, after);
}

static void test_put_then_get(void **state)
{
	fx *f = *state;
	static const char *const files[] = {"disk.ext4", "disk.base.ext4",
					    "mem",	 "state",
					    "accel",	 "format"};
	char key[AL_VM_TMPLCACHE_KEY_LEN + 1], src[160], dst[160], cache[160];
	char p[256], got[32] = "";
	key_of(f, AL_VM_TCG, key);
	pathf(src, sizeof src, f->dir, "built");
	pathf(dst, sizeof dst, f->dir, "restored");
	pathf(cache, sizeof cache, f->dir, "cache");
	assert_int_equal(mkdir(src, 0700), 0);
	assert_int_equal(mkdir(dst, 0700), 0);
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		pathf(p, sizeof p, src, files[i]);
		write_file(p, files[i]);
	}
	al_err err = {0};
	/* No cache dir yet: a miss, not an error. */
	assert_int_equal(al_vm_tmplcache_get(cache, key, dst, &err), 0);
	assert_int_equal(al_vm_tmplcache_put(cache, key, src, &err), 0);
	assert_int_equal(al_vm_tmplcache_get(cache, key, dst, &err), 1);
	pathf(p, sizeof p, dst, "state");
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, got, sizeof got - 1), 5);
	close(fd);
	assert_string_equal(got, "state");

	/* An incomplete entry is a miss and copies nothing. */
	char other[AL_VM_TMPLCACHE_KEY_LEN + 1], empty[160];
	key_of(f, AL_VM_KVM, other);
	snprintf(p, sizeof p, "%s/%s", cache, other);
	assert_int_equal(mkdir(p, 0700), 0);
	pathf(empty, sizeof empty, f->dir, "empty");
	assert_int_equal(mkdir(empty, 0700), 0);
	assert_int_equal(al_vm_tmplcache_get(cache, other, empty, &err), 0);
	assert_int_equal(rmdir(empty), 0);

	/* A cache others can write is refused. */
	assert_int_equal(chmod(cache, 0777), 0);
	assert_int_equal(al_vm_tmplcache_get(cache, key, dst, &err), -1);
	assert_int_equal(err.code, AL_EPERM);
	assert_int_equal(chmod(cache, 0700), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_same_tree_same_key, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_changes_change_key, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_put_then_get, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
