/* gw/mint: the mint service's wire messages and its client.
 *
 * The controller serves <state>/run/mint.sock (controller/mint.c); a
 * gateway asks it for a leaf for (canonical name, the gateway's public
 * key) and gets a DER certificate signed by the host CA (gw/ca.h), or an
 * error. One request per connection:
 *
 *   request:  "ALM1" u8 name_len, name[name_len], u16be spki_len,
 *             spki[spki_len]            (DER SubjectPublicKeyInfo)
 *   response: "ALM1" u8 status, u16be len, data[len]
 *             status 0: data is the DER certificate;
 *             else an al_code, data a printable message.
 *
 * Sizes are bounded and the parse is strict: the name must be canonical
 * and not an IP; the key must be the one DER form of a P-256 key (the
 * fixed 26-byte id-ecPublicKey/prime256v1 header, then an uncompressed
 * point on the curve: 91 bytes); nothing may follow. The key is never
 * run through OpenSSL's decoders (see al_ca_mint_point). */
#ifndef AL_GW_MINT_H
#define AL_GW_MINT_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "base/err.h"
#include "ca/ca.h"

#define AL_MINT_SOCK "run/mint.sock" /* under the state dir */
#define AL_MINT_MAGIC "ALM1"
#define AL_MINT_NAME_MAX 253
/* The DER SubjectPublicKeyInfo of a P-256 key. */
#define AL_MINT_SPKI_LEN (26 + AL_CA_POINT_LEN)
#define AL_MINT_REQ_MAX (4 + 1 + AL_MINT_NAME_MAX + 2 + AL_MINT_SPKI_LEN)
#define AL_MINT_DATA_MAX 4096
#define AL_MINT_RESP_MAX (4 + 1 + 2 + AL_MINT_DATA_MAX)
/* How long a gateway waits for a leaf (it blocks its loop meanwhile). */
#define AL_MINT_TIMEOUT_MS_DEFAULT 2000

typedef struct al_mint_req {
	char name[AL_MINT_NAME_MAX + 1];
	unsigned char point[AL_CA_POINT_LEN]; /* checked on the curve */
} al_mint_req;

/* Pack a request into out (AL_MINT_REQ_MAX bytes); returns its length,
 * or -1 when name or key are out of bounds. */
int al_mint_req_pack(const char *name, EVP_PKEY *pub, unsigned char *out,
		     size_t out_len, al_err *err);
/* Parse buf[0..len) strictly into req. -1: malformed (AL_EINVAL) or too
 * big (AL_ETOOBIG). */
int al_mint_req_unpack(const unsigned char *buf, size_t len, al_mint_req *req,
		       al_err *err);
/* The number of request bytes still needed before buf[0..len) can be
 * parsed (0: complete or already malformed; call unpack). */
size_t al_mint_req_need(const unsigned char *buf, size_t len);

/* Pack a response: status 0 with data = DER, or an error code and a
 * message. Returns its length or -1. */
int al_mint_resp_pack(al_code status, const void *data, size_t data_len,
		      unsigned char *out, size_t out_len, al_err *err);
/* Parse a response: on status 0 *cert gets the certificate; an error
 * response fills err with its code and message and returns -1. */
int al_mint_resp_unpack(const unsigned char *buf, size_t len, X509 **cert,
			al_err *err);

/* Ask the mint service at sock_path for a leaf for name and pub; waits at
 * most timeout_ms overall. Caller frees *cert. */
int al_mint_fetch(const char *sock_path, const char *name, EVP_PKEY *pub,
		  int timeout_ms, X509 **cert, al_err *err);

#endif
