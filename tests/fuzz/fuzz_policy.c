/* Fuzz core/policy: arbitrary bytes as a policy's source and as the
 * fields of an egress request. Whatever they are: no crash, a decision
 * every time, and the rules C applies after the policy always hold (mode
 * none denies, the deny list wins, a sandbox in allowlist mode reaches
 * only its allow list).
 *
 * Input: one flags byte, two port bytes, then fields separated by NUL:
 *   [source]  when flags & 1 (else the shipped policies/egress.lua)
 *   name method path sandbox template project meta-key meta-value
 *   allow-list deny-list     (lists: entries separated by ',')
 * flags bits 1-2 the protocol, 3-4 the mode, 5 build. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dnsname.h"
#include "base/log.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ITEMS 16

static al_policy *shipped;
static const al_policy_limits limits = {2u << 20, 1u << 20, 3000};

static size_t split_list(char *s, const char **out)
{
	size_t n = 0;
	if (*s == '\0')
		return 0;
	for (char *tok = s; tok != NULL && n < MAX_ITEMS;) {
		char *comma = strchr(tok, ',');
		if (comma != NULL)
			*comma = '\0';
		out[n++] = tok;
		tok = comma != NULL ? comma + 1 : NULL;
	}
	return n;
}

static void check(al_policy *p, const al_egress_req *r)
{
	al_egress_decision d;
	memset(&d, 0xa5, sizeof d);
	al_policy_egress(p, r, &d);
	if (memchr(d.reason, '\0', sizeof d.reason) == NULL)
		abort();
	for (const char *c = d.reason; *c; c++)
		if (*c < 0x20 || *c > 0x7e)
			abort();
	if (!d.allow)
		return;
	if (r->mode == AL_NET_NONE || (unsigned)r->mode >= AL_NET_MODE_MAX)
		abort();
	for (size_t i = 0; i < r->n_deny; i++)
		if (al_dnsname_match(r->name, r->deny[i]))
			abort();
	if (r->mode == AL_NET_ALLOWLIST && !r->build) {
		bool listed = false;
		for (size_t i = 0; i < r->n_allow; i++)
			listed |= al_dnsname_match(r->name, r->allow[i]);
		if (!listed)
			abort();
	}
	char canon[256];
	if (al_dnsname_canon(r->name, canon, sizeof canon, NULL) != 0 ||
	    strcmp(canon, r->name) != 0)
		abort(); /* a name that is not canonical never passes */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (shipped == NULL) {
		/* Lines of failing policies would be most of the output. */
		al_log_init("fuzz_policy", AL_LOG_ERROR);
		shipped = al_policy_open("policies/egress.lua",
					 &al_policy_egress_kind, &limits, NULL);
		if (shipped == NULL)
			abort();
	}
	if (size < 3)
		return 0;
	uint8_t flags = data[0];
	unsigned port = (unsigned)data[1] << 8 | data[2];
	char *buf = malloc(size - 3 + 1);
	if (buf == NULL)
		return 0;
	memcpy(buf, data + 3, size - 3);
	buf[size - 3] = '\0';
	char *end = buf + (size - 3);
	char *f[11] = {0};
	char *cur = buf;
	for (size_t i = 0; i < 11; i++) {
		f[i] = cur;
		if (cur < end)
			cur += strlen(cur) + 1;
		if (cur > end)
			cur = end; /* the rest are "" */
	}
	bool own = flags & 1;
	char **fld = own ? f + 1 : f;
	const char *allow[MAX_ITEMS], *deny[MAX_ITEMS];
	al_policy_kv meta = {fld[6], fld[7]};
	al_egress_req r = {
		.name = fld[0],
		.port = port,
		.protocol = (enum al_egress_proto)((flags >> 1) & 3),
		.method = fld[1],
		.path = fld[2],
		.sandbox = fld[3],
		.template_name = fld[4],
		.project = fld[5],
		.metadata = &meta,
		.n_metadata = 1,
		.mode = (enum al_net_mode)((flags >> 3) & 3),
		.allow = allow,
		.deny = deny,
		.build = flags & 32,
	};
	r.n_allow = split_list(fld[8], allow);
	r.n_deny = split_list(fld[9], deny);
	al_policy *p = shipped;
	if (own) {
		p = al_policy_open_source("fuzz.lua", f[0], strlen(f[0]),
					  &al_policy_egress_kind, &limits,
					  NULL);
		if (p == NULL) {
			free(buf);
			return 0;
		}
	}
	check(p, &r);
	/* The same policy answers again after whatever that was. */
	r.name = "example.com";
	check(p, &r);
	if (own)
		al_policy_close(p);
	free(buf);
	return 0;
}
