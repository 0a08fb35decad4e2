/* Master keys and sealing: round trip, and every way an open must fail
 * (tampered bytes, another row's AAD, another key); key files made once,
 * 0600, refused when readable by others; rotation keeps old keys. */
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

#include "cred/credcrypt.h"

static char state[] = "/tmp/test_credcrypt.XXXXXX";

static void rm_state(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", state);
	assert_int_equal(system(cmd), 0);
}

static int setup(void **st)
{
	(void)st;
	strcpy(state, "/tmp/test_credcrypt.XXXXXX");
	return mkdtemp(state) != NULL ? 0 : -1;
}

static int teardown(void **st)
{
	(void)st;
	rm_state();
	return 0;
}

static void seal(const al_keyring *kr, const char *aad, const char *v,
		 unsigned char **ct, size_t *len, int *kid)
{
	al_err err;
	assert_int_equal(al_cred_seal(kr, aad, v, strlen(v), ct, len, kid,
				      &err),
			 0);
	assert_int_equal(*len, strlen(v) + AL_SEAL_OVERHEAD);
}

static void test_round_trip(void **st)
{
	(void)st;
	al_keyring kr;
	al_err err;
	assert_int_equal(al_keyring_load(&kr, state, 0, &err), -1);
	assert_int_equal(err.code, AL_ENOENT);
	assert_int_equal(al_keyring_load(&kr, state, 1, &err), 0);
	assert_int_equal(kr.n, 1);
	assert_int_equal(kr.current, 1);

	char path[256];
	struct stat sb;
	snprintf(path, sizeof path, "%s/keys/master-1.key", state);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0600);
	assert_int_equal(sb.st_size, AL_MASTER_KEY_LEN);

	unsigned char *ct;
	size_t len;
	int kid;
	const char *v = "ghp_s3cr3t-value";
	seal(&kr, "cr_1:1", v, &ct, &len, &kid);
	assert_int_equal(kid, 1);
	assert_null(memmem(ct, len, v, strlen(v)));

	char *pt;
	size_t n;
	assert_int_equal(al_cred_open(&kr, kid, "cr_1:1", ct, len, &pt, &n,
				      &err),
			 0);
	assert_int_equal(n, strlen(v));
	assert_string_equal(pt, v);
	al_secret_free(pt, n);

	/* Two seals of one value differ (random nonce). */
	unsigned char *ct2;
	size_t len2;
	seal(&kr, "cr_1:1", v, &ct2, &len2, &kid);
	assert_memory_not_equal(ct, ct2, len);
	free(ct2);

	/* A second load (another process's start) finds the same key. */
	al_keyring kr2;
	assert_int_equal(al_keyring_load(&kr2, state, 1, &err), 0);
	assert_int_equal(kr2.n, 1);
	assert_int_equal(al_cred_open(&kr2, 1, "cr_1:1", ct, len, &pt, &n,
				      &err),
			 0);
	al_secret_free(pt, n);
	al_keyring_wipe(&kr2);
	free(ct);
	al_keyring_wipe(&kr);
}

static void test_tamper_aad_key(void **st)
{
	(void)st;
	al_keyring kr;
	al_err err;
	assert_int_equal(al_keyring_load(&kr, state, 1, &err), 0);
	unsigned char *ct;
	size_t len;
	int kid;
	seal(&kr, "cr_1:2", "value", &ct, &len, &kid);
	char *pt = NULL;
	size_t n;
	/* Every byte: nonce, ciphertext and tag are all authenticated. */
	for (size_t i = 0; i < len; i++) {
		ct[i] ^= 0x01;
		assert_int_equal(al_cred_open(&kr, kid, "cr_1:2", ct, len, &pt,
					      &n, &err),
				 -1);
		assert_int_equal(err.code, AL_EPERM);
		ct[i] ^= 0x01;
	}
	/* Truncated. */
	assert_int_equal(al_cred_open(&kr, kid, "cr_1:2", ct, len - 1, &pt, &n,
				      &err),
			 -1);
	assert_int_equal(al_cred_open(&kr, kid, "cr_1:2", ct, 3, &pt, &n, &err),
			 -1);
	/* Another row's AAD or an older version's. */
	assert_int_equal(al_cred_open(&kr, kid, "cr_2:2", ct, len, &pt, &n,
				      &err),
			 -1);
	assert_int_equal(err.code, AL_EPERM);
	assert_int_equal(al_cred_open(&kr, kid, "cr_1:1", ct, len, &pt, &n,
				      &err),
			 -1);
	/* A key id not in the ring. */
	assert_int_equal(al_cred_open(&kr, 7, "cr_1:2", ct, len, &pt, &n, &err),
			 -1);
	assert_int_equal(err.code, AL_ENOENT);
	/* Another key under the same id (another host's keys/). */
	al_keyring other = kr;
	other.keys[0].key[0] ^= 0x80;
	assert_int_equal(al_cred_open(&other, kid, "cr_1:2", ct, len, &pt, &n,
				      &err),
			 -1);
	assert_int_equal(err.code, AL_EPERM);
	assert_null(pt);
	al_keyring_wipe(&other);
	free(ct);
	al_keyring_wipe(&kr);
}

static void test_rotation(void **st)
{
	(void)st;
	al_keyring kr;
	al_err err;
	assert_int_equal(al_keyring_load(&kr, state, 1, &err), 0);
	unsigned char *old;
	size_t len;
	int kid;
	seal(&kr, "a:1", "old", &old, &len, &kid);
	assert_int_equal(al_keyring_add(&kr, &err), 0);
	assert_int_equal(kr.n, 2);
	assert_int_equal(kr.current, 2);
	unsigned char *neu;
	size_t len2;
	int kid2;
	seal(&kr, "a:1", "new", &neu, &len2, &kid2);
	assert_int_equal(kid2, 2);
	char *pt;
	size_t n;
	/* The old key still opens what it sealed; not under key 2. */
	assert_int_equal(al_cred_open(&kr, 1, "a:1", old, len, &pt, &n, &err),
			 0);
	assert_string_equal(pt, "old");
	al_secret_free(pt, n);
	assert_int_equal(al_cred_open(&kr, 2, "a:1", old, len, &pt, &n, &err),
			 -1);
	assert_int_equal(al_keyring_drop(&kr, 2, &err), -1);
	assert_int_equal(err.code, AL_ESTATE);
	assert_int_equal(al_keyring_drop(&kr, 1, &err), 0);
	assert_int_equal(kr.n, 1);
	assert_int_equal(al_cred_open(&kr, 1, "a:1", old, len, &pt, &n, &err),
			 -1);
	assert_int_equal(err.code, AL_ENOENT);
	/* Reloaded from disk: only key 2. */
	al_keyring kr2;
	assert_int_equal(al_keyring_load(&kr2, state, 1, &err), 0);
	assert_int_equal(kr2.n, 1);
	assert_int_equal(kr2.current, 2);
	assert_int_equal(al_cred_open(&kr2, 2, "a:1", neu, len2, &pt, &n, &err),
			 0);
	assert_string_equal(pt, "new");
	al_secret_free(pt, n);
	al_keyring_wipe(&kr2);
	free(old);
	free(neu);
	al_keyring_wipe(&kr);
}

static void test_key_file_refused(void **st)
{
	(void)st;
	al_keyring kr;
	al_err err;
	assert_int_equal(al_keyring_load(&kr, state, 1, &err), 0);
	char path[256];
	snprintf(path, sizeof path, "%s/keys/master-1.key", state);
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(al_keyring_load(&kr, state, 1, &err), -1);
	assert_int_equal(err.code, AL_EPERM);
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(truncate(path, 31), 0);
	assert_int_equal(al_keyring_load(&kr, state, 1, &err), -1);
	assert_int_equal(err.code, AL_EPERM);
	/* Other names in keys/ (the CA's files, temporaries) are not keys. */
	assert_int_equal(unlink(path), 0);
	snprintf(path, sizeof path, "%s/keys/master-01.key", state);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(al_keyring_load(&kr, state, 1, &err), 0);
	assert_int_equal(kr.n, 1);
	assert_int_equal(kr.current, 1);
	al_keyring_wipe(&kr);
}

/* Concurrent first starts end with one key that all of them hold. */
static void test_first_start_race(void **st)
{
	(void)st;
	enum { N = 6 };
	int fds[N][2];
	for (int i = 0; i < N; i++) {
		assert_int_equal(pipe(fds[i]), 0);
		pid_t p = fork();
		assert_true(p >= 0);
		if (p == 0) {
			al_keyring kr;
			al_err err;
			unsigned char *ct = NULL;
			size_t len = 0;
			int kid;
			if (al_keyring_load(&kr, state, 1, &err) < 0 ||
			    al_cred_seal(&kr, "x:1", "v", 1, &ct, &len, &kid,
					 &err) < 0)
				_exit(1);
			ssize_t w = write(fds[i][1], ct, len);
			_exit(w == (ssize_t)len ? 0 : 1);
		}
		close(fds[i][1]);
	}
	al_keyring kr;
	al_err err;
	unsigned char ct[64];
	for (int i = 0; i < N; i++) {
		ssize_t n = read(fds[i][0], ct, sizeof ct);
		assert_int_equal(n, 1 + AL_SEAL_OVERHEAD);
		close(fds[i][0]);
		if (i == 0)
			assert_int_equal(al_keyring_load(&kr, state, 0, &err),
					 0);
		char *pt;
		size_t m;
		assert_int_equal(al_cred_open(&kr, 1, "x:1", ct, (size_t)n, &pt,
					      &m, &err),
				 0);
		al_secret_free(pt, m);
	}
	assert_int_equal(kr.n, 1);
	al_keyring_wipe(&kr);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_tamper_aad_key, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rotation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_file_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_first_start_race, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
