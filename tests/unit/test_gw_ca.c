/* gw/ca: the host CA on disk and the leaves it mints, checked the way
 * strict clients check them (OpenSSL X509_STRICT + hostname). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "ca/ca.h"

static char dir[] = "/tmp/al-gwca-XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* A fresh keys dir under dir. */
static void keys_dir(const char *name, char *out, size_t outlen)
{
	snprintf(out, outlen, "%s/%s", dir, name);
	assert_int_equal(mkdir(out, 0700), 0);
}

static mode_t file_mode(const char *d, const char *f)
{
	char p[256];
	struct stat st;
	snprintf(p, sizeof p, "%s/%s", d, f);
	assert_int_equal(stat(p, &st), 0);
	return st.st_mode & 07777;
}

/* X509_verify_cert with X509_STRICT, the sslserver purpose and name;
 * returns the verify error (X509_V_OK when it passes). */
static int verify_leaf(X509 *ca, X509 *leaf, const char *name)
{
	X509_STORE *st = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	assert_non_null(st);
	assert_non_null(ctx);
	assert_int_equal(X509_STORE_add_cert(st, ca), 1);
	assert_int_equal(X509_STORE_CTX_init(ctx, st, leaf, NULL), 1);
	X509_VERIFY_PARAM *p = X509_STORE_CTX_get0_param(ctx);
	X509_VERIFY_PARAM_set_flags(p, X509_V_FLAG_X509_STRICT);
	X509_VERIFY_PARAM_set_purpose(p, X509_PURPOSE_SSL_SERVER);
	X509_VERIFY_PARAM_set1_host(p, name, 0);
	int ok = X509_verify_cert(ctx);
	int e = X509_STORE_CTX_get_error(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(st);
	return ok == 1 ? X509_V_OK : (e != X509_V_OK ? e : -1);
}

static EVP_PKEY *p256(void)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");
	assert_non_null(k);
	return k;
}

static void test_created_once_with_modes_and_reloaded(void **state)
{
	(void)state;
	char d[128];
	keys_dir("k1", d, sizeof d);
	al_err err = {0};
	al_ca *ca = al_ca_open(d, &err);
	assert_non_null(ca);
	assert_int_equal(file_mode(d, "ca.key"), 0600);
	assert_int_equal(file_mode(d, "ca.crt"), 0644);
	X509 *c = al_ca_cert(ca);
	char cn[128];
	X509_NAME_get_text_by_NID(X509_get_subject_name(c), NID_commonName, cn,
				  sizeof cn);
	assert_int_equal(strncmp(cn, "Airlock sandbox CA ", 19), 0);
	assert_true(strlen(cn) > 19);
	/* A CA that can sign leaves only, no intermediates. */
	BASIC_CONSTRAINTS *bc = X509_get_ext_d2i(c, NID_basic_constraints, NULL,
						 NULL);
	assert_non_null(bc);
	assert_true(bc->ca);
	assert_int_equal(ASN1_INTEGER_get(bc->pathlen), 0);
	BASIC_CONSTRAINTS_free(bc);
	assert_int_equal(X509_get_key_usage(c), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
	assert_true(X509_EXTENSION_get_critical(
		X509_get_ext(c, X509_get_ext_by_NID(c, NID_key_usage, -1))));
	assert_non_null(X509_get0_subject_key_id(c));
	/* The same CA again, not a new one. */
	al_ca *again = al_ca_open(d, &err);
	assert_non_null(again);
	assert_int_equal(X509_cmp(c, al_ca_cert(again)), 0);
	size_t len;
	char *pem = al_ca_cert_pem(again, &len, &err);
	assert_non_null(pem);
	assert_int_equal(strncmp(pem, "-----BEGIN CERTIFICATE-----", 27), 0);
	assert_int_equal(strlen(pem), len);
	free(pem);
	al_ca_close(again);
	al_ca_close(ca);
}

static void
test_key_file_with_wrong_mode_owner_or_symlink_is_refused(void **state)
{
	(void)state;
	char d[128], p[192], q[192];
	keys_dir("k2", d, sizeof d);
	al_err err = {0};
	al_ca_close(al_ca_open(d, &err));
	snprintf(p, sizeof p, "%s/ca.key", d);
	assert_int_equal(chmod(p, 0640), 0);
	assert_null(al_ca_open(d, &err));
	assert_int_equal(err.code, AL_EPERM);
	assert_non_null(strstr(err.msg, "0600"));
	assert_int_equal(chmod(p, 0600), 0);
	if (geteuid() == 0) { /* another owner, mode right */
		assert_int_equal(chown(p, 1234, 0), 0);
		memset(&err, 0, sizeof err);
		assert_null(al_ca_open(d, &err));
		assert_int_equal(err.code, AL_EPERM);
		assert_int_equal(chown(p, 0, 0), 0);
	}
	al_ca *ok = al_ca_open(d, &err); /* and back: loads */
	assert_non_null(ok);
	al_ca_close(ok);
	snprintf(q, sizeof q, "%s/real.key", d);
	assert_int_equal(rename(p, q), 0);
	assert_int_equal(symlink(q, p), 0);
	memset(&err, 0, sizeof err);
	assert_null(al_ca_open(d, &err));
	assert_int_not_equal(err.code, AL_OK);
}

static void test_lone_key_from_a_crash_is_replaced(void **state)
{
	(void)state;
	char d[128], p[192];
	keys_dir("k3", d, sizeof d);
	al_err err = {0};
	al_ca_close(al_ca_open(d, &err));
	snprintf(p, sizeof p, "%s/ca.crt", d);
	assert_int_equal(unlink(p), 0);
	al_ca *ca = al_ca_open(d, &err);
	assert_non_null(ca);
	al_ca *again = al_ca_open(d, &err); /* the new pair matches */
	assert_non_null(again);
	al_ca_close(again);
	al_ca_close(ca);
}

static void test_concurrent_starters_agree(void **state)
{
	(void)state;
	char d[128];
	keys_dir("k4", d, sizeof d);
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	enum { N = 4 };
	for (int i = 0; i < N; i++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			al_err err = {0};
			al_ca *ca = al_ca_open(d, &err);
			unsigned char md[32] = {0};
			unsigned int n = 0;
			if (ca != NULL)
				X509_digest(al_ca_cert(ca), EVP_sha256(), md,
					    &n);
			_exit(write(fds[1], md, 32) == 32 && ca != NULL ? 0
									: 1);
		}
	}
	close(fds[1]);
	unsigned char first[32], md[32];
	for (int i = 0; i < N; i++) {
		assert_int_equal(read(fds[0], md, 32), 32);
		if (i == 0)
			memcpy(first, md, 32);
		assert_memory_equal(first, md, 32);
	}
	close(fds[0]);
	for (int i = 0; i < N; i++) {
		int st;
		assert_true(wait(&st) > 0);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

static void test_leaf_verifies_strictly_for_its_name_only(void **state)
{
	(void)state;
	char d[128];
	keys_dir("k5", d, sizeof d);
	al_err err = {0};
	al_ca *ca = al_ca_open(d, &err);
	assert_non_null(ca);
	/* What clients load: the PEM file, not the object in memory. */
	char p[192];
	snprintf(p, sizeof p, "%s/ca.crt", d);
	FILE *f = fopen(p, "r");
	assert_non_null(f);
	X509 *cacert = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(cacert);

	EVP_PKEY *k = p256();
	X509 *leaf = al_ca_mint(ca, "pypi.org", k, &err);
	assert_non_null(leaf);
	assert_int_equal(verify_leaf(cacert, leaf, "pypi.org"), X509_V_OK);
	assert_int_equal(verify_leaf(cacert, leaf, "evil.org"),
			 X509_V_ERR_HOSTNAME_MISMATCH);
	assert_int_equal(verify_leaf(cacert, leaf, "sub.pypi.org"),
			 X509_V_ERR_HOSTNAME_MISMATCH);

	/* AKI is the CA's SKI; the leaf has no SKI of its own. */
	const ASN1_OCTET_STRING *aki = X509_get0_authority_key_id(leaf);
	assert_non_null(aki);
	assert_int_equal(
		ASN1_OCTET_STRING_cmp(aki, X509_get0_subject_key_id(cacert)),
		0);
	assert_null(X509_get0_subject_key_id(leaf));
	assert_int_equal(X509_get_extended_key_usage(leaf), XKU_SSL_SERVER);
	assert_int_equal(X509_get_key_usage(leaf), KU_DIGITAL_SIGNATURE);
	/* Backdated two days, valid about thirty. */
	int days, secs;
	assert_int_equal(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(leaf),
					NULL),
			 1);
	assert_true(days == 2 || (days == 1 && secs > 86000));
	assert_int_equal(ASN1_TIME_diff(&days, &secs, NULL,
					X509_get0_notAfter(leaf)),
			 1);
	assert_true(days >= 29 && days <= 30);
	/* 128-bit serials, two mints never share one. */
	X509 *leaf2 = al_ca_mint(ca, "pypi.org", k, &err);
	assert_non_null(leaf2);
	BIGNUM *s1 = ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf), NULL);
	BIGNUM *s2 = ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf2), NULL);
	assert_int_equal(BN_num_bytes(s1), 16);
	assert_int_not_equal(BN_cmp(s1, s2), 0);
	BN_free(s1);
	BN_free(s2);
	X509_free(leaf2);
	X509_free(leaf);

	/* A name of 64+ bytes: no CN, critical SAN, still valid. */
	const char *longname = "a123456789b123456789c123456789d123456789e1234"
			       "56789f123456789.example.com";
	leaf = al_ca_mint(ca, longname, k, &err);
	assert_non_null(leaf);
	assert_int_equal(X509_NAME_entry_count(X509_get_subject_name(leaf)), 0);
	assert_true(X509_EXTENSION_get_critical(X509_get_ext(
		leaf, X509_get_ext_by_NID(leaf, NID_subject_alt_name, -1))));
	assert_int_equal(verify_leaf(cacert, leaf, longname), X509_V_OK);
	X509_free(leaf);

	X509_free(cacert);
	EVP_PKEY_free(k);
	al_ca_close(ca);
}

/* The mint service's path: the key as its point, the leaf as DER. */
static void test_leaf_from_a_point_is_the_same_leaf(void **state)
{
	(void)state;
	char d[128];
	keys_dir("k7", d, sizeof d);
	al_err err = {0};
	al_ca *ca = al_ca_open(d, &err);
	assert_non_null(ca);
	EVP_PKEY *k = p256();
	unsigned char point[AL_CA_POINT_LEN];
	assert_int_equal(al_ca_key_point(k, point, &err), 0);
	X509 *x = al_ca_mint_point(ca, "deb.debian.org", point, &err);
	assert_non_null(x);
	unsigned char *der = NULL;
	int n = i2d_X509(x, &der);
	assert_true(n > 0);
	X509_free(x);
	const unsigned char *p = der;
	x = d2i_X509(NULL, &p, n);
	assert_non_null(x);
	assert_int_equal(X509_check_private_key(x, k), 1);
	assert_int_equal(verify_leaf(al_ca_cert(ca), x, "deb.debian.org"),
			 X509_V_OK);
	assert_int_equal(
		ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(x),
				      X509_get0_subject_key_id(al_ca_cert(ca))),
		0);
	X509_free(x);
	OPENSSL_free(der);
	/* A point off the curve, compressed, or short is refused. */
	point[40] ^= 1;
	assert_null(al_ca_mint_point(ca, "deb.debian.org", point, &err));
	point[40] ^= 1;
	point[0] = 0x02;
	assert_null(al_ca_mint_point(ca, "deb.debian.org", point, &err));
	assert_int_equal(err.code, AL_EINVAL);
	EVP_PKEY_free(k);
	al_ca_close(ca);
}

static void test_mint_refuses_bad_names_and_keys(void **state)
{
	(void)state;
	char d[128];
	keys_dir("k6", d, sizeof d);
	al_err err = {0};
	al_ca *ca = al_ca_open(d, &err);
	assert_non_null(ca);
	EVP_PKEY *k = p256();
	static const char *const bad[] = {"1.2.3.4",	   "127.1",
					  "0x7f.0.0.1",	   "example.123",
					  "Pypi.org",	   "pypi.org.",
					  "a b",	   "",
					  "*.x.org",	   "a..b",
					  "caf\xc3\xa9.fr"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		memset(&err, 0, sizeof err);
		X509 *x = al_ca_mint(ca, bad[i], k, &err);
		if (x != NULL)
			fail_msg("minted for \"%s\"", bad[i]);
		assert_int_equal(err.code, AL_EINVAL);
	}
	EVP_PKEY *p384 = EVP_EC_gen("P-384");
	assert_non_null(p384);
	assert_null(al_ca_mint(ca, "pypi.org", p384, &err));
	assert_int_equal(err.code, AL_EINVAL);
	EVP_PKEY_free(p384);
	EVP_PKEY_free(k);
	al_ca_close(ca);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_created_once_with_modes_and_reloaded),
		cmocka_unit_test(
			test_key_file_with_wrong_mode_owner_or_symlink_is_refused),
		cmocka_unit_test(test_lone_key_from_a_crash_is_replaced),
		cmocka_unit_test(test_concurrent_starters_agree),
		cmocka_unit_test(test_leaf_verifies_strictly_for_its_name_only),
		cmocka_unit_test(test_leaf_from_a_point_is_the_same_leaf),
		cmocka_unit_test(test_mint_refuses_bad_names_and_keys),
	};
	return cmocka_run_group_tests_name("gw_ca", tests, setup, teardown);
}
