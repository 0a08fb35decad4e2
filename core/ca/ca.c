/* The host CA: create-or-load under a lock, and leaf minting. See ca.h. */
#include "ca/ca.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "base/cleanup.h"
#include "base/dnsname.h"
#include "ca/ossl.h"

#define CA_VALID_S (3650 * 86400L)
#define CA_FILE_MAX (64u << 10)

static EC_GROUP *p256_group;

static void p256_group_init(void)
{
	p256_group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
}

struct al_ca {
	EVP_PKEY *key;
	X509 *cert;
};

int al_ca_key_is_p256(EVP_PKEY *k)
{
	char group[64];
	size_t len = 0;
	return k != NULL && EVP_PKEY_is_a(k, "EC") &&
	       EVP_PKEY_get_utf8_string_param(k, OSSL_PKEY_PARAM_GROUP_NAME,
					      group, sizeof group, &len) == 1 &&
	       strcmp(group, "prime256v1") == 0;
}

/* A random positive 128-bit serial. */
static int set_serial(X509 *x, al_err *err)
{
	unsigned char b[16];
	if (RAND_bytes(b, sizeof b) != 1)
		return al_gw_ossl_err(err, AL_EINTERNAL, "random serial");
	b[0] &= 0x7f;
	b[0] |= 0x40; /* 16 significant bytes, never zero */
	BIGNUM *bn = BN_bin2bn(b, sizeof b, NULL);
	ASN1_INTEGER *i = bn != NULL ? BN_to_ASN1_INTEGER(bn, NULL) : NULL;
	int ok = i != NULL && X509_set_serialNumber(x, i) == 1;
	ASN1_INTEGER_free(i);
	BN_free(bn);
	return ok ? 0 : al_gw_ossl_err(err, AL_ENOMEM, "serial");
}

static int add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value,
		   al_err *err)
{
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
	int ok = e != NULL && X509_add_ext(x, e, -1) == 1;
	X509_EXTENSION_free(e);
	return ok ? 0 : al_gw_ossl_err(err, AL_EINTERNAL, OBJ_nid2sn(nid));
}

static int set_validity(X509 *x, long before_s, long after_s, al_err *err)
{
	if (X509_gmtime_adj(X509_getm_notBefore(x), -before_s) == NULL ||
	    X509_gmtime_adj(X509_getm_notAfter(x), after_s) == NULL)
		return al_gw_ossl_err(err, AL_EINTERNAL, "validity");
	return 0;
}

/* "Airlock sandbox CA <8 hex of /etc/machine-id>" (random without one). */
static void ca_common_name(char *out, size_t outlen)
{
	char id[9] = "";
	FILE *f = fopen("/etc/machine-id", "re");
	if (f != NULL) {
		char line[64];
		if (fgets(line, sizeof line, f) != NULL) {
			size_t n = 0;
			while (n < 8 && isxdigit((unsigned char)line[n]))
				n++;
			if (n == 8)
				memcpy(id, line, 8), id[8] = '\0';
		}
		fclose(f);
	}
	if (id[0] == '\0') {
		unsigned char r[4] = {0};
		RAND_bytes(r, sizeof r);
		snprintf(id, sizeof id, "%02x%02x%02x%02x", r[0], r[1], r[2],
			 r[3]);
	}
	snprintf(out, outlen, "Airlock sandbox CA %s", id);
}

static X509 *ca_self_sign(EVP_PKEY *key, al_err *err)
{
	char cn[64];
	ca_common_name(cn, sizeof cn);
	X509 *x = X509_new();
	X509_NAME *n = X509_NAME_new();
	if (x == NULL || n == NULL ||
	    X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC,
				       (const unsigned char *)"Airlock", -1, -1,
				       0) != 1 ||
	    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
				       (const unsigned char *)cn, -1, -1,
				       0) != 1 ||
	    X509_set_version(x, X509_VERSION_3) != 1 ||
	    X509_set_subject_name(x, n) != 1 ||
	    X509_set_issuer_name(x, n) != 1 || X509_set_pubkey(x, key) != 1) {
		al_gw_ossl_err(err, AL_ENOMEM, "CA certificate");
		goto fail;
	}
	X509V3_CTX ctx;
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	if (set_serial(x, err) < 0 ||
	    set_validity(x, AL_CA_LEAF_BACKDATE_S, CA_VALID_S, err) < 0 ||
	    add_ext(x, &ctx, NID_basic_constraints,
		    "critical,CA:TRUE,pathlen:0", err) < 0 ||
	    add_ext(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign",
		    err) < 0 ||
	    add_ext(x, &ctx, NID_subject_key_identifier, "hash", err) < 0 ||
	    add_ext(x, &ctx, NID_authority_key_identifier, "keyid:always",
		    err) < 0)
		goto fail;
	if (X509_sign(x, key, EVP_sha256()) <= 0) {
		al_gw_ossl_err(err, AL_EINTERNAL, "signing the CA certificate");
		goto fail;
	}
	X509_NAME_free(n);
	return x;
fail:
	X509_NAME_free(n);
	X509_free(x);
	return NULL;
}

/* Write a new file dir/name through dir/.name.tmp + fsync + rename. */
static int write_atomic(int dirfd, const char *name, mode_t mode,
			int (*emit)(FILE *, void *), void *arg, al_err *err)
{
	char tmp[64];
	snprintf(tmp, sizeof tmp, ".%s.tmp", name);
	unlinkat(dirfd, tmp, 0);
	int fd = openat(dirfd, tmp,
			O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			mode);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "create keys/%s", tmp);
	FILE *f = fdopen(fd, "w");
	if (f == NULL) {
		int e = errno;
		close(fd);
		unlinkat(dirfd, tmp, 0);
		return al_err_sys(err, AL_ESYS, e, "fdopen keys/%s", tmp);
	}
	int ok = fchmod(fd, mode) == 0 && emit(f, arg) == 1 && fflush(f) == 0 &&
		 fsync(fd) == 0;
	int e = errno;
	if (fclose(f) != 0)
		ok = 0;
	if (!ok || renameat(dirfd, tmp, dirfd, name) < 0) {
		e = ok ? errno : e;
		unlinkat(dirfd, tmp, 0);
		ERR_clear_error();
		return al_err_sys(err, AL_ESYS, e, "write keys/%s", name);
	}
	return 0;
}

static int emit_key(FILE *f, void *k)
{
	return PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
}

static int emit_cert(FILE *f, void *x)
{
	return PEM_write_X509(f, x);
}

/* Open dir/name for reading: a regular file, not a symlink; the key must
 * also be ours and 0600. */
static FILE *open_pem(int dirfd, const char *name, int is_key, al_err *err)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		al_err_sys(err, errno == ENOENT ? AL_ENOENT : AL_ESYS, errno,
			   "open keys/%s", name);
		return NULL;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > (off_t)CA_FILE_MAX ||
	    (is_key &&
	     (st.st_uid != geteuid() || (st.st_mode & 07777) != 0600))) {
		close(fd);
		al_err_set(err, AL_EPERM, 0, "keys/%s must be a regular file%s",
			   name,
			   is_key ? " owned by this user with mode 0600" : "");
		return NULL;
	}
	FILE *f = fdopen(fd, "r");
	if (f == NULL) {
		al_err_sys(err, AL_ESYS, errno, "fdopen keys/%s", name);
		close(fd);
	}
	return f;
}

static int ca_load(int dirfd, al_ca *ca, al_err *err)
{
	FILE *f = open_pem(dirfd, AL_CA_KEY_FILE, 1, err);
	if (f == NULL)
		return -1;
	ca->key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	if (ca->key == NULL)
		return al_gw_ossl_err(err, AL_EINVAL, "reading keys/ca.key");
	f = open_pem(dirfd, AL_CA_CERT_FILE, 0, err);
	if (f == NULL)
		return -1;
	ca->cert = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	if (ca->cert == NULL)
		return al_gw_ossl_err(err, AL_EINVAL, "reading keys/ca.crt");
	if (!al_ca_key_is_p256(ca->key) ||
	    X509_check_private_key(ca->cert, ca->key) != 1 ||
	    X509_get0_subject_key_id(ca->cert) == NULL) {
		ERR_clear_error();
		return al_err_set(err, AL_EINVAL, 0,
				  "keys/ca.key and keys/ca.crt are not a P-256 "
				  "CA pair with a subject key identifier");
	}
	return 0;
}

static int ca_create(int dirfd, al_ca *ca, al_err *err)
{
	ca->key = EVP_EC_gen("P-256");
	if (ca->key == NULL)
		return al_gw_ossl_err(err, AL_EINTERNAL,
				      "generating the CA key");
	ca->cert = ca_self_sign(ca->key, err);
	if (ca->cert == NULL)
		return -1;
	/* Key first: ca.crt present means the pair is whole. */
	if (write_atomic(dirfd, AL_CA_KEY_FILE, 0600, emit_key, ca->key, err) <
		    0 ||
	    write_atomic(dirfd, AL_CA_CERT_FILE, 0644, emit_cert, ca->cert,
			 err) < 0)
		return -1;
	if (fsync(dirfd) < 0)
		return al_err_sys(err, AL_ESYS, errno, "fsync keys");
	return 0;
}

al_ca *al_ca_open(const char *keys_dir, al_err *err)
{
	al_autofd int dirfd = open(keys_dir,
				   O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		al_err_sys(err, AL_ESYS, errno, "open %s", keys_dir);
		return NULL;
	}
	al_autofd int lock = openat(dirfd, "ca.lock",
				    O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
				    0600);
	if (lock < 0 || flock(lock, LOCK_EX) < 0) {
		al_err_sys(err, AL_ESYS, errno, "lock %s/ca.lock", keys_dir);
		return NULL;
	}
	al_ca *ca = calloc(1, sizeof *ca);
	if (ca == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		return NULL;
	}
	struct stat st;
	int rc;
	if (fstatat(dirfd, AL_CA_CERT_FILE, &st, AT_SYMLINK_NOFOLLOW) == 0)
		rc = ca_load(dirfd, ca, err);
	else if (errno == ENOENT)
		rc = ca_create(dirfd, ca, err); /* also replaces a lone key */
	else
		rc = al_err_sys(err, AL_ESYS, errno, "stat %s/ca.crt",
				keys_dir);
	if (rc < 0) {
		al_err_wrap(err, "host CA in %s", keys_dir);
		al_ca_close(ca);
		return NULL;
	}
	return ca;
}

void al_ca_close(al_ca *ca)
{
	if (ca == NULL)
		return;
	EVP_PKEY_free(ca->key);
	X509_free(ca->cert);
	free(ca);
}

X509 *al_ca_cert(const al_ca *ca)
{
	return ca->cert;
}

char *al_ca_cert_pem(const al_ca *ca, size_t *len, al_err *err)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data = NULL, *out = NULL;
	long n;
	if (b == NULL || PEM_write_bio_X509(b, ca->cert) != 1 ||
	    (n = BIO_get_mem_data(b, &data)) <= 0 ||
	    (out = malloc((size_t)n + 1)) == NULL) {
		al_gw_ossl_err(err, AL_ENOMEM, "CA certificate PEM");
		BIO_free(b);
		return NULL;
	}
	memcpy(out, data, (size_t)n);
	out[n] = '\0';
	*len = (size_t)n;
	BIO_free(b);
	return out;
}

int al_ca_name_check(const char *name, al_err *err)
{
	char canon[256];
	al_err e = {0};
	if (name == NULL ||
	    al_dnsname_canon(name, canon, sizeof canon, &e) < 0 ||
	    strcmp(canon, name) != 0)
		return al_err_set(err, AL_EINVAL, 0,
				  "a leaf name must be a canonical DNS name");
	struct in_addr a;
	const char *last = strrchr(name, '.');
	last = last != NULL ? last + 1 : name;
	size_t digits = strspn(last, "0123456789");
	if (inet_aton(name, &a) != 0 || digits == strlen(last))
		return al_err_set(err, AL_EINVAL, 0,
				  "a leaf name must not be an IP address");
	return 0;
}

/* AKI carrying exactly the CA's stored SKI (not recomputed: a CA whose
 * SKI is not the SHA-1 of its key would otherwise mismatch). */
static int add_aki(X509 *x, const X509 *ca, al_err *err)
{
	const ASN1_OCTET_STRING *ski = X509_get0_subject_key_id((X509 *)ca);
	AUTHORITY_KEYID *akid = AUTHORITY_KEYID_new();
	if (ski == NULL || akid == NULL ||
	    (akid->keyid = ASN1_OCTET_STRING_dup(ski)) == NULL ||
	    X509_add1_ext_i2d(x, NID_authority_key_identifier, akid, 0,
			      X509V3_ADD_DEFAULT) != 1) {
		AUTHORITY_KEYID_free(akid);
		return al_gw_ossl_err(err, AL_EINTERNAL,
				      "authority key identifier");
	}
	AUTHORITY_KEYID_free(akid);
	return 0;
}

int al_ca_key_point(EVP_PKEY *key, unsigned char out[AL_CA_POINT_LEN],
		    al_err *err)
{
	size_t len = 0;
	if (!al_ca_key_is_p256(key) ||
	    EVP_PKEY_get_octet_string_param(key,
					    OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY,
					    out, AL_CA_POINT_LEN, &len) != 1 ||
	    len != AL_CA_POINT_LEN || out[0] != 0x04) {
		ERR_clear_error();
		return al_err_set(err, AL_EINVAL, 0,
				  "a leaf key must be P-256");
	}
	return 0;
}

int al_ca_point_check(const unsigned char *point, size_t len, al_err *err)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, p256_group_init);
	const EC_GROUP *group = p256_group; /* immutable once made */
	EC_POINT *p = group != NULL ? EC_POINT_new(group) : NULL;
	int ok = p != NULL && len == AL_CA_POINT_LEN && point[0] == 0x04 &&
		 EC_POINT_oct2point(group, p, point, len, NULL) == 1 &&
		 EC_POINT_is_on_curve(group, p, NULL) == 1;
	EC_POINT_free(p);
	ERR_clear_error();
	if (!ok)
		return al_err_set(err, AL_EINVAL, 0,
				  "not an uncompressed P-256 point");
	return 0;
}

/* The leaf's SubjectPublicKeyInfo: id-ecPublicKey, prime256v1, point. */
static int set_point(X509 *x, const unsigned char *point, al_err *err)
{
	unsigned char *bits = OPENSSL_memdup(point, AL_CA_POINT_LEN);
	if (bits == NULL ||
	    X509_PUBKEY_set0_param(X509_get_X509_PUBKEY(x),
				   OBJ_nid2obj(NID_X9_62_id_ecPublicKey),
				   V_ASN1_OBJECT,
				   OBJ_nid2obj(NID_X9_62_prime256v1), bits,
				   AL_CA_POINT_LEN) != 1) {
		OPENSSL_free(bits);
		return al_gw_ossl_err(err, AL_ENOMEM, "leaf public key");
	}
	return 0;
}

/* The leaf for name with the key given as an EVP_PKEY (key) or else as
 * its checked point. */
static X509 *mint(al_ca *ca, const char *name, EVP_PKEY *key,
		  const unsigned char *point, al_err *err)
{
	if (al_ca_name_check(name, err) < 0)
		return NULL;
	size_t nlen = strlen(name);
	char san[sizeof "critical,DNS:" + AL_DNSNAME_MAX];
	snprintf(san, sizeof san, "%sDNS:%s", nlen < 64 ? "" : "critical,",
		 name);
	X509 *x = X509_new();
	X509_NAME *subj = X509_NAME_new();
	if (x == NULL || subj == NULL ||
	    (nlen < 64 &&
	     X509_NAME_add_entry_by_txt(subj, "CN", MBSTRING_ASC,
					(const unsigned char *)name, -1, -1,
					0) != 1) ||
	    X509_set_version(x, X509_VERSION_3) != 1 ||
	    X509_set_subject_name(x, subj) != 1 ||
	    X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) != 1) {
		al_gw_ossl_err(err, AL_ENOMEM, "leaf certificate");
		goto fail;
	}
	if (key != NULL ? X509_set_pubkey(x, key) != 1
			: set_point(x, point, err) < 0) {
		if (key != NULL)
			al_gw_ossl_err(err, AL_ENOMEM, "leaf public key");
		goto fail;
	}
	X509V3_CTX ctx;
	X509V3_set_ctx(&ctx, ca->cert, x, NULL, NULL, 0);
	if (set_serial(x, err) < 0 ||
	    set_validity(x, AL_CA_LEAF_BACKDATE_S, AL_CA_LEAF_VALID_S, err) <
		    0 ||
	    add_ext(x, &ctx, NID_basic_constraints, "critical,CA:FALSE", err) <
		    0 ||
	    add_ext(x, &ctx, NID_key_usage, "critical,digitalSignature", err) <
		    0 ||
	    add_ext(x, &ctx, NID_ext_key_usage, "serverAuth", err) < 0 ||
	    add_ext(x, &ctx, NID_subject_alt_name, san, err) < 0 ||
	    add_aki(x, ca->cert, err) < 0)
		goto fail;
	if (X509_sign(x, ca->key, EVP_sha256()) <= 0) {
		al_gw_ossl_err(err, AL_EINTERNAL, "signing a leaf");
		goto fail;
	}
	X509_NAME_free(subj);
	return x;
fail:
	X509_NAME_free(subj);
	X509_free(x);
	return NULL;
}

X509 *al_ca_mint(al_ca *ca, const char *name, EVP_PKEY *leaf_pub, al_err *err)
{
	if (!al_ca_key_is_p256(leaf_pub)) {
		al_err_set(err, AL_EINVAL, 0, "a leaf key must be P-256");
		return NULL;
	}
	return mint(ca, name, leaf_pub, NULL, err);
}

X509 *al_ca_mint_point(al_ca *ca, const char *name,
		       const unsigned char point[AL_CA_POINT_LEN], al_err *err)
{
	if (al_ca_point_check(point, AL_CA_POINT_LEN, err) < 0)
		return NULL;
	return mint(ca, name, NULL, point, err);
}
