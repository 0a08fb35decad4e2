/* Gateway TLS costs: a leaf minted by the host CA (al_ca_mint, in the
 * controller; as the mint service does it, from the key's point), a
 * leaf fetched over the mint socket (miss: signed; hit:
 * the controller's cache), and the gateway's CPU for one full TLS 1.3
 * handshake with a guest (server side only, its thread's CPU time, leaf
 * from the gateway's cache; X25519 + one P-256 signature). The guest's
 * client runs in the same thread over a BIO pair; its CPU is not counted.
 * CPU times are the thread's own (the machine may be shared); the
 * socket round trips are wall time, so they include scheduling delays.
 * Then the upstream side: the gateway's client handshake with a server
 * holding a leaf of the same CA, full and resumed (gateway/tlssess: the
 * session of the name's last connection offered; its CPU only), and
 * the CPU of setting up the contexts at a gateway's start, with the
 * system's CAs (AIRLOCK_UPSTREAM_CA unset) and with a one-CA bundle.
 * p50/p99 in microseconds; the goal is <= 1 ms of gateway CPU per
 * new TLS connection (guest side + upstream side), printed last for an
 * upstream connection reused from the pool and for one dialled.
 *
 *   gw_tls [-n iterations]   (default 2000) */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "ca/ca.h"
#include "ca/mint.h"
#include "gw/tls.h"
#include "mint.h"
#include "tlssess.h"

static al_ca *ca;

static double now_us(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Prints the figures; returns the median. */
static double report(const char *what, double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_d);
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += v[i];
	printf("  %-44s p50 %7.1f us  p99 %7.1f us  mean %7.1f us\n", what,
	       v[n / 2], v[(n * 99) / 100], sum / n);
	return v[n / 2];
}

static X509 *mint_direct(void *arg, const char *name, EVP_PKEY *pub,
			 al_err *err)
{
	(void)arg;
	return al_ca_mint(ca, name, pub, err);
}

static int die(const char *what, const al_err *err)
{
	fprintf(stderr, "gw_tls: %s: %s\n", what, err != NULL ? err->msg : "");
	exit(1);
}

/* One handshake; returns the CPU microseconds of the server (or, with
 * upstream, of the client), < 0 on failure. */
static double handshake_side(al_gw_tls *t, SSL_CTX *cc, const char *name,
			     bool upstream)
{
	SSL *cli = SSL_new(cc), *srv = SSL_new(al_gw_tls_server_ctx(t));
	if (upstream)
		gw_tlssess_offer(cli, name);
	BIO *a, *b;
	BIO_new_bio_pair(&a, 0, &b, 0);
	SSL_set_bio(cli, a, a);
	SSL_set_bio(srv, b, b);
	SSL_set_tlsext_host_name(cli, name);
	SSL_set1_host(cli, name);
	SSL_set_connect_state(cli);
	SSL_set_accept_state(srv);
	double cpu = 0, ccpu = 0;
	al_err err = {0};
	double t0 = now_us(CLOCK_THREAD_CPUTIME_ID);
	int ok = al_gw_tls_server_expect(t, srv, name, &err) == 0;
	cpu += now_us(CLOCK_THREAD_CPUTIME_ID) - t0;
	int cdone = 0, sdone = 0;
	for (int i = 0; ok && i < 50 && !(cdone && sdone); i++) {
		if (!cdone) {
			t0 = now_us(CLOCK_THREAD_CPUTIME_ID);
			int r = SSL_do_handshake(cli);
			ccpu += now_us(CLOCK_THREAD_CPUTIME_ID) - t0;
			cdone = r == 1;
			if (r != 1 &&
			    SSL_get_error(cli, r) != SSL_ERROR_WANT_READ)
				ok = 0;
		}
		if (!sdone) {
			t0 = now_us(CLOCK_THREAD_CPUTIME_ID);
			int r = SSL_do_handshake(srv);
			cpu += now_us(CLOCK_THREAD_CPUTIME_ID) - t0;
			sdone = r == 1;
			if (r != 1 &&
			    SSL_get_error(srv, r) != SSL_ERROR_WANT_READ)
				ok = 0;
		}
	}
	ok = ok && cdone && sdone && SSL_get_verify_result(cli) == X509_V_OK;
	if (ok && upstream) {
		/* The server's tickets come after the handshake (TLS 1.3):
		 * read them as the gateway does with the response. */
		char c;
		SSL_write(srv, "x", 1);
		t0 = now_us(CLOCK_THREAD_CPUTIME_ID);
		ok = SSL_read(cli, &c, 1) == 1;
		gw_tlssess_keep(cli);
		ccpu += now_us(CLOCK_THREAD_CPUTIME_ID) - t0;
	}
	SSL_free(cli);
	SSL_free(srv);
	return ok ? (upstream ? ccpu : cpu) : -1;
}

static double handshake(al_gw_tls *t, SSL_CTX *cc, const char *name)
{
	return handshake_side(t, cc, name, false);
}

/* CPU of the gateway's TLS setup at its start (upstream_ca NULL: the
 * system's CAs), median of reps. */
static void start_cost(const char *what, const char *upstream_ca, double *v,
		       int reps)
{
	al_err err = {0};
	for (int i = 0; i < reps; i++) {
		al_gw_tls_config cfg = {.mint = mint_direct,
					.upstream_ca = upstream_ca};
		double t0 = now_us(CLOCK_THREAD_CPUTIME_ID);
		al_gw_tls *t = al_gw_tls_new(&cfg, &err);
		v[i] = now_us(CLOCK_THREAD_CPUTIME_ID) - t0;
		if (t == NULL)
			die("gateway TLS", &err);
		al_gw_tls_free(t);
	}
	report(what, v, reps);
}

int main(int argc, char **argv)
{
	int n = 2000;
	if (argc == 3 && strcmp(argv[1], "-n") == 0)
		n = atoi(argv[2]);
	if (n < 10) {
		fprintf(stderr, "usage: gw_tls [-n iterations >= 10]\n");
		return 100;
	}
	char dir[] = "/tmp/al-bench-gwtls-XXXXXX";
	if (mkdtemp(dir) == NULL)
		return 111;
	char keys[64], run[64], crt[96];
	snprintf(keys, sizeof keys, "%s/keys", dir);
	snprintf(run, sizeof run, "%s/run", dir);
	snprintf(crt, sizeof crt, "%s/ca.crt", keys);
	mkdir(keys, 0700);
	mkdir(run, 0711);
	al_err err = {0};
	ca = al_ca_open(keys, &err);
	if (ca == NULL)
		die("CA", &err);
	double *v = calloc((size_t)n, sizeof *v);
	EVP_PKEY *k = EVP_EC_gen("P-256");
	char name[64];

	printf("gateway TLS (%d iterations)\n", n);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof name, "m%d.example.com", i);
		double t0 = now_us(CLOCK_THREAD_CPUTIME_ID);
		X509 *x = al_ca_mint(ca, name, k, &err);
		v[i] = now_us(CLOCK_THREAD_CPUTIME_ID) - t0;
		if (x == NULL)
			die("mint", &err);
		X509_free(x);
	}
	report("al_ca_mint, CPU (EVP_PKEY key: tests, tools)", v, n);
	unsigned char point[AL_CA_POINT_LEN];
	if (al_ca_key_point(k, point, &err) < 0)
		die("point", &err);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof name, "p%d.example.com", i);
		double t0 = now_us(CLOCK_THREAD_CPUTIME_ID);
		X509 *x = al_ca_mint_point(ca, name, point, &err);
		unsigned char *der = NULL;
		int len = x != NULL ? i2d_X509(x, &der) : -1;
		v[i] = now_us(CLOCK_THREAD_CPUTIME_ID) - t0;
		if (len <= 0)
			die("mint", &err);
		OPENSSL_free(der);
		X509_free(x);
	}
	report("al_ca_mint_point + DER, CPU (mint service)", v, n);

	al_mintd *m = ctl_mintd_start(dir, ca, &err);
	if (m == NULL)
		die("mint service", &err);
	char sock[96];
	snprintf(sock, sizeof sock, "%s/%s", dir, AL_MINT_SOCK);
	for (int hit = 0; hit < 2; hit++) {
		/* Both passes within the per-uid burst: none rate limited. */
		int cnt = n < 120 ? n : 120;
		for (int i = 0; i < cnt; i++) {
			snprintf(name, sizeof name, "s%d.example.com", i);
			X509 *x = NULL;
			double t0 = now_us(CLOCK_MONOTONIC);
			if (al_mint_fetch(sock, name, k, 2000, &x, &err) < 0)
				die("fetch", &err);
			v[i] = now_us(CLOCK_MONOTONIC) - t0;
			X509_free(x);
		}
		report(hit ? "mint.sock round trip, wall, controller cache hit"
			   : "mint.sock round trip, wall, signed (miss)",
		       v, cnt);
	}
	ctl_mintd_stop(m);

	al_gw_tls_config cfg = {.mint = mint_direct, .upstream_ca = crt};
	al_gw_tls *t = al_gw_tls_new(&cfg, &err);
	if (t == NULL)
		die("gateway TLS", &err);
	SSL_CTX *cc = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(cc, crt, NULL);
	SSL_CTX_set_verify(cc, SSL_VERIFY_PEER, NULL);
	for (int i = 0; i < n; i++) {
		v[i] = handshake(t, cc, "pypi.org");
		if (v[i] < 0)
			die("handshake", NULL);
	}
	double guest = report("guest handshake, gateway CPU (leaf cached)", v,
			      n);
	int cnt = n < 500 ? n : 500;
	for (int i = 0; i < cnt; i++) {
		snprintf(name, sizeof name, "h%d.example.com", i);
		v[i] = handshake(t, cc, name);
		if (v[i] < 0)
			die("handshake", NULL);
	}
	report("guest handshake + mint, new name (in-process)", v, cnt);
	SSL_CTX_free(cc);

	/* Upstream: the gateway's client context, the server another
	 * gateway's (a leaf of the same CA, as the bench's upstream has). */
	al_gw_tls *up = al_gw_tls_new(&cfg, &err);
	if (up == NULL)
		die("gateway TLS", &err);
	SSL_CTX *uc = al_gw_tls_upstream_ctx(up);
	SSL_CTX *sc = al_gw_tls_server_ctx(t);
	/* Tickets on, as public servers have them (the gateway's own
	 * server side never resumes). */
	SSL_CTX_clear_options(sc, SSL_OP_NO_TICKET);
	SSL_CTX_set_num_tickets(sc, 1);
	for (int i = 0; i < cnt; i++) {
		snprintf(name, sizeof name, "u%d.example.com", i);
		v[i] = handshake_side(t, uc, name, true);
		if (v[i] < 0)
			die("upstream handshake", NULL);
	}
	double full = report("upstream handshake, gateway CPU (full)", v, cnt);
	gw_tlssess_init(uc);
	handshake_side(t, uc, "pypi.org", true); /* its first session */
	for (int i = 0; i < n; i++) {
		v[i] = handshake_side(t, uc, "pypi.org", true);
		if (v[i] < 0)
			die("upstream handshake", NULL);
	}
	double resumed = report("upstream handshake, gateway CPU (resumed)", v,
				n);
	/* What a new guest connection costs in TLS, by what its request
	 * finds upstream: a pooled connection (gw/uppool: no upstream
	 * handshake), a session to resume, or nothing. */
	printf("  new guest connection, TLS CPU p50: upstream reused %.1f us, "
	       "not reused %.1f us (resumed) / %.1f us (full); goal <= 1000\n",
	       guest, guest + resumed, guest + full);
	al_gw_tls_free(up);
	al_gw_tls_free(t);

	int reps = n < 20 ? n : 20;
	start_cost("gateway start: TLS contexts, system CAs", NULL, v, reps);
	start_cost("gateway start: TLS contexts, one-CA bundle", crt, v, reps);
	EVP_PKEY_free(k);
	free(v);
	al_ca_close(ca);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : 111;
}
