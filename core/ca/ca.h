/* gw/ca: the host CA that signs the gateways' TLS leaves.
 *
 * On first start the controller (or whoever builds the first template)
 * creates in <state>/keys/ an ECDSA P-256 key, ca.key (0600, owned by
 * root) and a self-signed certificate, ca.crt (0644): CN "Airlock sandbox
 * CA <short host id>", basicConstraints critical CA:TRUE pathlen:0,
 * keyUsage critical keyCertSign+cRLSign, a subject key identifier, valid
 * 10 years. The pair is written to temporary files and renamed into
 * place (key first, certificate last: ca.crt present means the pair is
 * whole) under an flock on keys/ca.lock, so concurrent starters agree on
 * one CA and a crash never leaves half a pair in use.
 *
 * The key never leaves the controller: gateways get leaves through the
 * mint service (controller/mint.c, gw/mint.h). A key file that is not a
 * regular file owned by the caller's euid with mode 0600 is refused. */
#ifndef AL_GW_CA_H
#define AL_GW_CA_H

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "base/err.h"

typedef struct al_ca al_ca;

#define AL_CA_KEY_FILE "ca.key"
#define AL_CA_CERT_FILE "ca.crt"
/* Leaves are valid from 2 days before they are minted (clocks of guests
 * restored from snapshots lag) for 30 days. */
#define AL_CA_LEAF_BACKDATE_S (2 * 86400L)
#define AL_CA_LEAF_VALID_S (30 * 86400L)

/* Load the CA of keys_dir, creating it first if there is none. keys_dir
 * must exist (the controller's --init makes it). */
al_ca *al_ca_open(const char *keys_dir, al_err *err);
void al_ca_close(al_ca *ca);

/* The CA certificate (owned by ca). */
X509 *al_ca_cert(const al_ca *ca);

/* 0 when name is what leaves are minted for: canonical
 * (al_dnsname_canon returns it unchanged) and not an IPv4 address in
 * any inet_aton form (nor a name whose last label is all digits). */
int al_ca_name_check(const char *name, al_err *err);

/* True for an EC key on P-256 (the only leaf key the CA signs). */
int al_ca_key_is_p256(EVP_PKEY *key);

/* A P-256 public key as its uncompressed point (0x04 || X || Y). */
#define AL_CA_POINT_LEN 65
/* The point of a P-256 key into out. */
int al_ca_key_point(EVP_PKEY *key, unsigned char out[AL_CA_POINT_LEN],
		    al_err *err);
/* 0 when point is an uncompressed P-256 point on the curve. */
int al_ca_point_check(const unsigned char *point, size_t len, al_err *err);

/* Mint a leaf for one canonical DNS name (al_dnsname_canon's output,
 * not an IP address) and the leaf's public key (a P-256 EC key): random
 * 128-bit serial, SAN DNS:name (critical when the CN is left out, which
 * it is when name is 64 bytes or longer), EKU serverAuth, keyUsage
 * digitalSignature, AKI = the CA's SKI, no SKI, validity as above.
 * Caller frees the X509. */
X509 *al_ca_mint(al_ca *ca, const char *name, EVP_PKEY *leaf_pub, al_err *err);
/* The same for a key given as its point (checked), for the mint service:
 * OpenSSL 3.0 spends ~250 us in X509_set_pubkey() and as much in
 * d2i_PUBKEY() (its decoder framework), 8x the ~30 us signature; the
 * point goes into the certificate's SubjectPublicKeyInfo as it is. The
 * X509 returned holds no decoded key: it is for encoding (i2d_X509);
 * whoever decodes the DER gets a whole certificate. */
X509 *al_ca_mint_point(al_ca *ca, const char *name,
		       const unsigned char point[AL_CA_POINT_LEN], al_err *err);

/* The CA certificate as PEM, NUL-terminated (caller frees); *len
 * without the NUL. What templates' trust stores get (builder/trust.c). */
char *al_ca_cert_pem(const al_ca *ca, size_t *len, al_err *err);

#endif
