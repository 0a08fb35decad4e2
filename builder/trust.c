/* The host CA in a template's trust store: the one place that puts it
 * there, for both drivers (the vm driver's disk image is made from the
 * same published rootfs). RUN steps get it before they run, so that a
 * RUN step's HTTPS through the gateway verifies; the published version
 * gets it again at the end, in case a RUN step rebuilt the bundle.
 *
 * Who reads what: curl, apt (via libcurl/gnutls), git and Python's ssl
 * read /etc/ssl/certs/ca-certificates.crt (OpenSSL's default file);
 * update-ca-certificates, run by a later `apt-get install
 * ca-certificates`, rebuilds that file from /usr/local/share/
 * ca-certificates/ too, so the CA survives it. Node.js as shipped by
 * Debian uses the system store; a node built with its own bundle needs
 * NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/airlock-ca.crt
 * (docs/operations.md). Python's certifi/requests carries its own bundle:
 * REQUESTS_CA_BUNDLE / SSL_CERT_FILE point it at the system one. */
#include "builder.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gw/ca.h"

#define BUNDLE_MAX (8u << 20)

int bld_trust_ca(const bld *b, const char *root, al_err *err)
{
	char keys[AL_PATH_MAX + 8];
	snprintf(keys, sizeof keys, "%s/keys", b->cfg.state_dir);
	if (mkdir(keys, 0700) < 0 && errno != EEXIST)
		return al_err_sys(err, AL_ESYS, errno, "mkdir %s", keys);
	al_ca *ca = al_ca_open(keys, err);
	if (ca == NULL)
		return -1;
	size_t len;
	char *pem = al_ca_cert_pem(ca, &len, err);
	al_ca_close(ca);
	if (pem == NULL)
		return -1;
	int rc = -1;
	char *bundle = NULL, *joined = NULL;
	if (fsroot_write_file(root, BLD_CA_FILE, pem, len, 0644, err) < 0)
		goto out;
	size_t blen = 0;
	al_err tmp_err = {0};
	bundle = fsroot_read_file(root, BLD_CA_BUNDLE, BUNDLE_MAX, &blen,
				  &tmp_err);
	if (bundle == NULL && tmp_err.code != AL_ENOENT) {
		*err = tmp_err;
		goto out;
	}
	if (bundle != NULL && memmem(bundle, blen, pem, len) != NULL) {
		rc = 0; /* already trusted (a FROM template had it) */
		goto out;
	}
	int nl = blen > 0 && bundle[blen - 1] != '\n';
	joined = malloc(blen + (size_t)nl + len);
	if (joined == NULL) {
		al_err_set(err, AL_ENOMEM, 0, "out of memory");
		goto out;
	}
	if (blen > 0)
		memcpy(joined, bundle, blen);
	if (nl)
		joined[blen] = '\n';
	memcpy(joined + blen + (size_t)nl, pem, len);
	rc = fsroot_write_file(root, BLD_CA_BUNDLE, joined,
			       blen + (size_t)nl + len, 0644, err);
out:
	if (rc < 0)
		al_err_wrap(err, "installing the host CA");
	free(joined);
	free(bundle);
	free(pem);
	return rc;
}
