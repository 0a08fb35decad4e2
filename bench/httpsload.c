/* httpsload: the HTTPS client of bench/gateway.sh. One run does one of:
 *
 *   keepalive  N GETs of a small path on one kept-alive TLS connection,
 *              each timed from its first byte written to its last byte
 *              read (after a few untimed warm-up requests)
 *   conns      M new TLS connections, each TCP connect + full handshake
 *              (no session reuse) + one GET of the small path + close
 *   bulk       R GETs of the big path on new connections, each timed
 *              from the request to the last byte: MB/s (10^6 bytes/s)
 *
 *   httpsload --connect IP:PORT --name NAME --ca FILE [--proxy IP:PORT]
 *             [--small PATH] [--big PATH] [-n N] [--mode keepalive|conns|
 *             bulk] [--raw] [--header 'Name: value']
 *
 * --name is the SNI, the Host and the name the server's certificate is
 * verified for (against --ca only). --raw: every timed sample too, one
 * line each (<key>_sample_us=), for a caller that pools rounds. --header:
 * one more field in every request (a credential placeholder). --proxy: an explicit proxy, reached
 * at IP:PORT and asked with CONNECT NAME:PORT (PORT from --connect)
 * before TLS. Figures go to stdout as key=value lines for the script;
 * errors to stderr with exit 1. The responses come from the bench's own
 * nginx, squid or gateway: the head is read up to its blank line (16 KiB
 * at most), only the status and Content-Length (or chunked framing) are
 * looked at, and anything else fails the run. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define HEAD_MAX 16384
#define WARMUP 20

typedef struct opts {
	struct sockaddr_in target;
	struct sockaddr_in proxy;
	bool use_proxy;
	unsigned port; /* of --connect: in CONNECT and Host */
	const char *name;
	const char *ca;
	const char *small;
	const char *big;
	const char *mode;
	long n;
	bool raw;	    /* every sample too, as <key>_sample_us lines */
	const char *header; /* one more request field ("Name: value") */
} opts;

typedef struct conn {
	int fd;
	SSL *ssl;
	char buf[HEAD_MAX];
	size_t have; /* bytes in buf not yet consumed */
} conn;

static void die(const char *what)
{
	fprintf(stderr, "httpsload: %s\n", what);
	unsigned long e;
	while ((e = ERR_get_error()) != 0) {
		char b[256];
		ERR_error_string_n(e, b, sizeof b);
		fprintf(stderr, "httpsload:   %s\n", b);
	}
	exit(1);
}

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int parse_addr(const char *s, struct sockaddr_in *a, unsigned *port)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	if (colon == NULL || (size_t)(colon - s) >= sizeof host)
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	char *end;
	long p = strtol(colon + 1, &end, 10);
	if (*end != '\0' || p < 1 || p > 65535)
		return -1;
	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)p);
	if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
		return -1;
	if (port != NULL)
		*port = (unsigned)p;
	return 0;
}

/* ---- plain socket reads before TLS (the proxy's CONNECT answer) ---- */

static void proxy_connect(int fd, const opts *o)
{
	char req[512];
	int n = snprintf(req, sizeof req,
			 "CONNECT %s:%u HTTP/1.1\r\nHost: %s:%u\r\n\r\n",
			 o->name, o->port, o->name, o->port);
	if (n < 0 || (size_t)n >= sizeof req || write(fd, req, (size_t)n) != n)
		die("CONNECT: write failed");
	/* Byte by byte up to the blank line: nothing of the tunnel's own
	 * bytes (the server's TLS) may be eaten here. */
	char head[HEAD_MAX];
	size_t len = 0;
	while (len < 4 || memcmp(head + len - 4, "\r\n\r\n", 4) != 0) {
		if (len + 1 >= sizeof head)
			die("CONNECT: answer head too long");
		ssize_t r = read(fd, head + len, 1);
		if (r <= 0)
			die("CONNECT: proxy closed");
		len++;
	}
	head[len] = '\0';
	if (strncmp(head, "HTTP/1.1 200", 12) != 0 &&
	    strncmp(head, "HTTP/1.0 200", 12) != 0) {
		fprintf(stderr, "httpsload: CONNECT refused: %.80s\n", head);
		exit(1);
	}
}

static SSL_CTX *make_ctx(const opts *o)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL)
		die("SSL_CTX_new");
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	if (SSL_CTX_load_verify_locations(ctx, o->ca, NULL) != 1)
		die("cannot load the CA file");
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/* Every new connection is a full handshake: what a new client
	 * connection costs a proxy. */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	static const unsigned char alpn[] = "\x08http/1.1";
	SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn - 1);
	return ctx;
}

static void conn_open(conn *c, SSL_CTX *ctx, const opts *o)
{
	c->have = 0;
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		die("socket");
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	const struct sockaddr_in *to = o->use_proxy ? &o->proxy : &o->target;
	if (connect(c->fd, (const struct sockaddr *)to, sizeof *to) < 0) {
		fprintf(stderr, "httpsload: connect: %s\n", strerror(errno));
		exit(1);
	}
	if (o->use_proxy)
		proxy_connect(c->fd, o);
	c->ssl = SSL_new(ctx);
	if (c->ssl == NULL)
		die("SSL_new");
	SSL_set_tlsext_host_name(c->ssl, o->name);
	if (SSL_set1_host(c->ssl, o->name) != 1)
		die("SSL_set1_host");
	SSL_set_fd(c->ssl, c->fd);
	if (SSL_connect(c->ssl) != 1)
		die("TLS handshake failed");
}

static void conn_close(conn *c)
{
	SSL_shutdown(c->ssl);
	SSL_free(c->ssl);
	close(c->fd);
}

/* More bytes into c->buf after what it has; 0 at EOF. */
static size_t fill(conn *c)
{
	if (c->have >= sizeof c->buf)
		die("response head too long");
	int r = SSL_read(c->ssl, c->buf + c->have,
			 (int)(sizeof c->buf - c->have));
	if (r <= 0)
		return 0;
	c->have += (size_t)r;
	return (size_t)r;
}

static void consume(conn *c, size_t n)
{
	memmove(c->buf, c->buf + n, c->have - n);
	c->have -= n;
}

/* Skip n body bytes: first what is buffered, then straight reads. */
static void skip_body(conn *c, uint64_t n)
{
	size_t k = c->have < n ? c->have : (size_t)n;
	consume(c, k);
	n -= k;
	char sink[65536];
	while (n > 0) {
		int want = n < sizeof sink ? (int)n : (int)sizeof sink;
		int r = SSL_read(c->ssl, sink, want);
		if (r <= 0)
			die("connection closed inside a body");
		n -= (uint64_t)r;
	}
}

/* One line (CRLF) at the front of c->buf: its length without CRLF; the
 * caller consumes it and 2 more. */
static size_t line_at_front(conn *c)
{
	for (;;) {
		char *crlf = memmem(c->buf, c->have, "\r\n", 2);
		if (crlf != NULL)
			return (size_t)(crlf - c->buf);
		if (fill(c) == 0)
			die("connection closed inside a chunk header");
	}
}

static uint64_t chunked_body(conn *c)
{
	uint64_t total = 0;
	for (;;) {
		size_t l = line_at_front(c);
		char hex[32];
		if (l == 0 || l >= sizeof hex)
			die("bad chunk size line");
		memcpy(hex, c->buf, l);
		hex[l] = '\0';
		char *end;
		errno = 0;
		unsigned long long sz = strtoull(hex, &end, 16);
		if (errno != 0 || end == hex || (*end != '\0' && *end != ';'))
			die("bad chunk size");
		consume(c, l + 2);
		if (sz == 0)
			break;
		skip_body(c, sz);
		total += sz;
		if (line_at_front(c) != 0)
			die("chunk not followed by CRLF");
		consume(c, 2);
	}
	/* Trailers up to the blank line. */
	size_t l;
	while ((l = line_at_front(c)) != 0)
		consume(c, l + 2);
	consume(c, 2);
	return total;
}

/* GET path on c; the body's length. */
static uint64_t get(conn *c, const opts *o, const char *path)
{
	char req[1024];
	int n = snprintf(req, sizeof req,
			 "GET %s HTTP/1.1\r\nHost: %s\r\n"
			 "User-Agent: airlock-httpsload\r\n%s%s\r\n",
			 path, o->name, o->header ? o->header : "",
			 o->header ? "\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof req || SSL_write(c->ssl, req, n) != n)
		die("request write failed");
	char *end;
	while ((end = memmem(c->buf, c->have, "\r\n\r\n", 4)) == NULL)
		if (fill(c) == 0)
			die("connection closed before a response head");
	size_t head_len = (size_t)(end - c->buf) + 4;
	if (c->have < 12 || memcmp(c->buf, "HTTP/1.1 200", 12) != 0) {
		fprintf(stderr, "httpsload: GET %s: %.60s\n", path, c->buf);
		exit(1);
	}
	bool chunked = false, have_len = false;
	uint64_t len = 0;
	const char *p = memmem(c->buf, head_len, "\r\n", 2) + 2;
	while (p < c->buf + head_len - 2) {
		const char *eol = memmem(p, (size_t)(c->buf + head_len - p),
					 "\r\n", 2);
		size_t ll = (size_t)(eol - p);
		if (ll > 15 && strncasecmp(p, "content-length:", 15) == 0) {
			char num[32];
			size_t vl = ll - 15;
			if (vl >= sizeof num)
				die("bad Content-Length");
			memcpy(num, p + 15, vl);
			num[vl] = '\0';
			char *e;
			len = strtoull(num, &e, 10);
			if (e == num || (*e != '\0' && *e != ' '))
				die("bad Content-Length");
			have_len = true;
		} else if (ll > 18 &&
			   strncasecmp(p, "transfer-encoding:", 18) == 0) {
			const char *v = p + 18;
			while (*v == ' ')
				v++;
			if ((size_t)(p + ll - v) != 7 ||
			    strncasecmp(v, "chunked", 7) != 0)
				die("Transfer-Encoding other than chunked");
			chunked = true;
		}
		p = eol + 2;
	}
	consume(c, head_len);
	if (chunked)
		return chunked_body(c);
	if (!have_len)
		die("response without Content-Length or chunked framing");
	skip_body(c, len);
	return len;
}

/* ---- figures ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void print_series(const char *key, double *v, long n, bool raw)
{
	for (long i = 0; raw && i < n; i++)
		printf("%s_sample_us=%.1f\n", key, v[i]);
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	double sum = 0;
	for (long i = 0; i < n; i++)
		sum += v[i];
	long p50 = (n - 1) / 2, p99 = (long)((double)(n - 1) * 0.99);
	printf("%s_n=%ld\n%s_p50_us=%.1f\n%s_p99_us=%.1f\n%s_max_us=%.1f\n"
	       "%s_mean_us=%.1f\n",
	       key, n, key, v[p50], key, v[p99], key, v[n - 1], key,
	       sum / (double)n);
}

static void run_keepalive(SSL_CTX *ctx, const opts *o)
{
	double *v = calloc((size_t)o->n, sizeof *v);
	if (v == NULL)
		die("out of memory");
	conn c;
	conn_open(&c, ctx, o);
	for (int i = 0; i < WARMUP; i++)
		get(&c, o, o->small);
	for (long i = 0; i < o->n; i++) {
		double t0 = now_us();
		get(&c, o, o->small);
		v[i] = now_us() - t0;
	}
	conn_close(&c);
	print_series("keepalive", v, o->n, o->raw);
	free(v);
}

static void run_conns(SSL_CTX *ctx, const opts *o)
{
	double *v = calloc((size_t)o->n, sizeof *v);
	if (v == NULL)
		die("out of memory");
	conn c;
	double t_all = now_us();
	for (long i = 0; i < o->n; i++) {
		double t0 = now_us();
		conn_open(&c, ctx, o);
		get(&c, o, o->small);
		conn_close(&c);
		v[i] = now_us() - t0;
	}
	t_all = now_us() - t_all;
	printf("conns_per_s=%.1f\n", (double)o->n / (t_all / 1e6));
	print_series("conns", v, o->n, o->raw);
	free(v);
}

static void run_bulk(SSL_CTX *ctx, const opts *o)
{
	double best = 0, *mbs = calloc((size_t)o->n, sizeof *mbs);
	if (mbs == NULL)
		die("out of memory");
	uint64_t bytes = 0;
	for (long i = 0; i < o->n; i++) {
		conn c;
		conn_open(&c, ctx, o);
		double t0 = now_us();
		bytes = get(&c, o, o->big);
		double s = (now_us() - t0) / 1e6;
		conn_close(&c);
		mbs[i] = (double)bytes / 1e6 / s;
		if (mbs[i] > best)
			best = mbs[i];
	}
	qsort(mbs, (size_t)o->n, sizeof *mbs, cmp_double);
	printf("bulk_bytes=%llu\nbulk_runs=%ld\nbulk_median_mbs=%.1f\n"
	       "bulk_best_mbs=%.1f\n",
	       (unsigned long long)bytes, o->n, mbs[(o->n - 1) / 2], best);
	free(mbs);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: httpsload --connect IP:PORT --name NAME --ca FILE"
		" [--proxy IP:PORT] [--small PATH] [--big PATH] [-n N]"
		" [--mode keepalive|conns|bulk] [--raw]"
		" [--header 'Name: value']\n");
	exit(2);
}

int main(int argc, char **argv)
{
	opts o = {.small = "/small",
		  .big = "/big",
		  .mode = "keepalive",
		  .n = 1000};
	bool have_target = false;
	static const struct option lo[] = {
		{"connect", required_argument, NULL, 'c'},
		{"proxy", required_argument, NULL, 'p'},
		{"name", required_argument, NULL, 'H'},
		{"ca", required_argument, NULL, 'a'},
		{"small", required_argument, NULL, 's'},
		{"big", required_argument, NULL, 'b'},
		{"mode", required_argument, NULL, 'm'},
		{"raw", no_argument, NULL, 'r'},
		{"header", required_argument, NULL, 'f'},
		{NULL, 0, NULL, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "n:", lo, NULL)) != -1) {
		switch (ch) {
		case 'c':
			if (parse_addr(optarg, &o.target, &o.port) < 0)
				usage();
			have_target = true;
			break;
		case 'p':
			if (parse_addr(optarg, &o.proxy, NULL) < 0)
				usage();
			o.use_proxy = true;
			break;
		case 'H':
			o.name = optarg;
			break;
		case 'a':
			o.ca = optarg;
			break;
		case 's':
			o.small = optarg;
			break;
		case 'b':
			o.big = optarg;
			break;
		case 'm':
			o.mode = optarg;
			break;
		case 'n':
			o.n = strtol(optarg, NULL, 10);
			break;
		case 'r':
			o.raw = true;
			break;
		case 'f':
			o.header = optarg;
			break;
		default:
			usage();
		}
	}
	if (!have_target || o.name == NULL || o.ca == NULL || o.n < 1 ||
	    o.n > 10000000)
		usage();
	SSL_CTX *ctx = make_ctx(&o);
	if (strcmp(o.mode, "keepalive") == 0)
		run_keepalive(ctx, &o);
	else if (strcmp(o.mode, "conns") == 0)
		run_conns(ctx, &o);
	else if (strcmp(o.mode, "bulk") == 0)
		run_bulk(ctx, &o);
	else
		usage();
	SSL_CTX_free(ctx);
	return 0;
}
