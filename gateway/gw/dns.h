/* gw/dns: the strict DNS wire parser and answer builder of the gateway's
 * DNS server (RFC 1035, EDNS per RFC 6891).
 *
 * The guest is hostile, so a query is accepted only in the one shape a
 * stub resolver sends: QR=0, opcode QUERY, QDCOUNT 1, ANCOUNT 0, NSCOUNT
 * 0, ARCOUNT 0 or 1 where the one is an EDNS OPT at the root; the name
 * uncompressed (no pointers), labels 1-63 bytes, 255 bytes at most on the
 * wire; no bytes after the last record. The gateway is the authority of
 * the guest's whole view, so it never forwards a query: it answers
 *   A      of an allowed name:  one synthetic address (AL_DNS_TTL);
 *   AAAA, HTTPS (65), SVCB (64) and every other data type of an allowed
 *          name: NODATA (NOERROR, no answer), so no IPv6 and no ECH
 *          config reach the guest;
 *   the meta types (ANY 255, AXFR 252, IXFR 251, MAILA/MAILB, OPT):
 *          NOTIMP, whatever the name;
 *   a name not allowed: NXDOMAIN (whatever the type);
 *   QCLASS other than IN (CHAOS version.bind...): NOTIMP;
 *   a malformed query whose header can be read (12 bytes, QR=0):
 *          FORMERR (NOTIMP for another opcode), else no answer.
 * Pure functions, no allocation. */
#ifndef AL_GW_DNS_H
#define AL_GW_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* The largest query accepted (UDP or TCP): a single question with an OPT
 * is under 300 bytes; more is not a stub's query. */
#define AL_DNS_QUERY_MAX 512
/* Every answer the builder makes fits here (header, question of <=255
 * bytes, one A record, one OPT). */
#define AL_DNS_ANSWER_MAX 512
/* The EDNS UDP payload size the gateway advertises. */
#define AL_DNS_EDNS_SIZE 1232
/* TTL of synthetic A records: short, so a guest re-asks after a policy
 * change (the address itself never changes for the sandbox's life). */
#define AL_DNS_TTL 60
/* A canonical name and its NUL (al_dnsname_canon: 253 bytes). */
#define AL_DNS_NAME_MAX 254
#define AL_DNS_WIRE_NAME_MAX 255

enum al_dns_type {
	AL_DNS_T_A = 1,
	AL_DNS_T_AAAA = 28,
	AL_DNS_T_OPT = 41,
	AL_DNS_T_SVCB = 64,
	AL_DNS_T_HTTPS = 65,
	AL_DNS_T_IXFR = 251,
	AL_DNS_T_AXFR = 252,
	AL_DNS_T_MAILB = 253,
	AL_DNS_T_MAILA = 254,
	AL_DNS_T_ANY = 255,
};
#define AL_DNS_CLASS_IN 1

enum al_dns_rcode {
	AL_DNS_NOERROR = 0,
	AL_DNS_FORMERR = 1,
	AL_DNS_SERVFAIL = 2,
	AL_DNS_NXDOMAIN = 3,
	AL_DNS_NOTIMP = 4,
	AL_DNS_REFUSED = 5,
	AL_DNS_BADVERS = 16, /* extended (EDNS) rcode */
};

/* What al_dns_query_parse found. */
enum al_dns_verdict {
	/* A well-formed question for a canonical name: decide, then
	 * al_dns_answer. */
	AL_DNS_ASK,
	/* Well-formed, answered the same whatever the policy says: q->rcode
	 * (NXDOMAIN for a name that is no hostname, NOTIMP for a meta type,
	 * a class or an opcode we do not serve, BADVERS for EDNS > 0,
	 * FORMERR for a malformed body behind a readable header). */
	AL_DNS_REPLY,
	/* Shorter than a header, or a response (QR=1): no answer at all
	 * (never answer an answer: that makes loops). */
	AL_DNS_DROP,
};

typedef struct al_dns_query {
	uint16_t id;
	uint16_t opcode;
	bool rd;	   /* recursion desired, echoed */
	bool has_question; /* the question below can be echoed */
	bool edns;	   /* an OPT record came: the answer carries one */
	uint16_t qtype, qclass;
	uint16_t edns_size;
	/* AL_DNS_REPLY: the rcode to answer with. */
	enum al_dns_rcode rcode;
	/* Canonical (lowercase, no trailing dot) when AL_DNS_ASK; else a
	 * printable rendering for the log ('\\' escapes, may be ""). */
	char name[AL_DNS_NAME_MAX * 4 + 1];
	/* The question's name as it came (case kept: clients that randomise
	 * case check the echo). */
	uint8_t wire_name[AL_DNS_WIRE_NAME_MAX];
	size_t wire_name_len;
} al_dns_query;

/* Parse one query message (without TCP's length prefix). Always fills
 * q as far as it could read it; err says why for REPLY and DROP. */
enum al_dns_verdict al_dns_query_parse(const uint8_t *msg, size_t len,
				       al_dns_query *q, al_err *err);

/* Build the answer to q in out (cap >= AL_DNS_ANSWER_MAX is always
 * enough): rcode, plus one A record of addr (host order) when rcode is
 * NOERROR and addr != NULL; the question echoed when q has one; an OPT
 * when q had one. Header: QR, AA and RA set, RD echoed. 0 and *len; -1
 * (AL_EINVAL) when out is too small. */
int al_dns_answer(const al_dns_query *q, enum al_dns_rcode rcode,
		  const uint32_t *addr, uint8_t *out, size_t cap, size_t *len,
		  al_err *err);

/* True for the meta query types the server never answers with data. */
bool al_dns_type_is_meta(uint16_t qtype);

/* ---- TCP framing (RFC 1035 4.2.2, RFC 7766): a 2-byte length, big
 * endian, before each message ---- */

#define AL_DNS_TCP_PREFIX 2
/* The length a 2-byte prefix announces. */
size_t al_dns_tcp_len(const uint8_t prefix[AL_DNS_TCP_PREFIX]);
/* Write the prefix of a message of len bytes (len <= 65535). */
void al_dns_tcp_prefix(size_t len, uint8_t prefix[AL_DNS_TCP_PREFIX]);

#endif
