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
 * ca-certificates/ too, so the CA survives it. Debian's pip and requests
 * use that bundle (Debian's certifi points there). Node.js, Debian's
 * too (libnode108 carries 147 roots of its own and is built without
 * --openssl-use-def-ca-store), does not: npm is pointed at the bundle by
 * "cafile" in /etc/npmrc (the global config of Debian's npm; one the
 * template wrote itself is left alone), and node programs need
 * NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/airlock-ca.crt
 * (docs/operations.md). */
#include "builder.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ca/ca.h"

#define BUNDLE_MAX (8u << 20)

/* Append text to the file abs of the layer (made when absent, mode 0644)
 * unless it already holds marker. */
static int append_once(const char *root, const char *abs, const char *text,
		       size_t len, const char *marker, al_err *err)
{
	size_t blen = 0;
	al_err tmp_err = {0};
	char *old = bld_fsroot_read_file(root, abs, BUNDLE_MAX, &blen,
					 &tmp_err);
	if (old == NULL && tmp_err.code != AL_ENOENT) {
		*err = tmp_err;
		return -1;
	}
	if (old != NULL && memmem(old, blen, marker, strlen(marker)) != NULL) {
		free(old);
		return 0;
	}
	int nl = blen > 0 && old[blen - 1] != '\n';
	char *joined = malloc(blen + (size_t)nl + len);
	if (joined == NULL) {
		free(old);
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	}
	if (blen > 0)
		memcpy(joined, old, blen);
	if (nl)
		joined[blen] = '\n';
	memcpy(joined + blen + (size_t)nl, text, len);
	int rc = bld_fsroot_write_file(root, abs, joined,
				       blen + (size_t)nl + len, 0644, err);
	free(joined);
	free(old);
	return rc;
}

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
	static const char npm[] = "cafile=" BLD_CA_BUNDLE "\n";
	int rc = -1;
	if (bld_fsroot_write_file(root, BLD_CA_FILE, pem, len, 0644, err) ==
		    0 &&
	    append_once(root, BLD_CA_BUNDLE, pem, len, pem, err) == 0 &&
	    append_once(root, "/etc/npmrc", npm, sizeof npm - 1, "cafile",
			err) == 0)
		rc = 0;
	if (rc < 0)
		al_err_wrap(err, "installing the host CA");
	free(pem);
	return rc;
}
