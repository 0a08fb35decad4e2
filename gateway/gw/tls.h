/* gw/tls: the gateway's two TLS contexts.
 *
 * Server side (towards the guest): TLS 1.2 and 1.3, ALPN "http/1.1" only
 * (a client offering only h2 is refused: no coalescing), ECDSA P-256
 * leaves. The gateway generates ONE P-256 key at start (al_gw_tls_new);
 * leaves for it are minted by the controller (gw/mint.h) and kept in an
 * LRU of cache_max names (>= 1000).
 *
 * Which leaf: before the handshake the caller, who knows the name behind
 * the synthetic destination address, calls al_gw_tls_server_expect(). It
 * puts that name's leaf on the connection (so a ClientHello without SNI
 * is served), and the servername callback then fails the handshake with
 * unrecognized_name if the SNI, canonicalised, is not that name. Without
 * expect() the callback takes the leaf for the SNI's canonical name.
 * On a cache miss the leaf is fetched synchronously from the mint socket
 * (bounded by mint_timeout_ms; the loop blocks meanwhile: misses are one
 * per name per cache life, and a mint costs ~100 us when the controller
 * is up).
 *
 * Client side (towards upstream): verifies the server against the PEM
 * bundle at upstream_ca (AIRLOCK_UPSTREAM_CA) or else the system's hashed
 * CA directory (SSL_CERT_DIR, else OpenSSL's default; a CA is read when a
 * chain needs it), TLS 1.2+, ALPN http/1.1; al_gw_tls_upstream_prepare()
 * sets SNI and the hostname check (SSL_set1_host) for the name the
 * gateway dials.
 *
 * Both sides prefer AES-128-GCM and X25519 and read ahead (several TLS
 * records per read()): a bufferevent over such an SSL must be read on
 * while SSL_has_pending() (gateway/relay.c). */
#ifndef AL_GW_TLS_H
#define AL_GW_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

#include "base/err.h"

typedef struct al_gw_tls al_gw_tls;

#define AL_GW_TLS_CACHE_DEFAULT 1024

/* Where leaves come from: the mint socket, or (tests, tools) a callback.
 * mint returns a new X509 for (name, pub) or NULL with err filled. */
typedef X509 *(*al_gw_tls_mint_fn)(void *arg, const char *name, EVP_PKEY *pub,
				   al_err *err);

typedef struct al_gw_tls_config {
	const char *mint_sock;	/* <state>/run/mint.sock (if mint is NULL) */
	al_gw_tls_mint_fn mint; /* else this */
	void *mint_arg;
	int mint_timeout_ms;	 /* 0: AL_MINT_TIMEOUT_MS_DEFAULT */
	size_t cache_max;	 /* 0: AL_GW_TLS_CACHE_DEFAULT */
	const char *upstream_ca; /* PEM bundle; NULL/"": system default */
} al_gw_tls_config;

al_gw_tls *al_gw_tls_new(const al_gw_tls_config *cfg, al_err *err);
void al_gw_tls_free(al_gw_tls *t);

/* The contexts (owned by t); SSL objects made from them may outlive
 * nothing: free them before al_gw_tls_free. */
SSL_CTX *al_gw_tls_server_ctx(al_gw_tls *t);
SSL_CTX *al_gw_tls_upstream_ctx(al_gw_tls *t);

/* Server connection: the name it must serve (canonical). Fetches the
 * leaf (cache, else mint) and puts it on ssl. */
int al_gw_tls_server_expect(al_gw_tls *t, SSL *ssl, const char *name,
			    al_err *err);
/* After (or during a failed) handshake: the canonical SNI the client sent,
 * or NULL when it sent none or an invalid one. */
const char *al_gw_tls_server_sni(SSL *ssl);
/* Why the servername callback refused the handshake ("" if it did not). */
const char *al_gw_tls_server_refusal(SSL *ssl);

/* Upstream connection to name (canonical): SNI + hostname verification. */
int al_gw_tls_upstream_prepare(SSL *ssl, const char *name, al_err *err);

/* The leaf for name (cache, else mint), up-referenced; for warming and
 * tests. */
X509 *al_gw_tls_leaf(al_gw_tls *t, const char *name, al_err *err);
EVP_PKEY *al_gw_tls_key(al_gw_tls *t); /* the gateway's key (owned) */

#endif
