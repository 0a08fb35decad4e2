/* Fuzz gateway/gw/dns and the core of gateway/gw/dnsserv: arbitrary bytes as a
 * query from the guest. Whatever they are: no crash, an answer that fits
 * AL_DNS_ANSWER_MAX and echoes the id, an answer that is itself never
 * taken for a query (no loops), a decided name that is canonical, and an
 * A answer whose address maps back to that name.
 *
 * Input: one flags byte (bit 0: the decide callback allows every name,
 * else names of even length; bit 1: the query came over TCP), then the
 * message. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "base/dnsname.h"
#include "gw/dns.h"
#include "gw/dnsserv.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool allow_all;

static void decide(void *arg, const char *name, al_dnsserv_decision *out)
{
	(void)arg;
	char canon[AL_DNS_NAME_MAX];
	if (al_dnsname_canon(name, canon, sizeof canon, NULL) != 0 ||
	    strcmp(canon, name) != 0)
		abort(); /* only canonical names are put to the policy */
	out->allow = allow_all || strlen(name) % 2 == 0;
	memcpy(out->reason, "fuzz", 5);
}

static void check_answer(const al_dns_query *q, const uint8_t *a, size_t n)
{
	if (n < 12 || n > AL_DNS_ANSWER_MAX)
		abort();
	if ((unsigned)(a[0] << 8 | a[1]) != q->id || !(a[2] & 0x80))
		abort();
	al_dns_query back;
	if (al_dns_query_parse(a, n, &back, NULL) != AL_DNS_DROP)
		abort(); /* an answer is never answered */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct event_base *base;
	static al_fakeip *map;
	static al_dnsserv *srv;
	if (base == NULL) {
		base = event_base_new();
		map = al_fakeip_new(AL_FAKEIP_CAP_DEFAULT, NULL);
		al_dnsserv_config cfg = {
			.udp_fd = -1,
			.tcp_fd = -1,
			.map = map,
			.decide = decide,
		};
		srv = al_dnsserv_new(base, &cfg, NULL);
		if (srv == NULL)
			abort();
	}
	if (size < 1)
		return 0;
	allow_all = data[0] & 1;
	bool tcp = data[0] & 2;
	const uint8_t *msg = data + 1;
	size_t len = size - 1;

	al_dns_query q;
	enum al_dns_verdict v = al_dns_query_parse(msg, len, &q, NULL);
	if (memchr(q.name, '\0', sizeof q.name) == NULL)
		abort();
	uint8_t out[AL_DNS_ANSWER_MAX];
	size_t n;
	if (v == AL_DNS_ASK) {
		char canon[AL_DNS_NAME_MAX];
		if (al_dnsname_canon(q.name, canon, sizeof canon, NULL) != 0 ||
		    strcmp(canon, q.name) != 0 || q.qclass != AL_DNS_CLASS_IN ||
		    al_dns_type_is_meta(q.qtype) || !q.has_question)
			abort();
		uint32_t addr = 0xc6120001u;
		bool a = q.qtype == AL_DNS_T_A;
		if (al_dns_answer(&q, AL_DNS_NOERROR, a ? &addr : NULL, out,
				  sizeof out, &n, NULL) != 0)
			abort();
		check_answer(&q, out, n);
		if (al_dns_answer(&q, AL_DNS_NXDOMAIN, NULL, out, sizeof out,
				  &n, NULL) != 0)
			abort();
		check_answer(&q, out, n);
	} else if (v == AL_DNS_REPLY) {
		if (al_dns_answer(&q, q.rcode, NULL, out, sizeof out, &n,
				  NULL) != 0)
			abort();
		check_answer(&q, out, n);
	}

	/* The server's whole path over the same bytes. */
	size_t before = al_fakeip_count(map);
	if (al_dnsserv_handle(srv, msg, len, tcp, out, sizeof out, &n, NULL) !=
	    0)
		abort();
	if (v == AL_DNS_DROP) {
		if (n != 0)
			abort();
		return 0;
	}
	check_answer(&q, out, n);
	unsigned an = (unsigned)(out[6] << 8 | out[7]);
	if (an > 0) {
		/* Only an allowed A query gets an address, and it is the
		 * name's in the map. */
		if (v != AL_DNS_ASK || q.qtype != AL_DNS_T_A || an != 1)
			abort();
		const uint8_t *rr = out + 12 + q.wire_name_len + 4;
		uint32_t addr = (uint32_t)rr[12] << 24 |
				(uint32_t)rr[13] << 16 | (uint32_t)rr[14] << 8 |
				rr[15];
		const char *name = al_fakeip_name(map, addr);
		if (name == NULL || strcmp(name, q.name) != 0)
			abort();
	} else if (al_fakeip_count(map) != before) {
		abort(); /* no address handed out without an answer */
	}
	return 0;
}
