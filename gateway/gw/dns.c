/* gw/dns: strict single-question DNS query parser and answer builder. */
#include <stdio.h>
#include <string.h>

#include "base/dnsname.h"
#include "gw/dns.h"

#define HDR_LEN 12
#define F_QR 0x8000u
#define F_AA 0x0400u
#define F_TC 0x0200u
#define F_RD 0x0100u
#define F_RA 0x0080u
#define OPCODE_QUERY 0
#define LABEL_MAX 63

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v & 0xffffu);
}

bool al_dns_type_is_meta(uint16_t qtype)
{
	return qtype == AL_DNS_T_OPT || qtype >= AL_DNS_T_IXFR;
}

static bool host_byte(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* The wire name (validated: labels, root) as text. Sets *hostname when
 * every byte may be in a host name (the text is then plain dotted). */
static void render_name(const uint8_t *w, size_t wlen, char *out,
			bool *hostname)
{
	size_t o = 0, i = 0;
	*hostname = true;
	while (i < wlen && w[i] != 0) {
		size_t l = w[i++];
		if (o > 0)
			out[o++] = '.';
		for (size_t k = 0; k < l; k++, i++) {
			uint8_t c = w[i];
			if (host_byte(c)) {
				out[o++] = (char)c;
				continue;
			}
			*hostname = false;
			if (c > 0x20 && c < 0x7f && c != '\\' && c != '.') {
				out[o++] = (char)c;
			} else {
				snprintf(out + o, 5, "\\x%02x", c);
				o += 4;
			}
		}
	}
	out[o] = '\0';
	if (o == 0)
		*hostname = false; /* the root */
}

/* The question's name at msg[*off]: uncompressed labels of 1-63 bytes,
 * at most 255 bytes with the root label. */
static int parse_name(const uint8_t *msg, size_t len, size_t *off,
		      al_dns_query *q, al_err *err)
{
	size_t i = *off, start = i;
	for (;;) {
		if (i >= len)
			return al_err_set(err, AL_EINVAL, 0,
					  "dns: name runs past the message");
		uint8_t l = msg[i];
		if ((l & 0xc0) != 0)
			return al_err_set(err, AL_EINVAL, 0,
					  "dns: compressed or extended label"
					  " in the question");
		if (i - start + 1 + l > AL_DNS_WIRE_NAME_MAX)
			return al_err_set(err, AL_EINVAL, 0,
					  "dns: name longer than 255 bytes");
		i++;
		if (l == 0)
			break;
		if (l > len - i)
			return al_err_set(err, AL_EINVAL, 0,
					  "dns: label runs past the message");
		i += l;
	}
	q->wire_name_len = i - start;
	memcpy(q->wire_name, msg + start, q->wire_name_len);
	*off = i;
	return 0;
}

/* An OPT record (RFC 6891 6.1.2) at msg[*off]: root owner, type 41,
 * options that exactly fill its RDATA. Sets q->edns, q->edns_size; the
 * version through *version. */
static int parse_opt(const uint8_t *msg, size_t len, size_t *off,
		     al_dns_query *q, unsigned *version, al_err *err)
{
	size_t i = *off;
	if (len - i < 11)
		return al_err_set(err, AL_EINVAL, 0,
				  "dns: additional record truncated");
	if (msg[i] != 0 || get16(msg + i + 1) != AL_DNS_T_OPT)
		return al_err_set(err, AL_EINVAL, 0,
				  "dns: additional record that is not an"
				  " EDNS OPT at the root");
	q->edns = true;
	q->edns_size = get16(msg + i + 3);
	*version = msg[i + 6];
	size_t rdlen = get16(msg + i + 9);
	i += 11;
	if (rdlen > len - i)
		return al_err_set(err, AL_EINVAL, 0,
				  "dns: OPT data runs past the message");
	size_t end = i + rdlen;
	while (i < end) {
		if (end - i < 4)
			return al_err_set(err, AL_EINVAL, 0,
					  "dns: OPT option truncated");
		size_t olen = get16(msg + i + 2);
		i += 4;
		if (olen > end - i)
			return al_err_set(err, AL_EINVAL, 0,
					  "dns: OPT option runs past its"
					  " record");
		i += olen;
	}
	*off = i;
	return 0;
}

static enum al_dns_verdict reply(al_dns_query *q, enum al_dns_rcode rcode)
{
	q->rcode = rcode;
	return AL_DNS_REPLY;
}

enum al_dns_verdict al_dns_query_parse(const uint8_t *msg, size_t len,
				       al_dns_query *q, al_err *err)
{
	memset(q, 0, sizeof *q);
	if (msg == NULL || len < HDR_LEN) {
		al_err_set(err, AL_EINVAL, 0, "dns: shorter than a header");
		return AL_DNS_DROP;
	}
	unsigned flags = get16(msg + 2);
	q->id = get16(msg);
	q->opcode = (uint16_t)((flags >> 11) & 0xfu);
	q->rd = (flags & F_RD) != 0;
	if (flags & F_QR) {
		al_err_set(err, AL_EINVAL, 0, "dns: a response, not a query");
		return AL_DNS_DROP;
	}
	if (q->opcode != OPCODE_QUERY) {
		al_err_set(err, AL_EINVAL, 0, "dns: opcode %u not served",
			   q->opcode);
		return reply(q, AL_DNS_NOTIMP);
	}
	if (len > AL_DNS_QUERY_MAX) {
		al_err_set(err, AL_EINVAL, 0, "dns: query of %zu bytes", len);
		return reply(q, AL_DNS_FORMERR);
	}
	if ((flags & F_TC) || (flags & 0xfu) != 0) {
		al_err_set(err, AL_EINVAL, 0,
			   "dns: truncated query or rcode set");
		return reply(q, AL_DNS_FORMERR);
	}
	unsigned qd = get16(msg + 4), an = get16(msg + 6), ns = get16(msg + 8),
		 ar = get16(msg + 10);
	if (qd != 1 || an != 0 || ns != 0 || ar > 1) {
		al_err_set(err, AL_EINVAL, 0,
			   "dns: sections %u/%u/%u/%u (want one question,"
			   " at most one OPT)",
			   qd, an, ns, ar);
		return reply(q, AL_DNS_FORMERR);
	}
	size_t off = HDR_LEN;
	if (parse_name(msg, len, &off, q, err) != 0)
		return reply(q, AL_DNS_FORMERR);
	if (len - off < 4) {
		al_err_set(err, AL_EINVAL, 0, "dns: question truncated");
		return reply(q, AL_DNS_FORMERR);
	}
	q->qtype = get16(msg + off);
	q->qclass = get16(msg + off + 2);
	off += 4;
	bool hostname;
	render_name(q->wire_name, q->wire_name_len, q->name, &hostname);
	if (q->qtype == 0) {
		al_err_set(err, AL_EINVAL, 0, "dns: query type 0");
		return reply(q, AL_DNS_FORMERR);
	}
	q->has_question = true;
	unsigned version = 0;
	if (ar == 1 && parse_opt(msg, len, &off, q, &version, err) != 0)
		return reply(q, AL_DNS_FORMERR);
	if (off != len) {
		al_err_set(err, AL_EINVAL, 0,
			   "dns: %zu bytes after the last record", len - off);
		return reply(q, AL_DNS_FORMERR);
	}
	if (version != 0) {
		al_err_set(err, AL_EINVAL, 0, "dns: EDNS version %u", version);
		return reply(q, AL_DNS_BADVERS);
	}
	if (q->qclass != AL_DNS_CLASS_IN) {
		al_err_set(err, AL_EINVAL, 0, "dns: class %u not served",
			   q->qclass);
		return reply(q, AL_DNS_NOTIMP);
	}
	if (al_dns_type_is_meta(q->qtype)) {
		al_err_set(err, AL_EINVAL, 0, "dns: meta type %u not served",
			   q->qtype);
		return reply(q, AL_DNS_NOTIMP);
	}
	char canon[AL_DNS_NAME_MAX];
	if (!hostname ||
	    al_dnsname_canon(q->name, canon, sizeof canon, err) != 0) {
		if (hostname)
			al_err_wrap(err, "dns");
		else
			al_err_set(err, AL_EINVAL, 0,
				   "dns: name is not a host name");
		return reply(q, AL_DNS_NXDOMAIN);
	}
	memcpy(q->name, canon, strlen(canon) + 1);
	return AL_DNS_ASK;
}

int al_dns_answer(const al_dns_query *q, enum al_dns_rcode rcode,
		  const uint32_t *addr, uint8_t *out, size_t cap, size_t *len,
		  al_err *err)
{
	bool with_a = addr != NULL && rcode == AL_DNS_NOERROR;
	if (with_a && (!q->has_question || q->qtype != AL_DNS_T_A ||
		       q->qclass != AL_DNS_CLASS_IN))
		return al_err_set(err, AL_EINVAL, 0,
				  "dns: an address answers only an A query");
	if ((unsigned)rcode > 15 && !q->edns)
		return al_err_set(err, AL_EINVAL, 0, "dns: rcode %u needs EDNS",
				  (unsigned)rcode);
	size_t need = HDR_LEN + (q->has_question ? q->wire_name_len + 4 : 0) +
		      (with_a ? 16 : 0) + (q->edns ? 11 : 0);
	if (need > cap)
		return al_err_set(err, AL_EINVAL, 0,
				  "dns: answer of %zu bytes, room for %zu",
				  need, cap);
	unsigned flags = F_QR | (unsigned)q->opcode << 11 | F_AA | F_RA |
			 (q->rd ? F_RD : 0) | ((unsigned)rcode & 0xfu);
	put16(out, q->id);
	put16(out + 2, flags);
	put16(out + 4, q->has_question ? 1 : 0);
	put16(out + 6, with_a ? 1 : 0);
	put16(out + 8, 0);
	put16(out + 10, q->edns ? 1 : 0);
	size_t o = HDR_LEN;
	if (q->has_question) {
		memcpy(out + o, q->wire_name, q->wire_name_len);
		o += q->wire_name_len;
		put16(out + o, q->qtype);
		put16(out + o + 2, q->qclass);
		o += 4;
	}
	if (with_a) {
		put16(out + o, 0xc000u | HDR_LEN); /* the question's name */
		put16(out + o + 2, AL_DNS_T_A);
		put16(out + o + 4, AL_DNS_CLASS_IN);
		put32(out + o + 6, AL_DNS_TTL);
		put16(out + o + 10, 4);
		put32(out + o + 12, *addr);
		o += 16;
	}
	if (q->edns) {
		out[o] = 0; /* root */
		put16(out + o + 1, AL_DNS_T_OPT);
		put16(out + o + 3, AL_DNS_EDNS_SIZE);
		/* extended rcode (upper 8 bits), version 0, no flags */
		put32(out + o + 5, ((uint32_t)rcode >> 4) << 24);
		put16(out + o + 9, 0);
		o += 11;
	}
	*len = o;
	return 0;
}

size_t al_dns_tcp_len(const uint8_t prefix[AL_DNS_TCP_PREFIX])
{
	return get16(prefix);
}

void al_dns_tcp_prefix(size_t len, uint8_t prefix[AL_DNS_TCP_PREFIX])
{
	put16(prefix, (unsigned)(len & 0xffffu));
}
