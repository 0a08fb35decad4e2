/* gw/uppool: which parked upstream connection a request gets (its key:
 * name, port, TLS or plain; the most recent first; an address the
 * classifier now refuses never), and which ones the pool closes instead
 * (idle too long, bytes or EOF from the upstream while parked, bytes
 * left unread from a response, in libevent's buffer or decrypted
 * inside OpenSSL; past the bound). Each "upstream" is one end of a
 * socketpair; the test holds the other, where a closed connection
 * reads EOF. */
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "gw/uppool.h"

static int released;

static void count_release(struct bufferevent *bev)
{
	released++;
	bufferevent_free(bev);
}

typedef struct world {
	struct event_base *base;
	al_upaddr *classify;
	al_gw_uppool *pool;
} world;

static void world_open(world *w, unsigned max, long idle_ms)
{
	al_err err;
	released = 0;
	w->base = event_base_new();
	assert_non_null(w->base);
	w->classify = al_upaddr_new(NULL, NULL, &err);
	assert_non_null(w->classify);
	al_gw_uppool_config cfg = {.max = max,
				   .idle_ms = idle_ms,
				   .classify = w->classify,
				   .release = count_release};
	w->pool = al_gw_uppool_new(w->base, &cfg, &err);
	assert_non_null(w->pool);
}

static void world_close(world *w)
{
	al_gw_uppool_free(w->pool);
	al_upaddr_free(w->classify);
	event_base_free(w->base);
}

/* An upstream connection; *peer: the upstream's end. */
static struct bufferevent *conn(world *w, int *peer)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	evutil_make_socket_nonblocking(sv[0]);
	struct bufferevent *bev = bufferevent_socket_new(w->base, sv[0],
							 BEV_OPT_CLOSE_ON_FREE);
	assert_non_null(bev);
	*peer = sv[1];
	return bev;
}

static struct sockaddr_in addr4(const char *text)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(443)};
	assert_int_equal(inet_pton(AF_INET, text, &sa.sin_addr), 1);
	return sa;
}

static void put(world *w, struct bufferevent *bev, const char *name,
		unsigned port, bool tls, const char *ip)
{
	struct sockaddr_in sa = addr4(ip);
	al_gw_upkey key = {name, port, tls, (struct sockaddr *)&sa, sizeof sa};
	al_gw_uppool_put(w->pool, &key, bev);
}

/* Turn the loop for ms. */
static void run(world *w, long ms)
{
	struct timeval t = {ms / 1000, (ms % 1000) * 1000};
	event_base_loopexit(w->base, &t);
	event_base_dispatch(w->base);
}

/* The upstream's end saw its connection closed (libevent closes a freed
 * bufferevent's socket on a later turn of the loop: run it first). */
static bool closed(int peer)
{
	char c;
	return recv(peer, &c, 1, MSG_DONTWAIT) == 0;
}

static void test_key(void **state)
{
	(void)state;
	world w;
	world_open(&w, 8, 10000);
	int pa, pb;
	struct bufferevent *a = conn(&w, &pa), *b = conn(&w, &pb);
	put(&w, a, "a.example.com", 443, true, "93.184.216.34");
	assert_int_equal(al_gw_uppool_count(w.pool), 1);
	/* Another name, port or kind gets nothing. */
	assert_null(al_gw_uppool_take(w.pool, "b.example.com", 443, true, NULL,
				      NULL));
	assert_null(al_gw_uppool_take(w.pool, "a.example.com", 80, true, NULL,
				      NULL));
	assert_null(al_gw_uppool_take(w.pool, "a.example.com", 443, false, NULL,
				      NULL));
	/* The most recently parked first, with its address. */
	put(&w, b, "a.example.com", 443, true, "93.184.216.35");
	struct sockaddr_storage got;
	socklen_t gl = 0;
	assert_ptr_equal(al_gw_uppool_take(w.pool, "a.example.com", 443, true,
					   &got, &gl),
			 b);
	assert_int_equal(gl, sizeof(struct sockaddr_in));
	struct sockaddr_in want = addr4("93.184.216.35");
	assert_memory_equal(&got, &want, sizeof want);
	assert_ptr_equal(al_gw_uppool_take(w.pool, "a.example.com", 443, true,
					   NULL, NULL),
			 a);
	/* Taken means gone from the pool. */
	assert_null(al_gw_uppool_take(w.pool, "a.example.com", 443, true, NULL,
				      NULL));
	assert_int_equal(al_gw_uppool_count(w.pool), 0);
	assert_int_equal(released, 0);
	assert_false(closed(pa));
	bufferevent_free(a);
	bufferevent_free(b);
	close(pa);
	close(pb);
	world_close(&w);
}

static void test_idle_expiry(void **state)
{
	(void)state;
	world w;
	/* 100 ms of slack on either side of each expiry: a loaded host
	 * (ASan, other tests) runs the loop late by tens of ms. */
	world_open(&w, 8, 400);
	int pa, pb;
	put(&w, conn(&w, &pa), "a.example.com", 443, true, "93.184.216.34");
	run(&w, 200);
	assert_int_equal(al_gw_uppool_count(w.pool), 1);
	put(&w, conn(&w, &pb), "a.example.com", 443, true, "93.184.216.34");
	run(&w, 300);
	/* The first one's 400 ms are up, not the second's. */
	assert_int_equal(al_gw_uppool_count(w.pool), 1);
	assert_true(closed(pa));
	assert_false(closed(pb));
	run(&w, 400);
	assert_int_equal(al_gw_uppool_count(w.pool), 0);
	assert_int_equal(released, 2);
	assert_true(closed(pb));
	assert_null(al_gw_uppool_take(w.pool, "a.example.com", 443, true, NULL,
				      NULL));
	close(pa);
	close(pb);
	world_close(&w);
}

/* An upstream that sends while parked is out of step, one that closes
 * is gone: neither is handed out. */
static void test_upstream_speaks_or_closes(void **state)
{
	(void)state;
	world w;
	world_open(&w, 8, 10000);
	int pa, pb;
	put(&w, conn(&w, &pa), "a.example.com", 443, true, "93.184.216.34");
	put(&w, conn(&w, &pb), "a.example.com", 443, true, "93.184.216.34");
	assert_int_equal(write(pa, "HTTP/1.1 200 OK\r\n", 17), 17);
	shutdown(pb, SHUT_WR);
	run(&w, 50);
	assert_int_equal(al_gw_uppool_count(w.pool), 0);
	assert_int_equal(released, 2);
	assert_null(al_gw_uppool_take(w.pool, "a.example.com", 443, true, NULL,
				      NULL));
	assert_true(closed(pa));
	close(pa);
	close(pb);
	world_close(&w);
}

/* A connection with response bytes still unread was cut short: closed
 * at once, never parked. */
static void test_unread_bytes_not_parked(void **state)
{
	(void)state;
	world w;
	world_open(&w, 8, 10000);
	int pa;
	struct bufferevent *a = conn(&w, &pa);
	bufferevent_enable(a, EV_READ);
	assert_int_equal(write(pa, "rest of a body", 14), 14);
	run(&w, 30);
	assert_int_equal(evbuffer_get_length(bufferevent_get_input(a)) > 0, 1);
	bufferevent_disable(a, EV_READ);
	put(&w, a, "a.example.com", 443, true, "93.184.216.34");
	assert_int_equal(al_gw_uppool_count(w.pool), 0);
	assert_int_equal(released, 1);
	run(&w, 10);
	assert_true(closed(pa));
	close(pa);
	world_close(&w);
}

/* An address the classifier refuses now is closed, not handed out. */
static void test_refused_address(void **state)
{
	(void)state;
	world w;
	world_open(&w, 8, 10000);
	int pa;
	put(&w, conn(&w, &pa), "a.example.com", 443, true, "127.0.0.1");
	assert_int_equal(al_gw_uppool_count(w.pool), 1);
	assert_null(al_gw_uppool_take(w.pool, "a.example.com", 443, true, NULL,
				      NULL));
	assert_int_equal(al_gw_uppool_count(w.pool), 0);
	run(&w, 10);
	assert_true(closed(pa));
	close(pa);
	world_close(&w);
}

/* Past the bound the oldest goes; clear closes all. */
static void test_bound_and_clear(void **state)
{
	(void)state;
	world w;
	world_open(&w, 2, 10000);
	int p[3];
	put(&w, conn(&w, &p[0]), "a.example.com", 443, true, "93.184.216.34");
	put(&w, conn(&w, &p[1]), "b.example.com", 443, true, "93.184.216.34");
	put(&w, conn(&w, &p[2]), "c.example.com", 80, false, "93.184.216.34");
	assert_int_equal(al_gw_uppool_count(w.pool), 2);
	run(&w, 10);
	assert_true(closed(p[0]));
	assert_false(closed(p[1]));
	assert_null(al_gw_uppool_take(w.pool, "a.example.com", 443, true, NULL,
				      NULL));
	al_gw_uppool_clear(w.pool);
	assert_int_equal(al_gw_uppool_count(w.pool), 0);
	assert_int_equal(released, 3);
	run(&w, 10);
	assert_true(closed(p[1]) && closed(p[2]));
	for (int i = 0; i < 3; i++)
		close(p[i]);
	world_close(&w);
}

/* ---- a TLS upstream: bytes OpenSSL decrypted that libevent has not
 * taken ---- */

/* A server context with a throwaway self-signed P-256 certificate. */
static SSL_CTX *server_ctx(void)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	assert_non_null(k);
	assert_non_null(x);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
				   (const unsigned char *)"a.example.com", -1,
				   -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(x));
	X509_set_pubkey(x, k);
	assert_true(X509_sign(x, k, EVP_sha256()) > 0);
	SSL_CTX *c = SSL_CTX_new(TLS_server_method());
	assert_non_null(c);
	assert_int_equal(SSL_CTX_use_certificate(c, x), 1);
	assert_int_equal(SSL_CTX_use_PrivateKey(c, k), 1);
	X509_free(x);
	EVP_PKEY_free(k);
	return c;
}

/* A TLS upstream connection, handshaken: the client's bufferevent, and
 * the server's SSL on the test's end (non-blocking). */
static struct bufferevent *tls_conn(world *w, SSL_CTX *sctx, SSL_CTX *cctx,
				    SSL **srv)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	evutil_make_socket_nonblocking(sv[0]);
	evutil_make_socket_nonblocking(sv[1]);
	*srv = SSL_new(sctx);
	assert_non_null(*srv);
	SSL_set_fd(*srv, sv[1]);
	struct bufferevent *bev = bufferevent_openssl_socket_new(
		w->base, sv[0], SSL_new(cctx), BUFFEREVENT_SSL_CONNECTING,
		BEV_OPT_CLOSE_ON_FREE);
	assert_non_null(bev);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	int done = 0;
	for (int i = 0; i < 200 && done != 1; i++) {
		done = SSL_accept(*srv);
		run(w, 5);
	}
	assert_int_equal(done, 1);
	return bev;
}

static void test_bytes_inside_openssl_not_parked(void **state)
{
	(void)state;
	world w;
	world_open(&w, 8, 10000);
	SSL_CTX *sctx = server_ctx();
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	assert_non_null(cctx);
	SSL_CTX_set_read_ahead(cctx, 1);

	/* Control: a TLS connection with nothing unread is parked. */
	SSL *srv_a;
	struct bufferevent *a = tls_conn(&w, sctx, cctx, &srv_a);
	run(&w, 20); /* TLS 1.3 session tickets, taken in by OpenSSL */
	bufferevent_disable(a, EV_READ);
	put(&w, a, "a.example.com", 443, true, "93.184.216.34");
	assert_int_equal(al_gw_uppool_count(w.pool), 1);
	assert_int_equal(released, 0);

	/* Two records at once, with read-ahead (as the gateway reads):
	 * OpenSSL takes both off the socket, libevent one SSL_read of the
	 * first, and nothing tells it to read again (the socket is empty).
	 * With that record drained, libevent's buffer is empty and only
	 * OpenSSL holds the second. */
	SSL *srv_b;
	struct bufferevent *b = tls_conn(&w, sctx, cctx, &srv_b);
	run(&w, 20);
	assert_int_equal(SSL_write(srv_b, "first record", 12), 12);
	assert_int_equal(SSL_write(srv_b, "second", 6), 6);
	for (int i = 0;
	     i < 100 && evbuffer_get_length(bufferevent_get_input(b)) == 0; i++)
		run(&w, 5);
	run(&w, 20);
	assert_int_equal(evbuffer_get_length(bufferevent_get_input(b)), 12);
	assert_true(SSL_has_pending(bufferevent_openssl_get_ssl(b)));
	bufferevent_disable(b, EV_READ);
	evbuffer_drain(bufferevent_get_input(b), 12);
	put(&w, b, "a.example.com", 443, true, "93.184.216.34");
	assert_int_equal(al_gw_uppool_count(w.pool), 1);
	assert_int_equal(released, 1);

	al_gw_uppool_clear(w.pool);
	SSL_free(srv_a);
	SSL_free(srv_b);
	SSL_CTX_free(sctx);
	SSL_CTX_free(cctx);
	world_close(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key),
		cmocka_unit_test(test_idle_expiry),
		cmocka_unit_test(test_upstream_speaks_or_closes),
		cmocka_unit_test(test_unread_bytes_not_parked),
		cmocka_unit_test(test_bytes_inside_openssl_not_parked),
		cmocka_unit_test(test_refused_address),
		cmocka_unit_test(test_bound_and_clear),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
