/* gw/credscan: one prefix matcher per gw/credcodec view. */
#include "gw/credscan.h"

#include <string.h>

static const char prefix[] = AL_CREDSCAN_PREFIX;

bool al_credscan_name_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

static unsigned char lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

static void report(al_credscan *s, al_credscan_match *m)
{
	m->hit.name[m->nlen] = '\0';
	m->hit.how = m->how;
	s->hits++;
	if (s->cb != NULL)
		s->cb(s->arg, &m->hit);
	m->pos = 0;
	m->how = 0;
}

static void match_byte(al_credscan *s, al_credscan_match *m, unsigned char c,
		       unsigned flags)
{
	if (m->pos == AL_CREDSCAN_PREFIX_LEN) {
		if (al_credscan_name_char(c)) {
			if (m->nlen < AL_CREDSCAN_NAME_MAX)
				m->hit.name[m->nlen++] = (char)c;
			else
				m->hit.truncated = true;
			m->how |= flags;
			return;
		}
		report(s, m);
	}
	/* 'a' is in the prefix only at its start: a mismatch restarts. */
	if (lower(c) != (unsigned char)prefix[m->pos]) {
		m->pos = 0;
		m->how = 0;
		if (lower(c) != (unsigned char)prefix[0])
			return;
	}
	if (m->pos == 0)
		m->how = 0;
	m->how |= flags |
		  (c != (unsigned char)prefix[m->pos] ? AL_CREDSCAN_CASE : 0);
	if (++m->pos == AL_CREDSCAN_PREFIX_LEN) {
		m->nlen = 0;
		m->hit.truncated = false;
	}
}

static void match_break(al_credscan *s, al_credscan_match *m)
{
	if (m->pos == AL_CREDSCAN_PREFIX_LEN)
		report(s, m);
	m->pos = 0;
	m->how = 0;
}

/* Views: m[0] unescape, m[1 + k] base64 phase k. The callbacks get the
 * matcher through a small context. */
typedef struct view_ctx {
	al_credscan *s;
	al_credscan_match *m;
} view_ctx;

static void on_emit(void *arg, unsigned char c, uint64_t at, unsigned flags)
{
	(void)at;
	view_ctx *v = arg;
	match_byte(v->s, v->m, c, flags);
}

static void on_break(void *arg)
{
	view_ctx *v = arg;
	match_break(v->s, v->m);
}

void al_credscan_init(al_credscan *s, al_credscan_cb cb, void *arg)
{
	*s = (al_credscan){.cb = cb, .arg = arg};
	al_credcodec_unescape_init(&s->un);
	for (unsigned k = 0; k < AL_CREDCODEC_B64_PHASES; k++)
		al_credcodec_b64_init(&s->b64[k], k);
}

/* The prefix ends in ':', which the unescape view reads from ':' or an
 * escape ('%' or '\\'): a whole stream without any of them gives that
 * view nothing to find. */
static bool unescape_may_hit(const char *buf, size_t len)
{
	return memchr(buf, ':', len) != NULL || memchr(buf, '%', len) != NULL ||
	       memchr(buf, '\\', len) != NULL;
}

static void scan(al_credscan *s, const char *buf, size_t len, bool last)
{
	view_ctx un = {s, &s->m[0]};
	view_ctx b[AL_CREDCODEC_B64_PHASES];
	for (unsigned k = 0; k < AL_CREDCODEC_B64_PHASES; k++)
		b[k] = (view_ctx){s, &s->m[1 + k]};
	bool unescape = !(last && s->off == 0) || unescape_may_hit(buf, len);
	for (size_t i = 0; i < len; i++) {
		uint64_t at = s->off + i;
		if (unescape)
			al_credcodec_unescape_byte(&s->un,
						   (unsigned char)buf[i], at,
						   on_emit, &un);
		if (!al_credcodec_b64_gate_pass(
			    &s->gate, buf, i, len, last,
			    AL_CREDCODEC_B64_RUN_MIN(AL_CREDSCAN_PREFIX_LEN),
			    NULL, at))
			continue;
		for (unsigned k = 0; k < AL_CREDCODEC_B64_PHASES; k++)
			al_credcodec_b64_byte(&s->b64[k], (unsigned char)buf[i],
					      at, on_emit, on_break, &b[k]);
	}
	s->off += len;
}

void al_credscan_feed(al_credscan *s, const char *buf, size_t len)
{
	scan(s, buf, len, false);
}

void al_credscan_last(al_credscan *s, const char *buf, size_t len)
{
	scan(s, buf, len, true);
	al_credscan_end(s);
}

void al_credscan_end(al_credscan *s)
{
	view_ctx un = {s, &s->m[0]};
	al_credcodec_unescape_end(&s->un, on_emit, &un);
	match_break(s, &s->m[0]);
	for (unsigned k = 0; k < AL_CREDCODEC_B64_PHASES; k++) {
		view_ctx b = {s, &s->m[1 + k]};
		al_credcodec_b64_end(&s->b64[k], on_break, &b);
		match_break(s, &s->m[1 + k]);
	}
}

unsigned long al_credscan_hits(const al_credscan *s)
{
	return s->hits;
}
