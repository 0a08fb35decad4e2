/* Response masking speed: gateway/gw/credmask (the gateway's masker of a
 * credential's value in every encoding) over bodies of four kinds,
 * beside a peer, the same bytes copied through the same 16 KiB pieces
 * (what an unmasked body costs at least). Kinds: random bytes (a
 * download), ASCII text, JSON-quoted base64 strings of 1,000 characters
 * (API answers), and one base64 run longer than every piece (an encoded
 * file). Rounds alternate masker and copy; median MB/s of each, ratio.
 *
 *   credmask [-m MiB per kind] [-r rounds]   (default 32, 5) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gw/credmask.h"

#define PIECE 16384
#define ROUNDS_MAX 64

static const char b64[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

typedef struct sink {
	char *p;
	size_t len;
} sink;

static void to_sink(void *arg, const char *p, size_t n)
{
	sink *s = arg;
	memcpy(s->p + s->len, p, n);
	s->len += n;
}

static void fill(char *buf, size_t n, int kind)
{
	uint64_t x = 0x9e3779b97f4a7c15u;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		unsigned r = (unsigned)(x >> 24);
		switch (kind) {
		case 0:
			buf[i] = (char)r;
			break;
		case 1:
			buf[i] = " etaoinshrdlucmfwypvbgkjqxz.,\n\"{}"[r % 34];
			break;
		case 2:
			buf[i] = i % 1004 < 2 || i % 1004 > 1001
					 ? "\":,\""[i % 1004 % 4]
					 : b64[r % 64];
			break;
		default:
			buf[i] = i % 77 == 76 ? '\n' : b64[r % 64];
		}
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	size_t mib = 32;
	int rounds = 5, opt;
	while ((opt = getopt(argc, argv, "m:r:")) != -1) {
		if (opt == 'm')
			mib = strtoul(optarg, NULL, 10);
		else if (opt == 'r')
			rounds = atoi(optarg);
		else {
			fprintf(stderr,
				"usage: credmask [-m MiB] [-r rounds]\n");
			return 2;
		}
	}
	if (mib == 0 || rounds < 1 || rounds > ROUNDS_MAX) {
		fprintf(stderr, "credmask: -m >= 1, -r 1..%d\n", ROUNDS_MAX);
		return 2;
	}
	size_t n = mib << 20;
	char *in = malloc(n), *out = malloc(n);
	if (in == NULL || out == NULL) {
		fprintf(stderr, "credmask: out of memory\n");
		return 1;
	}
	/* The bench's credential and a second one, as a gateway holds them. */
	al_credmask_value v[] = {{"bp_0123456789abcdefghijklmnopqrstuv", 35},
				 {"ghp_S3cr3t/Value+42", 19}};
	al_err err;
	al_credmask *m = al_credmask_new(v, 2, &err);
	if (m == NULL) {
		fprintf(stderr, "credmask: %s\n", err.msg);
		return 1;
	}
	static const char *const kinds[] = {"random bytes", "ascii text",
					    "json base64 strings",
					    "one long base64 run"};
	printf("\nbench: response masking (bench/credmask.c), %zu MiB per kind"
	       " in %d KiB pieces, %d rounds; peer: the same pieces copied\n",
	       mib, PIECE / 1024, rounds);
	printf("%-22s %12s %12s %8s\n", "body", "mask MB/s", "copy MB/s",
	       "ratio");
	for (int k = 0; k < 4; k++) {
		fill(in, n, k);
		double masked[ROUNDS_MAX], copied[ROUNDS_MAX];
		for (int r = 0; r < rounds; r++) {
			sink s = {out, 0};
			double t0 = now();
			for (size_t i = 0; i < n; i += PIECE) {
				size_t len = n - i < PIECE ? n - i : PIECE;
				if (i + len == n)
					al_credmask_feed_end(m, in + i, len,
							     to_sink, &s);
				else
					al_credmask_feed(m, in + i, len,
							 to_sink, &s);
			}
			double t1 = now();
			if (s.len != n || memcmp(in, out, n) != 0) {
				fprintf(stderr,
					"credmask: %s came out changed\n",
					kinds[k]);
				return 1;
			}
			s.len = 0;
			for (size_t i = 0; i < n; i += PIECE)
				to_sink(&s, in + i,
					n - i < PIECE ? n - i : PIECE);
			double t2 = now();
			masked[r] = (double)n / (t1 - t0) / 1e6;
			copied[r] = (double)n / (t2 - t1) / 1e6;
		}
		qsort(masked, (size_t)rounds, sizeof *masked, cmp_double);
		qsort(copied, (size_t)rounds, sizeof *copied, cmp_double);
		double a = masked[rounds / 2], b = copied[rounds / 2];
		printf("%-22s %12.0f %12.0f %7.3fx\n", kinds[k], a, b, a / b);
	}
	al_credmask_free(m);
	free(in);
	free(out);
	return 0;
}
