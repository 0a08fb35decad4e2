/* Egress policy decision time: the shipped policies/egress.lua through
 * core/policy (a restricted LuaJIT state, JIT off, count hook and memory
 * window armed per call, the request built as a Lua table, the C rules
 * after it) beside a peer, the same allowlist decision written as a plain
 * C loop (strcmp and suffix compares over the same lists). Each decision
 * is timed on its own; p50/p99 in microseconds, their ratio, and the
 * issue's goal (<= 5 us a decision).
 *
 *   policy [-n decisions] [policy file]   (default 100000, policies/egress.lua) */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "policy/policy.h"

#define GOAL_US 5.0

static const char *const allow_list[] = {
	"api.openai.com", "*.anthropic.com", "example.com",	 "example.org",
	"*.corp.example", "pypi.example",    "docs.example.net", "cdn.example",
};
#define N_ALLOW (sizeof allow_list / sizeof allow_list[0])
static const char *const deny_list[] = {"bad.corp.example"};

/* The shipped policy's lists, as the peer holds them. */
static const char *const registries[] = {
	"deb.debian.org",	  "security.debian.org",
	"registry.npmjs.org",	  "pypi.org",
	"files.pythonhosted.org", "github.com",
	"codeload.github.com",	  "*.githubusercontent.com",
};
static const char *const never[] = {
	"localhost",
	"*.localhost",
	"*.local",
	"*.internal",
	"*.home.arpa",
	"*.lan",
	"metadata.google.internal",
};

static bool peer_match(const char *name, const char *pat)
{
	if (pat[0] == '*' && pat[1] == '.') {
		size_t nl = strlen(name), sl = strlen(pat + 1);
		return nl > sl && strcmp(name + nl - sl, pat + 1) == 0;
	}
	return strcmp(name, pat) == 0;
}

static bool peer_any(const char *name, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (peer_match(name, list[i]))
			return true;
	return false;
}

/* egress.lua's decision and C's rules after it, in plain C. */
static bool peer_decide(const al_egress_req *r)
{
	if (r->mode == AL_NET_NONE)
		return false;
	if (peer_any(r->name, never, sizeof never / sizeof never[0]))
		return false;
	bool port = r->protocol == AL_EGRESS_DNS ||
		    (r->protocol == AL_EGRESS_HTTPS && r->port == 443) ||
		    (r->protocol == AL_EGRESS_HTTP && r->port == 80);
	if (!port)
		return false;
	if (peer_any(r->name, r->deny, r->n_deny))
		return false;
	if (r->mode == AL_NET_OPEN)
		return true;
	if (peer_any(r->name, r->allow, r->n_allow))
		return true;
	return r->build && peer_any(r->name, registries,
				    sizeof registries / sizeof registries[0]);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double pct(const double *sorted, size_t n, double p)
{
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);
	return sorted[i];
}

int main(int argc, char **argv)
{
	size_t n = 100000;
	int opt;
	while ((opt = getopt(argc, argv, "n:")) != -1) {
		if (opt != 'n' || (n = strtoul(optarg, NULL, 10)) == 0) {
			fprintf(stderr,
				"usage: policy [-n decisions] [file]\n");
			return 2;
		}
	}
	const char *path = optind < argc ? argv[optind] : "policies/egress.lua";
	al_err err = {0};
	al_policy *p = al_policy_open(path, &al_policy_egress_kind, NULL, &err);
	if (p == NULL) {
		fprintf(stderr, "policy: %s\n", err.msg);
		return 1;
	}
	static const al_policy_kv meta[] = {{"team", "research"},
					    {"owner", "alice"}};
	al_egress_req base = {
		.port = 443,
		.protocol = AL_EGRESS_HTTPS,
		.sandbox = "sbx-0123456789abcdef",
		.template_name = "python",
		.project = "default",
		.metadata = meta,
		.n_metadata = 2,
		.mode = AL_NET_ALLOWLIST,
		.allow = allow_list,
		.n_allow = N_ALLOW,
		.deny = deny_list,
		.n_deny = 1,
	};
	/* A mix: on the allow list (by suffix and exact), off it, a build
	 * reaching a registry, a tcp port, a deny-listed name. */
	al_egress_req mix[6];
	for (size_t i = 0; i < 6; i++)
		mix[i] = base;
	mix[0].name = "api.corp.example";
	mix[1].name = "cdn.example";
	mix[2].name = "evil.example.com";
	mix[3].name = "files.pythonhosted.org";
	mix[3].build = true;
	mix[4].name = "example.com";
	mix[4].protocol = AL_EGRESS_TCP;
	mix[4].port = 22;
	mix[5].name = "bad.corp.example";

	for (size_t i = 0; i < 6; i++) {
		al_egress_decision d;
		al_policy_egress(p, &mix[i], &d);
		if (d.allow != peer_decide(&mix[i])) {
			fprintf(stderr,
				"policy: the peer disagrees on %s: %s\n",
				mix[i].name, d.reason);
			return 1;
		}
	}

	double *tp = malloc(n * sizeof *tp), *tc = malloc(n * sizeof *tc);
	double *tg = malloc(n * sizeof *tg), *tn = malloc(n * sizeof *tn);
	if (tp == NULL || tc == NULL || tg == NULL || tn == NULL)
		return 1;
	unsigned allowed = 0;
	size_t ng = 0, nn = 0;
	al_policy_stat st;
	al_policy_status(p, &st);
	/* Interleaved, so that both see the same machine noise. The
	 * state's memory, read between decisions (untimed), tells the ones
	 * a GC sweep ran inside (it fell) from the others. */
	for (size_t i = 0; i < n; i++) {
		const al_egress_req *r = &mix[i % 6];
		al_egress_decision d;
		size_t before = st.mem_used;
		double t0 = now_us();
		al_policy_egress(p, r, &d);
		double t1 = now_us();
		bool c = peer_decide(r);
		double t2 = now_us();
		tp[i] = t1 - t0;
		tc[i] = t2 - t1;
		allowed += d.allow + c;
		al_policy_status(p, &st);
		if (st.mem_used < before)
			tg[ng++] = tp[i];
		else
			tn[nn++] = tp[i];
	}
	qsort(tp, n, sizeof *tp, cmp_double);
	qsort(tc, n, sizeof *tc, cmp_double);
	qsort(tg, ng, sizeof *tg, cmp_double);
	qsort(tn, nn, sizeof *tn, cmp_double);
	double p50 = pct(tp, n, 0.5), p99 = pct(tp, n, 0.99);
	double c50 = pct(tc, n, 0.5), c99 = pct(tc, n, 0.99);
	al_policy_status(p, &st);
	printf("\npolicy decision time: %zu decisions (%s, a mix of 6"
	       " requests, %u allowed of %zu)\n",
	       n, path, allowed / 2, n);
	printf("  %-34s p50 %7.2f us  p99 %7.2f us\n",
	       "core/policy (LuaJIT, JIT off)", p50, p99);
	printf("  %-34s p50 %7.2f us  p99 %7.2f us\n",
	       "peer: plain C loop over the lists", c50, c99);
	printf("  ratio policy/peer: p50 %.1fx  p99 %.1fx\n",
	       c50 > 0 ? p50 / c50 : 0, c99 > 0 ? p99 / c99 : 0);
	if (ng > 0 && nn > 0)
		printf("  with a GC sweep inside: %zu decisions (%.1f%%), p50"
		       " %.2f us, p99 %.2f us; without: p50 %.2f us, p99 %.2f"
		       " us\n",
		       ng, 100.0 * (double)ng / (double)n, pct(tg, ng, 0.5),
		       pct(tg, ng, 0.99), pct(tn, nn, 0.5), pct(tn, nn, 0.99));
	printf("  Lua state: %zu bytes in use, peak %zu; %lu policy"
	       " failures\n",
	       st.mem_used, st.mem_peak, st.failures);
	printf("  goal <= %.0f us a decision: p50 %s, p99 %s\n", GOAL_US,
	       p50 <= GOAL_US ? "met" : "NOT met",
	       p99 <= GOAL_US ? "met" : "NOT met");
	printf("  (timer: clock_gettime around each decision; a shared"
	       " machine's figures are noisy)\n");
	free(tp);
	free(tc);
	free(tg);
	free(tn);
	al_policy_close(p);
	return 0;
}
