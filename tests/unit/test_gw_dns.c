/* gw/dns: what the guest's stub gets back for each shape of query, and
 * that every query outside the one accepted shape is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gw/dns.h"

typedef struct msg {
	uint8_t b[1024];
	size_t n;
} msg;

static void put8(msg *m, unsigned v)
{
	m->b[m->n++] = (uint8_t)v;
}

static void put16(msg *m, unsigned v)
{
	put8(m, v >> 8);
	put8(m, v & 255);
}

static void header(msg *m, unsigned id, unsigned flags, unsigned qd,
		   unsigned an, unsigned ns, unsigned ar)
{
	m->n = 0;
	put16(m, id);
	put16(m, flags);
	put16(m, qd);
	put16(m, an);
	put16(m, ns);
	put16(m, ar);
}

/* A dotted name as labels (no escapes). */
static void name(msg *m, const char *dotted)
{
	while (*dotted != '\0') {
		const char *dot = strchr(dotted, '.');
		size_t l = dot != NULL ? (size_t)(dot - dotted)
				       : strlen(dotted);
		put8(m, (unsigned)l);
		memcpy(m->b + m->n, dotted, l);
		m->n += l;
		dotted += l + (dot != NULL);
	}
	put8(m, 0);
}

static void query(msg *m, const char *dotted, unsigned qtype)
{
	header(m, 0x1234, 0x0100, 1, 0, 0, 0);
	name(m, dotted);
	put16(m, qtype);
	put16(m, AL_DNS_CLASS_IN);
}

static void opt(msg *m, unsigned size, unsigned version)
{
	put8(m, 0);
	put16(m, AL_DNS_T_OPT);
	put16(m, size);
	put8(m, 0);
	put8(m, version);
	put16(m, 0);
	put16(m, 0);
}

static enum al_dns_verdict parse(const msg *m, al_dns_query *q)
{
	al_err err;
	al_err_clear(&err);
	return al_dns_query_parse(m->b, m->n, q, &err);
}

static unsigned get16(const uint8_t *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

static void test_a_answer(void **state)
{
	(void)state;
	msg m;
	query(&m, "WwW.Example.COM", AL_DNS_T_A);
	al_dns_query q;
	assert_int_equal(parse(&m, &q), AL_DNS_ASK);
	assert_string_equal(q.name, "www.example.com");
	assert_int_equal(q.qtype, AL_DNS_T_A);
	uint8_t out[AL_DNS_ANSWER_MAX];
	size_t len;
	uint32_t addr = 0xc6120001u;
	assert_int_equal(al_dns_answer(&q, AL_DNS_NOERROR, &addr, out,
				       sizeof out, &len, NULL),
			 0);
	assert_int_equal(get16(out), 0x1234);
	unsigned flags = get16(out + 2);
	assert_true(flags & 0x8000);	      /* QR */
	assert_true(flags & 0x0400);	      /* AA */
	assert_true(flags & 0x0100);	      /* RD echoed */
	assert_int_equal(flags & 0xf, 0);     /* NOERROR */
	assert_int_equal(get16(out + 4), 1);  /* QD */
	assert_int_equal(get16(out + 6), 1);  /* AN */
	assert_int_equal(get16(out + 10), 0); /* no OPT asked for */
	/* The question comes back as sent, case and all (0x20 checks). */
	assert_memory_equal(out + 12, m.b + 12, m.n - 12);
	const uint8_t *rr = out + m.n;
	assert_int_equal(get16(rr), 0xc00c); /* name: the question's */
	assert_int_equal(get16(rr + 2), AL_DNS_T_A);
	assert_int_equal(get16(rr + 4), AL_DNS_CLASS_IN);
	assert_int_equal(get16(rr + 6) << 16 | get16(rr + 8), AL_DNS_TTL);
	assert_int_equal(get16(rr + 10), 4);
	assert_memory_equal(rr + 12, "\xc6\x12\x00\x01", 4);
	assert_int_equal(len, m.n + 16);
}

static void test_nodata_nxdomain(void **state)
{
	(void)state;
	static const unsigned types[] = {AL_DNS_T_AAAA, AL_DNS_T_HTTPS,
					 AL_DNS_T_SVCB, 15 /* MX */,
					 16 /* TXT */};
	for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
		msg m;
		query(&m, "pypi.org", types[i]);
		al_dns_query q;
		assert_int_equal(parse(&m, &q), AL_DNS_ASK);
		uint8_t out[AL_DNS_ANSWER_MAX];
		size_t len;
		assert_int_equal(al_dns_answer(&q, AL_DNS_NOERROR, NULL, out,
					       sizeof out, &len, NULL),
				 0);
		assert_int_equal(get16(out + 2) & 0xf, AL_DNS_NOERROR);
		assert_int_equal(get16(out + 6), 0); /* no answer: NODATA */
		assert_int_equal(len, m.n);
		/* An address never answers anything but an A query. */
		uint32_t a = 0xc6120001u;
		assert_int_equal(al_dns_answer(&q, AL_DNS_NOERROR, &a, out,
					       sizeof out, &len, NULL),
				 -1);
	}
	msg m;
	query(&m, "evil.example", AL_DNS_T_A);
	al_dns_query q;
	assert_int_equal(parse(&m, &q), AL_DNS_ASK);
	uint8_t out[AL_DNS_ANSWER_MAX];
	size_t len;
	assert_int_equal(al_dns_answer(&q, AL_DNS_NXDOMAIN, NULL, out,
				       sizeof out, &len, NULL),
			 0);
	assert_int_equal(get16(out + 2) & 0xf, AL_DNS_NXDOMAIN);
	assert_int_equal(get16(out + 6), 0);
	/* Too small a buffer is an error, not an overflow. */
	assert_int_equal(al_dns_answer(&q, AL_DNS_NXDOMAIN, NULL, out, 12, &len,
				       NULL),
			 -1);
}

static void test_edns(void **state)
{
	(void)state;
	msg m;
	query(&m, "example.com", AL_DNS_T_A);
	m.b[11] = 1; /* ARCOUNT */
	opt(&m, 4096, 0);
	al_dns_query q;
	assert_int_equal(parse(&m, &q), AL_DNS_ASK);
	assert_true(q.edns);
	assert_int_equal(q.edns_size, 4096);
	uint8_t out[AL_DNS_ANSWER_MAX];
	size_t len;
	assert_int_equal(al_dns_answer(&q, AL_DNS_NXDOMAIN, NULL, out,
				       sizeof out, &len, NULL),
			 0);
	assert_int_equal(get16(out + 10), 1);
	const uint8_t *o = out + len - 11;
	assert_int_equal(o[0], 0);
	assert_int_equal(get16(o + 1), AL_DNS_T_OPT);
	assert_int_equal(get16(o + 3), AL_DNS_EDNS_SIZE);

	/* An option inside the OPT is fine when it fits exactly. */
	query(&m, "example.com", AL_DNS_T_A);
	m.b[11] = 1;
	put8(&m, 0);
	put16(&m, AL_DNS_T_OPT);
	put16(&m, 1232);
	put16(&m, 0);
	put16(&m, 0);
	put16(&m, 8);  /* rdlen */
	put16(&m, 10); /* COOKIE */
	put16(&m, 4);
	put16(&m, 0xabcd);
	put16(&m, 0xef01);
	assert_int_equal(parse(&m, &q), AL_DNS_ASK);
	m.b[m.n - 9] = 9; /* rdlen past the end */
	assert_int_equal(parse(&m, &q), AL_DNS_REPLY);
	assert_int_equal(q.rcode, AL_DNS_FORMERR);

	/* EDNS version 1: BADVERS, in the OPT's extended rcode. */
	query(&m, "example.com", AL_DNS_T_A);
	m.b[11] = 1;
	opt(&m, 1232, 1);
	assert_int_equal(parse(&m, &q), AL_DNS_REPLY);
	assert_int_equal(q.rcode, AL_DNS_BADVERS);
	assert_int_equal(al_dns_answer(&q, q.rcode, NULL, out, sizeof out, &len,
				       NULL),
			 0);
	assert_int_equal(get16(out + 2) & 0xf, 0);
	assert_int_equal(out[len - 11 + 5], 1); /* 16 >> 4 */
}

static void expect_reply(const msg *m, enum al_dns_rcode rcode)
{
	al_dns_query q;
	enum al_dns_verdict v = parse(m, &q);
	if (v != AL_DNS_REPLY || q.rcode != rcode)
		fail_msg("verdict %d rcode %d, want reply %d", v, q.rcode,
			 rcode);
	uint8_t out[AL_DNS_ANSWER_MAX];
	size_t len;
	assert_int_equal(al_dns_answer(&q, q.rcode, NULL, out, sizeof out, &len,
				       NULL),
			 0);
	assert_int_equal(get16(out), 0x1234);
	assert_int_equal(get16(out + 2) & 0xf, rcode & 0xf);
	assert_int_equal(get16(out + 6), 0);
}

static void test_refused_shapes(void **state)
{
	(void)state;
	msg m;
	/* two questions */
	query(&m, "a.example", AL_DNS_T_A);
	m.b[5] = 2;
	name(&m, "b.example");
	put16(&m, AL_DNS_T_A);
	put16(&m, AL_DNS_CLASS_IN);
	expect_reply(&m, AL_DNS_FORMERR);
	/* zero questions */
	header(&m, 0x1234, 0x0100, 0, 0, 0, 0);
	expect_reply(&m, AL_DNS_FORMERR);
	/* an answer or authority record in a query */
	query(&m, "a.example", AL_DNS_T_A);
	m.b[7] = 1;
	expect_reply(&m, AL_DNS_FORMERR);
	query(&m, "a.example", AL_DNS_T_A);
	m.b[9] = 1;
	expect_reply(&m, AL_DNS_FORMERR);
	/* two additional records, or one that is not an OPT */
	query(&m, "a.example", AL_DNS_T_A);
	m.b[11] = 2;
	opt(&m, 1232, 0);
	opt(&m, 1232, 0);
	expect_reply(&m, AL_DNS_FORMERR);
	query(&m, "a.example", AL_DNS_T_A);
	m.b[11] = 1;
	name(&m, "x");
	put16(&m, AL_DNS_T_A);
	put16(&m, 1);
	put16(&m, 0);
	put16(&m, 0);
	put16(&m, 0);
	expect_reply(&m, AL_DNS_FORMERR);
	/* a compression pointer in the question */
	header(&m, 0x1234, 0x0100, 1, 0, 0, 0);
	put8(&m, 1);
	put8(&m, 'a');
	put16(&m, 0xc00c);
	put16(&m, AL_DNS_T_A);
	put16(&m, 1);
	expect_reply(&m, AL_DNS_FORMERR);
	/* a label of 64 bytes */
	char label[70];
	memset(label, 'a', 64);
	strcpy(label + 64, ".com");
	query(&m, label, AL_DNS_T_A);
	expect_reply(&m, AL_DNS_FORMERR);
	/* a name of 256 bytes on the wire (63.63.63.62: 251 bytes of
	 * labels, 4 length bytes, the root) */
	char longname[300];
	size_t o = 0;
	for (int i = 0; i < 4; i++) {
		memset(longname + o, 'b', 63);
		o += 63;
		longname[o++] = '.';
	}
	longname[o - 2] = '\0';
	query(&m, longname, AL_DNS_T_A);
	expect_reply(&m, AL_DNS_FORMERR);
	/* one byte less: 255 on the wire, 253 as text, the longest name */
	longname[o - 3] = '\0';
	query(&m, longname, AL_DNS_T_A);
	al_dns_query q;
	assert_int_equal(parse(&m, &q), AL_DNS_ASK);
	assert_int_equal(strlen(q.name), 253);
	/* bytes after the question */
	query(&m, "a.example", AL_DNS_T_A);
	put8(&m, 0);
	expect_reply(&m, AL_DNS_FORMERR);
	/* the question cut short */
	query(&m, "a.example", AL_DNS_T_A);
	m.n -= 2;
	expect_reply(&m, AL_DNS_FORMERR);
	query(&m, "a.example", AL_DNS_T_A);
	m.n = 15;
	expect_reply(&m, AL_DNS_FORMERR);
	/* TC or an rcode in a query */
	query(&m, "a.example", AL_DNS_T_A);
	m.b[2] |= 0x02;
	expect_reply(&m, AL_DNS_FORMERR);
	query(&m, "a.example", AL_DNS_T_A);
	m.b[3] |= 0x03;
	expect_reply(&m, AL_DNS_FORMERR);
	/* another opcode (NOTIFY, UPDATE) */
	query(&m, "a.example", AL_DNS_T_A);
	m.b[2] = 0x28; /* opcode 5 */
	expect_reply(&m, AL_DNS_NOTIMP);
	/* CHAOS class, meta types */
	query(&m, "version.bind", 16);
	m.b[m.n - 1] = 3;
	expect_reply(&m, AL_DNS_NOTIMP);
	static const unsigned meta[] = {AL_DNS_T_ANY, AL_DNS_T_AXFR,
					AL_DNS_T_IXFR, AL_DNS_T_OPT};
	for (size_t i = 0; i < sizeof meta / sizeof *meta; i++) {
		query(&m, "pypi.org", meta[i]);
		expect_reply(&m, AL_DNS_NOTIMP);
	}
	query(&m, "pypi.org", 0);
	expect_reply(&m, AL_DNS_FORMERR);
	/* too big to be a stub's query */
	query(&m, "a.example", AL_DNS_T_A);
	m.n = AL_DNS_QUERY_MAX + 1;
	expect_reply(&m, AL_DNS_FORMERR);
}

static void test_not_a_host_name(void **state)
{
	(void)state;
	msg m;
	/* A label with a dot inside must not turn into two labels. */
	header(&m, 0x1234, 0x0100, 1, 0, 0, 0);
	put8(&m, 8);
	memcpy(m.b + m.n, "pypi.org", 8);
	m.n += 8;
	put8(&m, 0);
	put16(&m, AL_DNS_T_A);
	put16(&m, 1);
	al_dns_query q;
	assert_int_equal(parse(&m, &q), AL_DNS_REPLY);
	assert_int_equal(q.rcode, AL_DNS_NXDOMAIN);
	assert_string_equal(q.name, "pypi\\x2eorg");
	assert_true(q.has_question);
	/* Control and high bytes are escaped for the log. */
	header(&m, 0x1234, 0x0100, 1, 0, 0, 0);
	put8(&m, 3);
	put8(&m, 'a');
	put8(&m, 0);
	put8(&m, 0xff);
	put8(&m, 0);
	put16(&m, AL_DNS_T_A);
	put16(&m, 1);
	assert_int_equal(parse(&m, &q), AL_DNS_REPLY);
	assert_int_equal(q.rcode, AL_DNS_NXDOMAIN);
	assert_string_equal(q.name, "a\\x00\\xff");
	/* The root: no name to allow. */
	query(&m, "", AL_DNS_T_A);
	assert_int_equal(parse(&m, &q), AL_DNS_REPLY);
	assert_int_equal(q.rcode, AL_DNS_NXDOMAIN);
	/* Underscores are host-name bytes (SRV-style labels) */
	query(&m, "_x.Example", AL_DNS_T_A);
	assert_int_equal(parse(&m, &q), AL_DNS_ASK);
	assert_string_equal(q.name, "_x.example");
}

static void test_dropped(void **state)
{
	(void)state;
	msg m;
	al_dns_query q;
	query(&m, "a.example", AL_DNS_T_A);
	m.b[2] |= 0x80; /* QR: a response */
	assert_int_equal(parse(&m, &q), AL_DNS_DROP);
	m.n = 11;
	m.b[2] &= 0x7f;
	assert_int_equal(parse(&m, &q), AL_DNS_DROP);
	al_err err;
	assert_int_equal(al_dns_query_parse(NULL, 0, &q, &err), AL_DNS_DROP);
}

static void test_tcp_prefix(void **state)
{
	(void)state;
	uint8_t p[2];
	al_dns_tcp_prefix(300, p);
	assert_int_equal(p[0], 1);
	assert_int_equal(p[1], 44);
	assert_int_equal(al_dns_tcp_len(p), 300);
	al_dns_tcp_prefix(65535, p);
	assert_int_equal(al_dns_tcp_len(p), 65535);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_answer),
		cmocka_unit_test(test_nodata_nxdomain),
		cmocka_unit_test(test_edns),
		cmocka_unit_test(test_refused_shapes),
		cmocka_unit_test(test_not_a_host_name),
		cmocka_unit_test(test_dropped),
		cmocka_unit_test(test_tcp_prefix),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
