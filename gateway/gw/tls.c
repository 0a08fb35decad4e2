/* The gateway's TLS contexts: leaf selection by name (cache, else mint)
 * and the upstream verifier. See tls.h. */
#include "gw/tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "base/dnsname.h"
#include "ca/leafcache.h"
#include "ca/mint.h"
#include "ca/ossl.h"

#define NAME_BUF 256

struct al_gw_tls {
	EVP_PKEY *key;
	SSL_CTX *server, *upstream;
	al_leafcache *cache;
	char mint_sock[256];
	al_gw_tls_mint_fn mint;
	void *mint_arg;
	int mint_timeout_ms;
};

/* Per server connection, in the SSL's ex_data. */
typedef struct conn_state {
	al_gw_tls *t;
	char expect[NAME_BUF]; /* "" when the caller named nothing */
	char sni[NAME_BUF];    /* canonical SNI, "" when none/invalid */
	int sni_seen;
	char refusal[160];
} conn_state;

static int conn_idx = -1;
static pthread_once_t conn_once = PTHREAD_ONCE_INIT;

static void conn_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
		      long argl, void *argp)
{
	(void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
	free(ptr);
}

static void conn_index_init(void)
{
	conn_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, conn_free);
}

static conn_state *conn_get(SSL *ssl, al_gw_tls *t)
{
	conn_state *c = SSL_get_ex_data(ssl, conn_idx);
	if (c == NULL && t != NULL) {
		c = calloc(1, sizeof *c);
		if (c == NULL)
			return NULL;
		if (SSL_set_ex_data(ssl, conn_idx, c) != 1) {
			free(c);
			return NULL;
		}
		c->t = t;
	}
	return c;
}

X509 *al_gw_tls_leaf(al_gw_tls *t, const char *name, al_err *err)
{
	X509 *x = al_leafcache_get(t->cache, name);
	if (x != NULL)
		return x;
	if (t->mint != NULL)
		x = t->mint(t->mint_arg, name, t->key, err);
	else if (al_mint_fetch(t->mint_sock, name, t->key, t->mint_timeout_ms,
			       &x, err) < 0)
		x = NULL;
	if (x == NULL) {
		al_err_wrap(err, "leaf for %s", name);
		return NULL;
	}
	/* What came back must be for our key and this name. */
	if (X509_check_private_key(x, t->key) != 1 ||
	    X509_check_host(x, name, 0, X509_CHECK_FLAG_NO_WILDCARDS, NULL) !=
		    1) {
		X509_free(x);
		ERR_clear_error();
		al_err_set(
			err, AL_EPROTO, 0,
			"the minted leaf for %s is not for this name and key",
			name);
		return NULL;
	}
	if (al_leafcache_put(t->cache, name, x, err) < 0) {
		X509_free(x);
		return NULL;
	}
	return x;
}

static int use_leaf(al_gw_tls *t, SSL *ssl, const char *name, al_err *err)
{
	X509 *x = al_gw_tls_leaf(t, name, err);
	if (x == NULL)
		return -1;
	int ok = SSL_use_certificate(ssl, x) == 1 &&
		 SSL_use_PrivateKey(ssl, t->key) == 1;
	X509_free(x);
	return ok ? 0 : al_gw_ossl_err(err, AL_EINTERNAL, "installing a leaf");
}

static int on_servername(SSL *ssl, int *alert, void *arg)
{
	al_gw_tls *t = arg;
	conn_state *c = conn_get(ssl, t);
	if (c == NULL) {
		*alert = SSL_AD_INTERNAL_ERROR;
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	}
	const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	al_err err = {0};
	if (sni == NULL) {
		if (c->expect[0] != '\0')
			return SSL_TLSEXT_ERR_OK; /* expect() set its leaf */
		snprintf(c->refusal, sizeof c->refusal,
			 "no SNI and no expected name");
		*alert = SSL_AD_UNRECOGNIZED_NAME;
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	}
	c->sni_seen = 1;
	if (al_dnsname_canon(sni, c->sni, sizeof c->sni, &err) < 0) {
		c->sni[0] = '\0';
		snprintf(c->refusal, sizeof c->refusal, "invalid SNI");
		*alert = SSL_AD_UNRECOGNIZED_NAME;
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	}
	if (c->expect[0] != '\0') {
		if (strcmp(c->sni, c->expect) == 0)
			return SSL_TLSEXT_ERR_OK;
		snprintf(c->refusal, sizeof c->refusal,
			 "SNI is not the destination's name");
		*alert = SSL_AD_UNRECOGNIZED_NAME;
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	}
	if (use_leaf(t, ssl, c->sni, &err) < 0) {
		snprintf(c->refusal, sizeof c->refusal, "no leaf: %.120s",
			 err.msg);
		*alert = SSL_AD_INTERNAL_ERROR;
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	}
	return SSL_TLSEXT_ERR_OK;
}

/* http/1.1 or nothing: a client that offers ALPN without it (h2 only)
 * is refused; one that offers no ALPN speaks HTTP/1.1 anyway. */
static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		   const unsigned char *in, unsigned int inlen, void *arg)
{
	(void)ssl, (void)arg;
	static const unsigned char h1[] = "http/1.1";
	for (unsigned i = 0; i < inlen;) {
		unsigned n = in[i++];
		if (n > inlen - i)
			break;
		if (n == sizeof h1 - 1 && memcmp(in + i, h1, n) == 0) {
			*out = in + i;
			*outlen = (unsigned char)n;
			return SSL_TLSEXT_ERR_OK;
		}
		i += n;
	}
	return SSL_TLSEXT_ERR_ALERT_FATAL;
}

static const unsigned char alpn_h1[] = "\x08http/1.1";

/* What both contexts share, for CPU per connection and per byte:
 * AES-128-GCM first (SHA-256 for the handshake's hashes, which the CPU
 * does in hardware; a third less AES work per byte than AES-256), then
 * ChaCha20 for CPUs without AES instructions; X25519 before P-256 (the
 * cheaper key exchange here). Read-ahead with a buffer of several
 * records, so that one read() takes what the socket has instead of two
 * per record (header, then body); relay.c reads on while OpenSSL holds
 * bytes the socket no longer shows. Buffers are released while a
 * connection is idle, so that kept-alive connections cost little. */
#define GW_TLS_READ_BUF (64u << 10)
static int tune(SSL_CTX *c)
{
	if (SSL_CTX_set_ciphersuites(c, "TLS_AES_128_GCM_SHA256:"
					"TLS_CHACHA20_POLY1305_SHA256:"
					"TLS_AES_256_GCM_SHA384") != 1 ||
	    SSL_CTX_set1_groups_list(c, "X25519:P-256:P-384") != 1)
		return -1;
	SSL_CTX_set_read_ahead(c, 1);
	SSL_CTX_set_default_read_buffer_len(c, GW_TLS_READ_BUF);
	SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS);
	return 0;
}

/* The system's CAs as a hashed directory (SSL_CERT_DIR, else
 * OpenSSL's default, /etc/ssl/certs on Debian): a certificate is read
 * when a chain needs its subject, instead of the whole bundle parsed at
 * every gateway's start (~50 ms of CPU, for sessions that mostly
 * resume). */
static const char *system_ca_dir(void)
{
	const char *d = getenv(X509_get_default_cert_dir_env());
	return d != NULL && d[0] != '\0' ? d : X509_get_default_cert_dir();
}

static SSL_CTX *server_ctx(al_gw_tls *t, al_err *err)
{
	SSL_CTX *s = SSL_CTX_new(TLS_server_method());
	if (s == NULL) {
		al_gw_ossl_err(err, AL_ENOMEM, "server SSL_CTX");
		return NULL;
	}
	/* Every handshake is a full one, so every one passes the SNI check
	 * of on_servername (no tickets, no session cache). */
	SSL_CTX_set_options(s, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION |
				       SSL_OP_NO_COMPRESSION |
				       SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_session_cache_mode(s, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_num_tickets(s, 0);
	if (SSL_CTX_set_min_proto_version(s, TLS1_2_VERSION) != 1 ||
	    tune(s) < 0) {
		SSL_CTX_free(s);
		al_gw_ossl_err(err, AL_EINTERNAL, "server TLS versions");
		return NULL;
	}
	SSL_CTX_set_tlsext_servername_callback(s, on_servername);
	SSL_CTX_set_tlsext_servername_arg(s, t);
	SSL_CTX_set_alpn_select_cb(s, on_alpn, NULL);
	return s;
}

static SSL_CTX *upstream_ctx(const char *ca, al_err *err)
{
	SSL_CTX *u = SSL_CTX_new(TLS_client_method());
	if (u == NULL) {
		al_gw_ossl_err(err, AL_ENOMEM, "upstream SSL_CTX");
		return NULL;
	}
	SSL_CTX_set_options(u, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_verify(u, SSL_VERIFY_PEER, NULL);
	int ok = SSL_CTX_set_min_proto_version(u, TLS1_2_VERSION) == 1 &&
		 SSL_CTX_set_alpn_protos(u, alpn_h1, sizeof alpn_h1 - 1) == 0 &&
		 tune(u) == 0;
	if (ok && ca != NULL && ca[0] != '\0')
		ok = SSL_CTX_load_verify_locations(u, ca, NULL) == 1;
	else if (ok)
		ok = SSL_CTX_load_verify_dir(u, system_ca_dir()) == 1;
	if (!ok) {
		SSL_CTX_free(u);
		al_gw_ossl_err(err, AL_EINVAL, "upstream CA bundle");
		al_err_wrap(err, "%s", ca != NULL && ca[0] ? ca : "system");
		return NULL;
	}
	return u;
}

al_gw_tls *al_gw_tls_new(const al_gw_tls_config *cfg, al_err *err)
{
	pthread_once(&conn_once, conn_index_init);
	if (conn_idx < 0) {
		al_gw_ossl_err(err, AL_ENOMEM, "SSL ex_data index");
		return NULL;
	}
	if (cfg->mint == NULL &&
	    (cfg->mint_sock == NULL ||
	     strlen(cfg->mint_sock) >= sizeof((al_gw_tls *)0)->mint_sock)) {
		al_err_set(err, AL_EINVAL, 0, "gateway TLS: no mint socket");
		return NULL;
	}
	al_gw_tls *t = calloc(1, sizeof *t);
	if (t == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		return NULL;
	}
	t->mint = cfg->mint;
	t->mint_arg = cfg->mint_arg;
	t->mint_timeout_ms = cfg->mint_timeout_ms > 0
				     ? cfg->mint_timeout_ms
				     : AL_MINT_TIMEOUT_MS_DEFAULT;
	if (cfg->mint_sock != NULL)
		snprintf(t->mint_sock, sizeof t->mint_sock, "%s",
			 cfg->mint_sock);
	size_t cap = cfg->cache_max > 0 ? cfg->cache_max
					: AL_GW_TLS_CACHE_DEFAULT;
	t->key = EVP_EC_gen("P-256");
	if (t->key == NULL) {
		al_gw_ossl_err(err, AL_EINTERNAL, "gateway key");
		goto fail;
	}
	if ((t->cache = al_leafcache_new(cap, err)) == NULL ||
	    (t->server = server_ctx(t, err)) == NULL ||
	    (t->upstream = upstream_ctx(cfg->upstream_ca, err)) == NULL)
		goto fail;
	return t;
fail:
	al_gw_tls_free(t);
	return NULL;
}

void al_gw_tls_free(al_gw_tls *t)
{
	if (t == NULL)
		return;
	SSL_CTX_free(t->server);
	SSL_CTX_free(t->upstream);
	al_leafcache_free(t->cache);
	EVP_PKEY_free(t->key);
	free(t);
}

SSL_CTX *al_gw_tls_server_ctx(al_gw_tls *t)
{
	return t->server;
}

SSL_CTX *al_gw_tls_upstream_ctx(al_gw_tls *t)
{
	return t->upstream;
}

EVP_PKEY *al_gw_tls_key(al_gw_tls *t)
{
	return t->key;
}

int al_gw_tls_server_expect(al_gw_tls *t, SSL *ssl, const char *name,
			    al_err *err)
{
	char canon[NAME_BUF];
	if (al_dnsname_canon(name, canon, sizeof canon, err) < 0)
		return -1;
	conn_state *c = conn_get(ssl, t);
	if (c == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	if (use_leaf(t, ssl, canon, err) < 0)
		return -1;
	snprintf(c->expect, sizeof c->expect, "%s", canon);
	return 0;
}

const char *al_gw_tls_server_sni(SSL *ssl)
{
	conn_state *c = SSL_get_ex_data(ssl, conn_idx);
	return c != NULL && c->sni[0] != '\0' ? c->sni : NULL;
}

const char *al_gw_tls_server_refusal(SSL *ssl)
{
	conn_state *c = SSL_get_ex_data(ssl, conn_idx);
	return c != NULL ? c->refusal : "";
}

int al_gw_tls_upstream_prepare(SSL *ssl, const char *name, al_err *err)
{
	if (SSL_set_tlsext_host_name(ssl, name) != 1 ||
	    SSL_set1_host(ssl, name) != 1)
		return al_gw_ossl_err(err, AL_EINVAL, "upstream TLS name");
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	return 0;
}
