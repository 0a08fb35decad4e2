/* gw/tls + gw/mint: in-memory handshakes (BIO pairs) between the
 * gateway's server context and a client that trusts only ca.crt, the
 * upstream verifier, the mint wire format and its client. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "ca/ca.h"
#include "ca/leafcache.h"
#include "ca/mint.h"
#include "gw/tls.h"

static char dir[] = "/tmp/al-gwtls-XXXXXX";
static char ca_path[128];
static al_ca *ca;
static int mints;

static int setup(void **state)
{
	(void)state;
	if (mkdtemp(dir) == NULL)
		return -1;
	al_err err = {0};
	ca = al_ca_open(dir, &err);
	snprintf(ca_path, sizeof ca_path, "%s/ca.crt", dir);
	return ca != NULL ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	al_ca_close(ca);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static X509 *mint_direct(void *arg, const char *name, EVP_PKEY *pub,
			 al_err *err)
{
	(void)arg;
	mints++;
	return al_ca_mint(ca, name, pub, err);
}

static al_gw_tls *gw_new(void)
{
	al_gw_tls_config cfg = {.mint = mint_direct, .upstream_ca = ca_path};
	al_err err = {0};
	al_gw_tls *t = al_gw_tls_new(&cfg, &err);
	if (t == NULL)
		fail_msg("%s", err.msg);
	return t;
}

/* A client that trusts only ca.crt and checks host. */
static SSL_CTX *client_ctx(void)
{
	SSL_CTX *c = SSL_CTX_new(TLS_client_method());
	assert_non_null(c);
	assert_int_equal(SSL_CTX_load_verify_locations(c, ca_path, NULL), 1);
	SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
	X509_VERIFY_PARAM_set_flags(SSL_CTX_get0_param(c),
				    X509_V_FLAG_X509_STRICT);
	return c;
}

/* Run both ends over a BIO pair until both finish or one fails; 1 when
 * both completed the handshake. */
static int handshake(SSL *cli, SSL *srv)
{
	BIO *a, *b;
	assert_int_equal(BIO_new_bio_pair(&a, 0, &b, 0), 1);
	SSL_set_bio(cli, a, a);
	SSL_set_bio(srv, b, b);
	SSL_set_connect_state(cli);
	SSL_set_accept_state(srv);
	int cdone = 0, sdone = 0;
	for (int i = 0; i < 100 && !(cdone && sdone); i++) {
		if (!cdone) {
			int r = SSL_do_handshake(cli);
			if (r == 1)
				cdone = 1;
			else if (SSL_get_error(cli, r) != SSL_ERROR_WANT_READ)
				return 0;
		}
		if (!sdone) {
			int r = SSL_do_handshake(srv);
			if (r == 1)
				sdone = 1;
			else if (SSL_get_error(srv, r) != SSL_ERROR_WANT_READ)
				return 0;
		}
	}
	return cdone && sdone;
}

typedef struct hs {
	const char *sni;    /* NULL: none */
	const char *host;   /* the client's hostname check */
	const char *expect; /* al_gw_tls_server_expect, NULL: not called */
	const unsigned char *alpn;
	unsigned alpn_len;
	int max_version; /* 0: the library's */
} hs;

static int try_hs(al_gw_tls *t, const hs *h, SSL **srv_out)
{
	SSL_CTX *cc = client_ctx();
	if (h->max_version != 0) {
		SSL_CTX_set_min_proto_version(cc, TLS1_VERSION);
		SSL_CTX_set_max_proto_version(cc, h->max_version);
		SSL_CTX_set_security_level(cc, 0); /* let it offer TLS 1.1 */
	}
	SSL *cli = SSL_new(cc);
	SSL *srv = SSL_new(al_gw_tls_server_ctx(t));
	assert_non_null(cli);
	assert_non_null(srv);
	if (h->sni != NULL)
		assert_int_equal(SSL_set_tlsext_host_name(cli, h->sni), 1);
	assert_int_equal(SSL_set1_host(cli, h->host), 1);
	if (h->alpn != NULL)
		assert_int_equal(SSL_set_alpn_protos(cli, h->alpn, h->alpn_len),
				 0);
	if (h->expect != NULL) {
		al_err err = {0};
		if (al_gw_tls_server_expect(t, srv, h->expect, &err) < 0)
			fail_msg("expect: %s", err.msg);
	}
	int ok = handshake(cli, srv);
	if (ok) {
		const unsigned char *p;
		unsigned n;
		SSL_get0_alpn_selected(cli, &p, &n);
		if (h->alpn != NULL) {
			assert_int_equal(n, 8);
			assert_memory_equal(p, "http/1.1", 8);
		}
		assert_int_equal(SSL_get_verify_result(cli), X509_V_OK);
	}
	ERR_clear_error();
	SSL_free(cli);
	SSL_CTX_free(cc);
	if (srv_out != NULL)
		*srv_out = srv;
	else
		SSL_free(srv);
	return ok;
}

static const unsigned char alpn_h2_h1[] = "\x02h2\x08http/1.1";
static const unsigned char alpn_h2[] = "\x02h2";

static void test_sni_handshake_verifies_and_speaks_http11(void **state)
{
	(void)state;
	al_gw_tls *t = gw_new();
	mints = 0;
	hs h = {.sni = "pypi.org",
		.host = "pypi.org",
		.alpn = alpn_h2_h1,
		.alpn_len = sizeof alpn_h2_h1 - 1};
	SSL *srv;
	assert_true(try_hs(t, &h, &srv));
	assert_string_equal(al_gw_tls_server_sni(srv), "pypi.org");
	SSL_free(srv);
	/* A second connection to the name takes the cached leaf. */
	assert_true(try_hs(t, &h, NULL));
	assert_int_equal(mints, 1);
	/* SNI in another case with a trailing dot is the same name. */
	h.sni = "PyPI.org.";
	assert_true(try_hs(t, &h, NULL));
	assert_int_equal(mints, 1);
	/* No ALPN at all: still HTTP/1.1. */
	h.alpn = NULL;
	assert_true(try_hs(t, &h, NULL));
	/* TLS 1.2 works (ECDHE-ECDSA); TLS 1.1 is refused. */
	h.max_version = TLS1_2_VERSION;
	assert_true(try_hs(t, &h, NULL));
	h.max_version = TLS1_1_VERSION;
	assert_false(try_hs(t, &h, NULL));
	al_gw_tls_free(t);
}

static void test_h2_only_client_is_refused(void **state)
{
	(void)state;
	al_gw_tls *t = gw_new();
	hs h = {.sni = "pypi.org",
		.host = "pypi.org",
		.alpn = alpn_h2,
		.alpn_len = sizeof alpn_h2 - 1};
	assert_false(try_hs(t, &h, NULL));
	al_gw_tls_free(t);
}

static void test_client_checking_another_name_fails(void **state)
{
	(void)state;
	al_gw_tls *t = gw_new();
	hs h = {.sni = "pypi.org", .host = "evil.org"};
	assert_false(try_hs(t, &h, NULL));
	al_gw_tls_free(t);
}

static void test_expected_name_serves_no_sni_and_refuses_other_sni(void **s)
{
	(void)s;
	al_gw_tls *t = gw_new();
	mints = 0;
	hs h = {.sni = NULL,
		.host = "files.pythonhosted.org",
		.expect = "files.pythonhosted.org"};
	assert_true(try_hs(t, &h, NULL));
	/* Fronting: the destination is files.pythonhosted.org, SNI another. */
	h.sni = "evil.org";
	h.host = "evil.org";
	SSL *srv;
	assert_false(try_hs(t, &h, &srv));
	assert_string_equal(al_gw_tls_server_sni(srv), "evil.org");
	assert_non_null(strstr(al_gw_tls_server_refusal(srv), "SNI"));
	SSL_free(srv);
	assert_int_equal(mints, 1); /* nothing minted for evil.org */
	/* Without expect and without SNI the server has no name: refused. */
	h.sni = NULL;
	h.expect = NULL;
	assert_false(try_hs(t, &h, &srv));
	assert_null(al_gw_tls_server_sni(srv));
	assert_non_null(strstr(al_gw_tls_server_refusal(srv), "no SNI"));
	SSL_free(srv);
	al_gw_tls_free(t);
}

static void test_ip_sni_gets_no_leaf(void **state)
{
	(void)state;
	al_gw_tls *t = gw_new();
	mints = 0;
	/* OpenSSL clients do not send an IP as SNI, so set it raw. */
	hs h = {.sni = "10.0.0.1", .host = "10.0.0.1"};
	assert_false(try_hs(t, &h, NULL));
	al_gw_tls_free(t);
}

/* The upstream side: a server holding a leaf of our CA for name. */
static int upstream_hs(al_gw_tls *t, const char *server_name, const char *dial)
{
	al_gw_tls *srv_t = gw_new();
	SSL *srv = SSL_new(al_gw_tls_server_ctx(srv_t));
	al_err err = {0};
	assert_int_equal(al_gw_tls_server_expect(srv_t, srv, server_name, &err),
			 0);
	SSL *cli = SSL_new(al_gw_tls_upstream_ctx(t));
	assert_int_equal(al_gw_tls_upstream_prepare(cli, dial, &err), 0);
	int ok = handshake(cli, srv);
	ERR_clear_error();
	SSL_free(cli);
	SSL_free(srv);
	al_gw_tls_free(srv_t);
	return ok;
}

static void test_upstream_verifies_against_bundle_and_name(void **state)
{
	(void)state;
	al_gw_tls *t = gw_new();
	assert_true(upstream_hs(t, "mirror.test", "mirror.test"));
	assert_false(upstream_hs(t, "mirror.test", "other.test"));
	al_gw_tls_free(t);
	/* The system bundle does not know our CA. */
	al_gw_tls_config cfg = {.mint = mint_direct};
	al_err err = {0};
	t = al_gw_tls_new(&cfg, &err);
	assert_non_null(t);
	assert_false(upstream_hs(t, "mirror.test", "mirror.test"));
	al_gw_tls_free(t);
	/* A bundle path that is not there fails at start, not later. */
	cfg.upstream_ca = "/nonexistent/ca.pem";
	assert_null(al_gw_tls_new(&cfg, &err));
}

/* The system's CAs are a hashed directory looked up when a chain needs
 * one: nothing is read at start, and a CA found there verifies. */
static void test_system_cas_are_looked_up_lazily(void **state)
{
	(void)state;
	char hashed[160], link[200];
	snprintf(hashed, sizeof hashed, "%s/hashed", dir);
	assert_int_equal(mkdir(hashed, 0700), 0);
	FILE *f = fopen(ca_path, "r");
	assert_non_null(f);
	X509 *cax = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(cax);
	snprintf(link, sizeof link, "%s/%08lx.0", hashed,
		 X509_subject_name_hash(cax));
	X509_free(cax);
	assert_int_equal(symlink(ca_path, link), 0);
	const char *var = X509_get_default_cert_dir_env();
	assert_int_equal(setenv(var, hashed, 1), 0);

	al_gw_tls_config cfg = {.mint = mint_direct};
	al_err err = {0};
	al_gw_tls *t = al_gw_tls_new(&cfg, &err);
	assert_non_null(t);
	X509_STORE *st = SSL_CTX_get_cert_store(al_gw_tls_upstream_ctx(t));
	assert_int_equal(sk_X509_OBJECT_num(X509_STORE_get0_objects(st)), 0);
	assert_true(upstream_hs(t, "mirror.test", "mirror.test"));
	assert_false(upstream_hs(t, "mirror.test", "other.test"));
	assert_int_equal(sk_X509_OBJECT_num(X509_STORE_get0_objects(st)), 1);
	al_gw_tls_free(t);
	unsetenv(var);
}

/* ---- mint wire ---- */

static int pack(const char *name, EVP_PKEY *k, unsigned char *buf)
{
	al_err err = {0};
	int n = al_mint_req_pack(name, k, buf, AL_MINT_REQ_MAX, &err);
	assert_true(n > 0);
	return n;
}

static int unpack(const unsigned char *buf, size_t n, al_code *code)
{
	al_mint_req req;
	al_err err = {0};
	int rc = al_mint_req_unpack(buf, n, &req, &err);
	*code = err.code;
	return rc;
}

static void test_mint_request_parser_is_strict(void **state)
{
	(void)state;
	EVP_PKEY *k = EVP_EC_gen("P-256");
	unsigned char buf[AL_MINT_REQ_MAX + 16];
	int n = pack("pypi.org", k, buf);
	al_code code;
	al_mint_req req;
	al_err err = {0};
	assert_int_equal(al_mint_req_need(buf, (size_t)n), 0);
	assert_int_equal(al_mint_req_unpack(buf, (size_t)n, &req, &err), 0);
	assert_string_equal(req.name, "pypi.org");
	unsigned char point[AL_CA_POINT_LEN];
	assert_int_equal(al_ca_key_point(k, point, &err), 0);
	assert_memory_equal(req.point, point, sizeof point);
	/* The same DER from OpenSSL's own encoder. */
	unsigned char *der = NULL;
	int dlen = i2d_PUBKEY(k, &der);
	assert_int_equal(dlen, AL_MINT_SPKI_LEN);
	assert_memory_equal(buf + n - dlen, der, (size_t)dlen);
	OPENSSL_free(der);
	/* Every strict prefix is incomplete and refused. */
	for (int i = 0; i < n; i++) {
		assert_true(al_mint_req_need(buf, (size_t)i) > 0);
		assert_int_equal(unpack(buf, (size_t)i, &code), -1);
	}
	/* One byte more. */
	buf[n] = 0;
	assert_int_equal(unpack(buf, (size_t)n + 1, &code), -1);
	/* Bad magic. */
	buf[0] = 'X';
	assert_int_equal(unpack(buf, (size_t)n, &code), -1);
	buf[0] = 'A';
	/* A key byte flipped: off the curve; in the header: not P-256. */
	buf[n - 5] ^= 0x55;
	assert_int_equal(unpack(buf, (size_t)n, &code), -1);
	buf[n - 5] ^= 0x55;
	buf[n - 70] ^= 0x01;
	assert_int_equal(unpack(buf, (size_t)n, &code), -1);
	buf[n - 70] ^= 0x01;
	assert_int_equal(unpack(buf, (size_t)n, &code), 0);
	/* NUL inside the name, a non-canonical name, an IP. */
	buf[6] = '\0';
	assert_int_equal(unpack(buf, (size_t)n, &code), -1);
	n = pack("PyPI.org", k, buf);
	assert_int_equal(unpack(buf, (size_t)n, &code), -1);
	assert_int_equal(code, AL_EINVAL);
	n = pack("192.168.1.1", k, buf);
	assert_int_equal(unpack(buf, (size_t)n, &code), -1);
	/* A P-384 key cannot even be packed; sent raw, it is refused. */
	EVP_PKEY *k384 = EVP_EC_gen("P-384");
	assert_int_equal(al_mint_req_pack("pypi.org", k384, buf,
					  AL_MINT_REQ_MAX, &err),
			 -1);
	unsigned char *d384 = NULL;
	int l384 = i2d_PUBKEY(k384, &d384);
	n = 4 + 1 + 8;
	memcpy(buf, "ALM1\x08pypi.org", (size_t)n);
	buf[n++] = (unsigned char)(l384 >> 8);
	buf[n++] = (unsigned char)l384;
	memcpy(buf + n, d384, (size_t)l384);
	n += l384;
	assert_int_equal(unpack(buf, (size_t)n, &code), -1);
	OPENSSL_free(d384);
	EVP_PKEY_free(k384);
	/* Too big. */
	assert_int_equal(unpack(buf, AL_MINT_REQ_MAX + 1, &code), -1);
	assert_int_equal(code, AL_ETOOBIG);
	EVP_PKEY_free(k);
}

static void test_mint_response_round_trip(void **state)
{
	(void)state;
	EVP_PKEY *k = EVP_EC_gen("P-256");
	al_err err = {0};
	X509 *leaf = al_ca_mint(ca, "pypi.org", k, &err);
	unsigned char *der = NULL;
	int dlen = i2d_X509(leaf, &der);
	unsigned char buf[AL_MINT_RESP_MAX];
	int n = al_mint_resp_pack(AL_OK, der, (size_t)dlen, buf, sizeof buf,
				  &err);
	assert_true(n > 0);
	X509 *back = NULL;
	assert_int_equal(al_mint_resp_unpack(buf, (size_t)n, &back, &err), 0);
	assert_int_equal(X509_cmp(back, leaf), 0);
	X509_free(back);
	assert_int_equal(al_mint_resp_unpack(buf, (size_t)n - 1, &back, &err),
			 -1);
	n = al_mint_resp_pack(AL_EQUOTA, "slow\ndown", 9, buf, sizeof buf,
			      &err);
	assert_int_equal(al_mint_resp_unpack(buf, (size_t)n, &back, &err), -1);
	assert_int_equal(err.code, AL_EQUOTA);
	assert_non_null(strstr(err.msg, "slow?down"));
	OPENSSL_free(der);
	X509_free(leaf);
	EVP_PKEY_free(k);
}

/* al_mint_fetch against a one-shot server built from the same codec. */
static void test_mint_client_over_a_socket(void **state)
{
	(void)state;
	char sock[100];
	snprintf(sock, sizeof sock, "%s/mint.sock", dir);
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(l, 4), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int c = accept(l, NULL, NULL);
		unsigned char buf[AL_MINT_REQ_MAX];
		size_t len = 0;
		while (al_mint_req_need(buf, len) > 0) {
			ssize_t r = read(c, buf + len,
					 al_mint_req_need(buf, len));
			if (r <= 0)
				_exit(1);
			len += (size_t)r;
		}
		al_mint_req req;
		al_err err = {0};
		if (al_mint_req_unpack(buf, len, &req, &err) < 0)
			_exit(2);
		X509 *x = al_ca_mint_point(ca, req.name, req.point, &err);
		unsigned char *der = NULL;
		int dlen = i2d_X509(x, &der);
		unsigned char out[AL_MINT_RESP_MAX];
		int n = al_mint_resp_pack(AL_OK, der, (size_t)dlen, out,
					  sizeof out, &err);
		_exit(write(c, out, (size_t)n) == n ? 0 : 3);
	}
	close(l);
	al_gw_tls_config cfg = {.mint_sock = sock, .upstream_ca = ca_path};
	al_err err = {0};
	al_gw_tls *t = al_gw_tls_new(&cfg, &err);
	assert_non_null(t);
	X509 *x = al_gw_tls_leaf(t, "registry.npmjs.org", &err);
	if (x == NULL)
		fail_msg("%s", err.msg);
	assert_int_equal(X509_check_private_key(x, al_gw_tls_key(t)), 1);
	X509_free(x);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The server is gone: a miss now fails (closed), a hit still works. */
	x = al_gw_tls_leaf(t, "registry.npmjs.org", &err);
	assert_non_null(x);
	X509_free(x);
	unlink(sock);
	assert_null(al_gw_tls_leaf(t, "pypi.org", &err));
	assert_int_equal(err.code, AL_EUNAVAIL);
	al_gw_tls_free(t);
}

static void test_leaf_cache_evicts_least_recent(void **state)
{
	(void)state;
	al_err err = {0};
	al_leafcache *c = al_leafcache_new(2, &err);
	EVP_PKEY *k = EVP_EC_gen("P-256");
	X509 *a = al_ca_mint(ca, "a.test", k, &err);
	X509 *b = al_ca_mint(ca, "b.test", k, &err);
	X509 *d = al_ca_mint(ca, "d.test", k, &err);
	assert_int_equal(al_leafcache_put(c, "a", a, &err), 0);
	assert_int_equal(al_leafcache_put(c, "b", b, &err), 0);
	X509 *got = al_leafcache_get(c, "a"); /* a is now the most recent */
	assert_ptr_equal(got, a);
	X509_free(got);
	assert_int_equal(al_leafcache_put(c, "d", d, &err), 0);
	assert_int_equal(al_leafcache_count(c), 2);
	assert_null(al_leafcache_get(c, "b"));
	got = al_leafcache_get(c, "a");
	assert_non_null(got);
	X509_free(got);
	al_leafcache_free(c);
	X509_free(a);
	X509_free(b);
	X509_free(d);
	EVP_PKEY_free(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sni_handshake_verifies_and_speaks_http11),
		cmocka_unit_test(test_h2_only_client_is_refused),
		cmocka_unit_test(test_client_checking_another_name_fails),
		cmocka_unit_test(
			test_expected_name_serves_no_sni_and_refuses_other_sni),
		cmocka_unit_test(test_ip_sni_gets_no_leaf),
		cmocka_unit_test(
			test_upstream_verifies_against_bundle_and_name),
		cmocka_unit_test(test_system_cas_are_looked_up_lazily),
		cmocka_unit_test(test_mint_request_parser_is_strict),
		cmocka_unit_test(test_mint_response_round_trip),
		cmocka_unit_test(test_mint_client_over_a_socket),
		cmocka_unit_test(test_leaf_cache_evicts_least_recent),
	};
	return cmocka_run_group_tests_name("gw_tls", tests, setup, teardown);
}
