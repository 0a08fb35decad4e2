/* Master keys and AES-256-GCM sealing (see credcrypt.h). */
#include "cred/credcrypt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "base/cleanup.h"

/* "master-<n>.key" with n a positive decimal without leading zeros:
 * n, or 0 for any other name. */
static int key_file_id(const char *name)
{
	if (strncmp(name, "master-", 7) != 0 || name[7] < '1' || name[7] > '9')
		return 0;
	char *end = NULL;
	long n = strtol(name + 7, &end, 10);
	if (end == NULL || strcmp(end, ".key") != 0 || n <= 0 || n > INT_MAX)
		return 0;
	return (int)n;
}

/* Read keys/<name>: ours, 0600, a regular file of exactly the key. */
static int read_key(int dirfd, const char *name, unsigned char *key,
		    al_err *err)
{
	al_autofd int fd = openat(dirfd, name,
				  O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, AL_ESYS, errno, "open keys/%s", name);
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 077) != 0 ||
	    st.st_size != AL_MASTER_KEY_LEN)
		return al_err_set(err, AL_EPERM, 0,
				  "keys/%s must be a regular file of %d bytes"
				  " owned by this user, mode 0600",
				  name, AL_MASTER_KEY_LEN);
	size_t got = 0;
	while (got < AL_MASTER_KEY_LEN) {
		ssize_t n = read(fd, key + got, AL_MASTER_KEY_LEN - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return al_err_sys(err, AL_ESYS, n < 0 ? errno : EIO,
					  "read keys/%s", name);
		got += (size_t)n;
	}
	return 0;
}

/* Make keys/master-<id>.key unless it exists: a temporary file linked
 * into place, so a reader never sees a partial key and of two racing
 * creators one wins (the other gets 1 and loads the winner's). */
static int make_key(int dirfd, int id, al_err *err)
{
	char name[32], tmp[64];
	snprintf(name, sizeof name, "master-%d.key", id);
	snprintf(tmp, sizeof tmp, ".master-%d.%ld.tmp", id, (long)getpid());
	unsigned char key[AL_MASTER_KEY_LEN];
	if (RAND_bytes(key, sizeof key) != 1)
		return al_err_set(err, AL_EINTERNAL, 0,
				  "no randomness for a master key");
	unlinkat(dirfd, tmp, 0);
	int fd = openat(dirfd, tmp,
			O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			0600);
	if (fd < 0) {
		OPENSSL_cleanse(key, sizeof key);
		return al_err_sys(err, AL_ESYS, errno, "create keys/%s", tmp);
	}
	int ok = fchmod(fd, 0600) == 0 &&
		 write(fd, key, sizeof key) == (ssize_t)sizeof key &&
		 fsync(fd) == 0;
	int e = errno;
	OPENSSL_cleanse(key, sizeof key);
	close(fd);
	int rc = 0;
	if (!ok)
		rc = al_err_sys(err, AL_ESYS, e, "write keys/%s", tmp);
	else if (linkat(dirfd, tmp, dirfd, name, 0) < 0)
		rc = errno == EEXIST ? 1
				     : al_err_sys(err, AL_ESYS, errno,
						  "link keys/%s", name);
	unlinkat(dirfd, tmp, 0);
	if (rc == 0 && fsync(dirfd) < 0)
		return al_err_sys(err, AL_ESYS, errno, "fsync keys");
	return rc;
}

static int cmp_key(const void *a, const void *b)
{
	const al_master_key *x = a, *y = b;
	return (x->id > y->id) - (x->id < y->id);
}

/* Every master key file of the open dir into kr. */
static int load_all(int dirfd, al_keyring *kr, al_err *err)
{
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		return al_err_sys(err, AL_ESYS, errno, "read %s", kr->dir);
	}
	rewinddir(d); /* the dup shares the offset of an earlier pass */
	al_keyring_wipe(kr);
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		int id = key_file_id(de->d_name);
		if (id == 0)
			continue;
		if (kr->n == AL_KEYRING_MAX) {
			rc = al_err_set(err, AL_ESTATE, 0,
					"more than %d master keys in %s",
					AL_KEYRING_MAX, kr->dir);
			break;
		}
		al_master_key *k = &kr->keys[kr->n];
		k->id = id;
		rc = read_key(dirfd, de->d_name, k->key, err);
		if (rc == 0)
			kr->n++;
	}
	closedir(d);
	if (rc < 0) {
		al_keyring_wipe(kr);
		return -1;
	}
	qsort(kr->keys, (size_t)kr->n, sizeof kr->keys[0], cmp_key);
	struct stat st;
	if (fstat(dirfd, &st) == 0)
		kr->seen_ns = (long long)st.st_mtim.tv_sec * 1000000000LL +
			      st.st_mtim.tv_nsec;
	kr->current = kr->n > 0 ? kr->keys[kr->n - 1].id : 0;
	return 0;
}

static int open_dir(al_keyring *kr, int create, al_err *err)
{
	if (create && mkdir(kr->dir, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", kr->dir);
	int fd = open(kr->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return al_err_sys(err, errno == ENOENT ? AL_ENOENT : AL_ESYS,
				  errno, "open %s", kr->dir);
	return fd;
}

int al_keyring_load(al_keyring *kr, const char *state_dir, int create,
		    al_err *err)
{
	memset(kr, 0, sizeof *kr);
	if ((size_t)snprintf(kr->dir, sizeof kr->dir, "%s/keys", state_dir) >=
	    sizeof kr->dir)
		return al_err_set(err, AL_EINVAL, 0, "state dir too long");
	al_autofd int dirfd = open_dir(kr, create, err);
	if (dirfd < 0)
		return -1;
	if (load_all(dirfd, kr, err) < 0)
		return -1;
	if (kr->n > 0)
		return 0;
	if (!create)
		return al_err_set(err, AL_ENOENT, 0, "no master key in %s",
				  kr->dir);
	if (make_key(dirfd, 1, err) < 0 || load_all(dirfd, kr, err) < 0)
		return -1;
	return 0;
}

int al_keyring_refresh(al_keyring *kr, al_err *err)
{
	struct stat st;
	if (stat(kr->dir, &st) < 0)
		return al_err_sys(err, AL_ESYS, errno, "stat %s", kr->dir);
	long long ns = (long long)st.st_mtim.tv_sec * 1000000000LL +
		       st.st_mtim.tv_nsec;
	if (ns == kr->seen_ns)
		return 0;
	al_autofd int dirfd = open_dir(kr, 0, err);
	if (dirfd < 0)
		return -1;
	return load_all(dirfd, kr, err);
}

int al_keyring_add(al_keyring *kr, al_err *err)
{
	al_autofd int dirfd = open_dir(kr, 0, err);
	if (dirfd < 0)
		return -1;
	int rc = make_key(dirfd, kr->current + 1, err);
	if (rc < 0)
		return -1;
	if (rc == 1)
		return al_err_set(err, AL_EEXIST, 0,
				  "master-%d.key appeared meanwhile (another"
				  " rotation?)",
				  kr->current + 1);
	return load_all(dirfd, kr, err);
}

int al_keyring_drop(al_keyring *kr, int id, al_err *err)
{
	if (id == kr->current)
		return al_err_set(err, AL_ESTATE, 0,
				  "master key %d is the current one", id);
	al_autofd int dirfd = open_dir(kr, 0, err);
	if (dirfd < 0)
		return -1;
	char name[32];
	snprintf(name, sizeof name, "master-%d.key", id);
	if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
		return al_err_sys(err, AL_ESYS, errno, "remove keys/%s", name);
	if (fsync(dirfd) < 0)
		return al_err_sys(err, AL_ESYS, errno, "fsync keys");
	return load_all(dirfd, kr, err);
}

void al_keyring_wipe(al_keyring *kr)
{
	OPENSSL_cleanse(kr->keys, sizeof kr->keys);
	kr->n = 0;
	kr->current = 0;
}

static const al_master_key *find_key(const al_keyring *kr, int id)
{
	for (int i = 0; i < kr->n; i++)
		if (kr->keys[i].id == id)
			return &kr->keys[i];
	return NULL;
}

/* One GCM pass: enc 1 seals in -> out + tag, enc 0 opens, checking tag. */
static int gcm(int enc, const unsigned char *key, const unsigned char *nonce,
	       const char *aad, const unsigned char *in, size_t len,
	       unsigned char *out, unsigned char *tag)
{
	if (len > INT_MAX)
		return -1;
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	int n = 0,
	    ok = ctx != NULL &&
		 EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL,
				   enc) == 1 &&
		 EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN,
				     AL_SEAL_NONCE_LEN, NULL) == 1 &&
		 EVP_CipherInit_ex(ctx, NULL, NULL, key, nonce, enc) == 1 &&
		 EVP_CipherUpdate(ctx, NULL, &n, (const unsigned char *)aad,
				  (int)strlen(aad)) == 1 &&
		 EVP_CipherUpdate(ctx, out, &n, in, (int)len) == 1;
	if (ok && !enc)
		ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG,
					 AL_SEAL_TAG_LEN, tag) == 1;
	if (ok)
		ok = EVP_CipherFinal_ex(ctx, out + n, &n) == 1;
	if (ok && enc)
		ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG,
					 AL_SEAL_TAG_LEN, tag) == 1;
	EVP_CIPHER_CTX_free(ctx);
	return ok ? 0 : -1;
}

int al_cred_seal(const al_keyring *kr, const char *aad, const void *pt,
		 size_t len, unsigned char **out, size_t *out_len, int *key_id,
		 al_err *err)
{
	const al_master_key *k = find_key(kr, kr->current);
	if (k == NULL)
		return al_err_set(err, AL_ENOENT, 0, "no master key loaded");
	unsigned char *buf = malloc(len + AL_SEAL_OVERHEAD);
	if (buf == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	if (RAND_bytes(buf, AL_SEAL_NONCE_LEN) != 1 ||
	    gcm(1, k->key, buf, aad, pt, len, buf + AL_SEAL_NONCE_LEN,
		buf + AL_SEAL_NONCE_LEN + len) < 0) {
		free(buf);
		return al_err_set(err, AL_EINTERNAL, 0, "sealing failed");
	}
	*out = buf;
	*out_len = len + AL_SEAL_OVERHEAD;
	*key_id = k->id;
	return 0;
}

int al_cred_open(const al_keyring *kr, int key_id, const char *aad,
		 const unsigned char *ct, size_t len, char **out,
		 size_t *out_len, al_err *err)
{
	const al_master_key *k = find_key(kr, key_id);
	if (k == NULL)
		return al_err_set(err, AL_ENOENT, 0,
				  "master key %d is not in the keyring",
				  key_id);
	if (len < AL_SEAL_OVERHEAD)
		return al_err_set(err, AL_EPERM, 0,
				  "sealed value fails authentication");
	size_t n = len - AL_SEAL_OVERHEAD;
	char *pt = malloc(n + 1);
	if (pt == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	unsigned char tag[AL_SEAL_TAG_LEN];
	memcpy(tag, ct + AL_SEAL_NONCE_LEN + n, sizeof tag);
	if (gcm(0, k->key, ct, aad, ct + AL_SEAL_NONCE_LEN, n,
		(unsigned char *)pt, tag) < 0) {
		al_secret_free(pt, n + 1);
		return al_err_set(err, AL_EPERM, 0,
				  "sealed value fails authentication");
	}
	pt[n] = '\0';
	*out = pt;
	*out_len = n;
	return 0;
}

void al_secret_free(void *p, size_t len)
{
	if (p == NULL)
		return;
	OPENSSL_cleanse(p, len);
	free(p);
}
