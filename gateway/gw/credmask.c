/* gw/credmask: KMP matchers of every value over the gw/credcodec views,
 * and a ring of the raw bytes not yet released. The views are what costs
 * per byte, so shortcuts skip work that cannot find anything: a byte
 * that starts no value while no match is open is not fed to the raw and
 * unescape matchers, and a base64 run (seen whole in the piece being
 * fed) too short to decode the shortest value, or holding none of the
 * values' base64 cores (gw/credcodec), is not fed to the base64
 * decoders; both leave every matcher as reading the byte would have.
 * Such bytes are found a stretch at a time (settled_prefix: a table
 * lookup a byte, one branch per eight), not walked one by one; in a run
 * longer than the piece the decoders pass over what lies before the
 * next core (skip_ahead). A
 * head's field (al_credmask_string) shorter than every value is left as
 * it is, and one without an escape or a run that may decode a value is
 * searched for the plain values only (every other view of it is itself
 * or too short). */
#include "gw/credmask.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gw/credcodec.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* View 0 is the raw bytes (the unescape view misses a plain value next
 * to a '%' or '\\' it reads as an escape), 1 the unescape view, 2..
 * base64. */
#define VIEW_RAW 0
#define VIEW_UNESCAPE 1
#define VIEW_B64 2
#define VIEWS (VIEW_B64 + AL_CREDCODEC_B64_PHASES)

/* What quiet_span asks of a byte, in one lookup. */
#define CLS_HOT 1u  /* some value's first byte, or an escape's start */
#define CLS_B64 2u  /* a base64 character */
#define CLS_CRLF 4u /* CR or LF: inside a run, skipped */
/* Up to this many hot bytes are searched for 16 at a time. */
#define HOT_FEW 6

typedef struct mval {
	unsigned char *p;
	size_t len;
	size_t *fail; /* KMP failure function */
	size_t q[VIEWS];
} mval;

typedef struct mview {
	uint64_t *starts; /* raw start of the last decoded bytes (ring) */
	uint64_t j;	  /* decoded bytes so far */
	size_t open;	  /* values with a partial match (q > 0) */
} mview;

struct al_credmask {
	mval *v;
	size_t n;
	size_t smask; /* starts ring size - 1 (a power of 2 >= longest) */
	mview view[VIEWS];
	al_credcodec_unescape un;
	al_credcodec_b64 b64[AL_CREDCODEC_B64_PHASES];
	unsigned char *ring;
	size_t rmask;	  /* ring size - 1 (a power of 2) */
	uint64_t in, out; /* raw bytes fed; released */
	uint64_t cur;	  /* raw offset of the byte being read */
	bool last;	  /* the piece being fed ends the stream */
	unsigned long count;
	bool first[256];	    /* c is some value's first byte */
	bool whole1[256];	    /* c is a whole value (of 1 byte) */
	uint64_t follow[256][4];    /* bit n of follow[c]: n may come next in
				  * a value starting with c (raw, or an
				  * escape's start) */
	unsigned char cls[256];	    /* CLS_ bits of each byte, for quiet_span */
	unsigned char hot[HOT_FEW]; /* the CLS_HOT bytes, when so few */
	unsigned n_hot;		    /* how many; 0: more (the table only) */
	size_t lmin;		    /* the shortest value's length */
	size_t b64_min; /* run characters the shortest value needs */
	al_credcodec_b64_gate gate;    /* which bytes the decoders read */
	al_credcodec_b64_cores *cores; /* the values' base64 cores */
	size_t core_raw;  /* raw bytes the longest core may span, 3 each; 0:
			   * some core is empty, no looks ahead */
	uint64_t look_at; /* raw offset of the next look ahead (skip_ahead) */
	size_t look_gap;  /* raw bytes to the one after a vain look */
};

/* The least a look ahead must let the decoders pass over to be done. */
#define SKIP_MIN 256
/* The most raw bytes between looks that let nothing pass: they back off
 * (doubling from SKIP_MIN) where cores are close together. */
#define LOOK_GAP_MAX 16384

static size_t pow2_at_least(size_t n)
{
	size_t p = 1;
	while (p < n)
		p <<= 1;
	return p;
}

void al_credmask_free(al_credmask *m)
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < m->n; i++) {
		explicit_bzero(m->v[i].p, m->v[i].len);
		free(m->v[i].p);
		free(m->v[i].fail);
	}
	free(m->v);
	al_credcodec_b64_cores_free(m->cores);
	for (int k = 0; k < VIEWS; k++)
		free(m->view[k].starts);
	if (m->ring != NULL) {
		explicit_bzero(m->ring, m->rmask + 1);
		free(m->ring);
	}
	free(m);
}

static int value_add(mval *x, const al_credmask_value *src)
{
	x->len = src->len;
	x->p = malloc(x->len);
	x->fail = malloc(x->len * sizeof *x->fail);
	if (x->p == NULL || x->fail == NULL)
		return -1;
	memcpy(x->p, src->p, x->len);
	al_credcodec_kmp_fail(x->p, x->len, x->fail);
	return 0;
}

al_credmask *al_credmask_new(const al_credmask_value *values, size_t n,
			     al_err *err)
{
	if (n > AL_CREDMASK_VALUES_MAX) {
		al_err_set(err, AL_EINVAL, 0,
			   "credmask: %zu values (at most %d)", n,
			   AL_CREDMASK_VALUES_MAX);
		return NULL;
	}
	size_t lmax = 1;
	for (size_t i = 0; i < n; i++) {
		if (values[i].len == 0 ||
		    values[i].len > AL_CREDMASK_VALUE_MAX) {
			al_err_set(err, AL_EINVAL, 0,
				   "credmask: a value of %zu bytes",
				   values[i].len);
			return NULL;
		}
		if (values[i].len > lmax)
			lmax = values[i].len;
	}
	al_credmask *m = calloc(1, sizeof *m);
	if (m == NULL)
		goto oom;
	m->v = calloc(n > 0 ? n : 1, sizeof *m->v);
	if (m->v == NULL)
		goto oom;
	size_t lmin = n > 0 ? values[0].len : 1;
	for (; m->n < n; m->n++) {
		if (value_add(&m->v[m->n], &values[m->n]) < 0) {
			m->n++;
			goto oom;
		}
		const unsigned char *vp = m->v[m->n].p;
		m->first[vp[0]] = true;
		if (values[m->n].len == 1)
			m->whole1[vp[0]] = true;
		else
			m->follow[vp[0]][vp[1] / 64] |= 1ull << (vp[1] % 64);
		m->follow[vp[0]]['%' / 64] |= 1ull << ('%' % 64);
		m->follow[vp[0]]['\\' / 64] |= 1ull << ('\\' % 64);
		if (values[m->n].len < lmin)
			lmin = values[m->n].len;
	}
	m->lmin = lmin;
	for (int c = 0; c < 256; c++) {
		bool hot = m->first[c] || c == '%' || c == '\\';
		bool b64 = al_credcodec_b64_value((unsigned char)c) >= 0;
		m->cls[c] = (unsigned char)((hot ? CLS_HOT : 0) |
					    (b64 ? CLS_B64 : 0) |
					    (c == '\r' || c == '\n' ? CLS_CRLF
								    : 0));
		if (hot && m->n_hot <= HOT_FEW) {
			if (m->n_hot < HOT_FEW)
				m->hot[m->n_hot] = (unsigned char)c;
			m->n_hot++;
		}
	}
	if (m->n_hot > HOT_FEW)
		m->n_hot = 0;
	/* Phase 0 of a run of k characters decodes 6k/8 bytes. */
	m->b64_min = AL_CREDCODEC_B64_RUN_MIN(lmin);
	const unsigned char *texts[AL_CREDMASK_VALUES_MAX + 1];
	size_t lens[AL_CREDMASK_VALUES_MAX + 1];
	for (size_t i = 0; i < n; i++) {
		texts[i] = m->v[i].p;
		lens[i] = m->v[i].len;
	}
	m->cores = al_credcodec_b64_cores_new(texts, lens, n);
	if (m->cores == NULL)
		goto oom;
	m->core_raw = 3 * al_credcodec_b64_cores_longest(m->cores);
	size_t s = pow2_at_least(lmax);
	m->smask = s - 1;
	for (int k = 0; k < VIEWS; k++) {
		m->view[k].starts = calloc(s, sizeof *m->view[k].starts);
		if (m->view[k].starts == NULL)
			goto oom;
	}
	/* A partial match spans at most 6 raw bytes per decoded byte
	 * (\uXXXX), plus an escape being read. */
	size_t r = pow2_at_least(6 * lmax + 64);
	m->rmask = r - 1;
	m->ring = malloc(r);
	if (m->ring == NULL)
		goto oom;
	al_credmask_reset(m);
	return m;
oom:
	al_credmask_free(m);
	al_err_set(err, AL_ENOMEM, ENOMEM, "credmask: %zu values", n);
	return NULL;
}

void al_credmask_reset(al_credmask *m)
{
	m->out = m->in;
	al_credcodec_unescape_init(&m->un);
	for (unsigned k = 0; k < AL_CREDCODEC_B64_PHASES; k++)
		al_credcodec_b64_init(&m->b64[k], k);
	for (size_t i = 0; i < m->n; i++)
		memset(m->v[i].q, 0, sizeof m->v[i].q);
	for (int k = 0; k < VIEWS; k++)
		m->view[k].open = 0;
	m->gate = (al_credcodec_b64_gate){0};
	m->look_at = 0;
	m->look_gap = SKIP_MIN;
}

size_t al_credmask_held(const al_credmask *m)
{
	return (size_t)(m->in - m->out);
}

unsigned long al_credmask_count(const al_credmask *m)
{
	return m->count;
}

static void mask_range(al_credmask *m, uint64_t from, uint64_t to)
{
	if (from < m->out)
		from = m->out;
	for (uint64_t o = from; o <= to; o++)
		m->ring[o & m->rmask] = '*';
	m->count++;
}

static inline void view_byte(al_credmask *m, int vi, unsigned char c,
			     uint64_t at)
{
	mview *w = &m->view[vi];
	/* Nothing open and no value starts here: no match to follow. */
	if (w->open == 0 && !m->first[c])
		return;
	w->starts[w->j & m->smask] = at;
	w->j++;
	size_t open = 0;
	for (size_t i = 0; i < m->n; i++) {
		mval *x = &m->v[i];
		size_t q = x->q[vi];
		if (q == 0 && c != x->p[0])
			continue;
		while (q > 0 && c != x->p[q])
			q = x->fail[q - 1];
		if (c == x->p[q])
			q++;
		if (q == x->len) {
			mask_range(m, w->starts[(w->j - q) & m->smask], m->cur);
			q = x->fail[q - 1];
		}
		x->q[vi] = q;
		open += q > 0;
	}
	w->open = open;
}

static void view_break(al_credmask *m, int vi)
{
	for (size_t i = 0; i < m->n; i++)
		m->v[i].q[vi] = 0;
	m->view[vi].open = 0;
}

typedef struct vctx {
	al_credmask *m;
	int vi;
} vctx;

static void on_emit(void *arg, unsigned char c, uint64_t at, unsigned flags)
{
	(void)flags;
	vctx *v = arg;
	view_byte(v->m, v->vi, c, at);
}

static void on_break(void *arg)
{
	vctx *v = arg;
	view_break(v->m, v->vi);
}

/* The oldest raw offset that may still be part of an occurrence. */
static uint64_t keep_from(const al_credmask *m)
{
	uint64_t k = al_credcodec_unescape_pending(&m->un, m->in);
	for (unsigned p = 0; p < AL_CREDCODEC_B64_PHASES; p++) {
		uint64_t b = al_credcodec_b64_pending(&m->b64[p], m->in);
		if (b < k)
			k = b;
	}
	for (int vi = 0; vi < VIEWS; vi++) {
		const mview *w = &m->view[vi];
		for (size_t i = 0; i < m->n; i++) {
			size_t q = m->v[i].q[vi];
			if (q == 0)
				continue;
			uint64_t s = w->starts[(w->j - q) & m->smask];
			if (s < k)
				k = s;
		}
	}
	return k < m->out ? m->out : k;
}

static void release(al_credmask *m, uint64_t upto, al_credmask_out out,
		    void *arg)
{
	while (m->out < upto) {
		size_t at = (size_t)(m->out & m->rmask);
		size_t n = (size_t)(upto - m->out);
		if (n > m->rmask + 1 - at)
			n = m->rmask + 1 - at;
		out(arg, (const char *)m->ring + at, n);
		m->out += n;
	}
}

/* In a run the decoders read (one longer than the piece, or holding a
 * core), with no base64 match open: let them pass over what lies before
 * the next core. Every occurrence of a value holds a core of it, and
 * starts at most 3 raw bytes (a character, two CR/LF) before the core's
 * first character; one not begun at buf[i - 4] would have given its
 * matcher a byte by now, so none is open. So from 3 bytes per core
 * character plus 9 before the first core ending at or after buf[i - 4]
 * (or the run's end, or where a core cut by the end of the stretch
 * looked at may start) no occurrence starts earlier, and decoders
 * started afresh there, four phases of a new run, meet each one at its
 * alignment (an occurrence 9 raw bytes after their start is 3
 * characters in: every phase is reading). Until there the gate skips,
 * as it does a cold run. A look reads a few times SKIP_MIN bytes ahead,
 * not the rest of the piece, so what it costs is of the order of what
 * it may let pass. */
static void skip_ahead(al_credmask *m, vctx *vb, const char *buf, size_t i,
		       size_t len, uint64_t at)
{
	if (m->core_raw == 0 || !m->gate.on || at < m->look_at || i < 4)
		return;
	for (unsigned p = 0; p < AL_CREDCODEC_B64_PHASES; p++)
		if (m->view[VIEW_B64 + p].open > 0)
			return;
	size_t margin = m->core_raw + 9;
	size_t ahead = 4 * (SKIP_MIN + margin);
	size_t lim = len - i > ahead ? i + ahead : len;
	size_t end;
	(void)al_credcodec_b64_run(buf + i, lim - i, &end);
	end += i; /* the run's end, or lim */
	size_t from = i - 4;
	size_t e = from + al_credcodec_b64_cores_first_end(m->cores, buf + from,
							   end - from);
	size_t resume = end; /* no core and the run ends: there */
	if (e < end || end == lim)
		resume = e > margin ? e - margin : 0;
	if (resume < i + SKIP_MIN) {
		/* Not worth it: look again past that core, or the run. */
		size_t past = e < end ? e + 1 : end;
		size_t next = past > i ? past - i : 0;
		m->look_at = at + (next > m->look_gap ? next : m->look_gap);
		if (m->look_gap < LOOK_GAP_MAX)
			m->look_gap *= 2;
		return;
	}
	m->look_gap = SKIP_MIN;
	for (unsigned p = 0; p < AL_CREDCODEC_B64_PHASES; p++)
		al_credcodec_b64_end(&m->b64[p], on_break, &vb[p]);
	al_credcodec_b64_gate_skip(&m->gate, at + (resume - i));
}

/* The base64 views of buf[i] (the rest of the piece, len - i bytes):
 * a run too short for the shortest value, or holding none of the cores,
 * is passed over (gw/credcodec's gate) once it is seen whole: it ends
 * inside the piece, or the piece is the stream's last; in a longer one
 * what lies before the next core is (skip_ahead). */
static void feed_b64(al_credmask *m, vctx *vb, const char *buf, size_t i,
		     size_t len, unsigned char c, uint64_t at)
{
	skip_ahead(m, vb, buf, i, len, at);
	if (!al_credcodec_b64_gate_pass(&m->gate, buf, i, len, m->last,
					m->b64_min, m->cores, at))
		return;
	for (unsigned p = 0; p < AL_CREDCODEC_B64_PHASES; p++)
		al_credcodec_b64_byte(&m->b64[p], c, at, on_emit, on_break,
				      &vb[p]);
}

static bool in_run(const al_credmask *m, unsigned char c)
{
	return (m->cls[c] & (CLS_B64 | CLS_CRLF)) != 0;
}

/* s[i] is hot but starts nothing: a value's first byte (not an escape's
 * start) that is no whole value, followed in s by a byte that continues
 * no value starting with it, raw or escaped. The raw and unescape
 * matchers, closed before it, would open on it and close on the next
 * byte: passing it over leaves them as they are (a byte that starts a
 * value next is hot itself, and read as such). Most of a text's
 * occurrences of a value's first letter are such. */
static bool dead_start(const al_credmask *m, const unsigned char *s, size_t i,
		       size_t len)
{
	unsigned char c = s[i];
	if (!m->first[c] || m->whole1[c] || c == '%' || c == '\\' ||
	    i + 1 >= len)
		return false;
	unsigned char n = s[i + 1];
	return !(m->follow[c][n / 64] >> (n % 64) & 1);
}

/* The first hot byte of s (or len): 16 at a step when they are few and
 * SSE2 is there, else eight at a step through the table. */
static size_t next_hot(const al_credmask *m, const unsigned char *s, size_t len)
{
	const unsigned char *k = m->cls;
	size_t i = 0;
	if (len == 0 || (k[s[0]] & CLS_HOT))
		return 0; /* after a hot byte, often the next */
#ifdef __SSE2__
	if (m->n_hot > 0) {
		__m128i h[HOT_FEW];
		for (unsigned j = 0; j < m->n_hot; j++)
			h[j] = _mm_set1_epi8((char)m->hot[j]);
		for (; i + 16 <= len; i += 16) {
			__m128i x = _mm_loadu_si128((const __m128i *)(s + i));
			__m128i e = _mm_cmpeq_epi8(x, h[0]);
			for (unsigned j = 1; j < m->n_hot; j++)
				e = _mm_or_si128(e, _mm_cmpeq_epi8(x, h[j]));
			unsigned bits = (unsigned)_mm_movemask_epi8(e);
			if (bits != 0)
				return i + (size_t)__builtin_ctz(bits);
		}
	}
#endif
	while (i + 8 <= len &&
	       !((k[s[i]] | k[s[i + 1]] | k[s[i + 2]] | k[s[i + 3]] |
		  k[s[i + 4]] | k[s[i + 5]] | k[s[i + 6]] | k[s[i + 7]]) &
		 CLS_HOT))
		i += 8;
	while (i < len && !(k[s[i]] & CLS_HOT))
		i++;
	return i;
}

/* The first hot byte of s that may start something (or len). */
static size_t first_hot(const al_credmask *m, const unsigned char *s,
			size_t len)
{
	size_t i = next_hot(m, s, len);
	while (i < len && dead_start(m, s, i, len))
		i += 1 + next_hot(m, s + i + 1, len - i - 1);
	return i;
}

/* The start of the first stretch of w or more run bytes (base64 or
 * CR/LF) in s, or len: one byte looked at per w when runs are short,
 * and none looked back at twice. Throughout, no such stretch starts
 * before pos, and s[pos - 1] (if any) is no run byte. */
static size_t long_stretch(const al_credmask *m, const unsigned char *s,
			   size_t len, size_t w)
{
	size_t pos = 0;
	while (len - pos >= w) {
		size_t end = pos + w - 1;
		if (!in_run(m, s[end])) {
			pos = end + 1;
			continue;
		}
		size_t b = end;
		while (b > pos && in_run(m, s[b - 1]))
			b--;
		if (b == pos)
			return pos; /* s[pos..end]: w run bytes */
		pos = b;
	}
	return len;
}

/* A prefix of s that quiet_span's loop would pass over, found without
 * walking it byte by byte: up to just after the last byte outside every
 * run before the first hot byte and before the first stretch of run
 * bytes as long as the shortest run that may hold a value (a stretch
 * counts CR/LF too: only sooner). The loop keeps no state between
 * runs, so it goes on from there as if it had walked the prefix. */
static size_t settled_prefix(const al_credmask *m, const unsigned char *s,
			     size_t len)
{
	size_t lim = long_stretch(m, s, first_hot(m, s, len), m->b64_min);
	while (lim > 0 && in_run(m, s[lim - 1]))
		lim--;
	return lim;
}

/* How many bytes from buf[0] leave every matcher and decoder as they
 * are (quiet: no match open, no escape or run being read): bytes that
 * start no value, no escape and (between runs) no run, as many as the
 * ring has room for. */
static size_t quiet_span(const al_credmask *m, const char *buf, size_t len)
{
	if (m->view[VIEW_RAW].open > 0 || m->view[VIEW_UNESCAPE].open > 0 ||
	    m->un.n > 0 || m->gate.on)
		return 0;
	/* A run reaching len is known whole only if len is the stream's
	 * end, not where the ring's room cut the piece. */
	bool ends_stream = m->last;
	size_t room = m->rmask + 1 - (size_t)(m->in - m->out);
	if (len > room) {
		len = room;
		ends_stream = false;
	}
	bool skipping = m->in < m->gate.skip_end; /* a run the gate skips */
	if (skipping && m->gate.skip_end - m->in < len)
		len = (size_t)(m->gate.skip_end - m->in); /* the run's end */
	size_t i = 0;
	if (!skipping) {
		i = settled_prefix(m, (const unsigned char *)buf, len);
		const unsigned char *u = (const unsigned char *)buf;
		while (i < len) {
			unsigned k = m->cls[u[i]];
			if ((k & CLS_HOT) && !dead_start(m, u, i, len))
				break;
			if (!(k & CLS_B64)) {
				i++;
				continue;
			}
			/* A run (as al_credcodec_b64_run counts it):
			 * skipped whole if short, ended here and cold
			 * (else read byte by byte, see feed_b64). */
			size_t j = i, chars = 0;
			bool live = false; /* a hot byte that may start one */
			for (; j < len; j++) {
				unsigned kj = m->cls[u[j]];
				if (!(kj & (CLS_B64 | CLS_CRLF)))
					break;
				chars += kj & CLS_B64 ? 1 : 0;
				if ((kj & CLS_HOT) && !dead_start(m, u, j, len))
					live = true;
			}
			if (chars >= m->b64_min || (j >= len && !ends_stream) ||
			    live)
				break;
			i = j;
		}
	} else {
		i = first_hot(m, (const unsigned char *)buf, len);
	}
	return i;
}

/* n quiet bytes into the ring (quiet_span made room). */
static void ring_put(al_credmask *m, const char *buf, size_t n)
{
	while (n > 0) {
		size_t at = (size_t)(m->in & m->rmask);
		size_t k = m->rmask + 1 - at < n ? m->rmask + 1 - at : n;
		memcpy(m->ring + at, buf, k);
		m->in += k;
		buf += k;
		n -= k;
	}
}

void al_credmask_feed(al_credmask *m, const char *buf, size_t len,
		      al_credmask_out out, void *arg)
{
	vctx vu = {m, VIEW_UNESCAPE};
	vctx vb[AL_CREDCODEC_B64_PHASES];
	for (unsigned p = 0; p < AL_CREDCODEC_B64_PHASES; p++)
		vb[p] = (vctx){m, VIEW_B64 + (int)p};
	for (size_t i = 0; i < len; i++) {
		size_t q = quiet_span(m, buf + i, len - i);
		if (q > 0) {
			ring_put(m, buf + i, q);
			i += q - 1;
			continue;
		}
		if (m->in - m->out > m->rmask) {
			uint64_t k = keep_from(m);
			if (k == m->out) {
				/* Held past the bound: over-mask. */
				m->ring[m->out & m->rmask] = '*';
				k++;
			}
			release(m, k, out, arg);
		}
		unsigned char c = (unsigned char)buf[i];
		uint64_t at = m->in;
		m->ring[at & m->rmask] = c;
		m->in++;
		m->cur = at;
		view_byte(m, VIEW_RAW, c, at);
		if (m->un.n == 0 && c != '%' && c != '\\')
			view_byte(m, VIEW_UNESCAPE, c, at); /* as it is */
		else
			al_credcodec_unescape_byte(&m->un, c, at, on_emit, &vu);
		feed_b64(m, vb, buf, i, len, c, at);
	}
	release(m, keep_from(m), out, arg);
}

void al_credmask_feed_end(al_credmask *m, const char *buf, size_t len,
			  al_credmask_out out, void *arg)
{
	m->last = true;
	al_credmask_feed(m, buf, len, out, arg);
	m->last = false;
	al_credmask_end(m, out, arg);
}

void al_credmask_end(al_credmask *m, al_credmask_out out, void *arg)
{
	vctx vu = {m, VIEW_UNESCAPE};
	if (m->in > m->out)
		m->cur = m->in - 1;
	al_credcodec_unescape_end(&m->un, on_emit, &vu);
	for (unsigned p = 0; p < AL_CREDCODEC_B64_PHASES; p++) {
		vctx vb = {m, VIEW_B64 + (int)p};
		al_credcodec_b64_end(&m->b64[p], on_break, &vb);
	}
	release(m, m->in, out, arg);
	al_credmask_reset(m);
}

typedef struct sctx {
	char *s;
	size_t pos;
} sctx;

static void to_string(void *arg, const char *p, size_t n)
{
	sctx *c = arg;
	memcpy(c->s + c->pos, p, n);
	c->pos += n;
}

/* s holds no escape and no base64 run a value could be decoded from
 * (none long enough and holding a core): every view but the raw one
 * reads s itself or nothing that matches. */
static bool plain_only(const al_credmask *m, const char *s, size_t len)
{
	if (memchr(s, '%', len) != NULL || memchr(s, '\\', len) != NULL)
		return false;
	for (size_t i = 0; i < len;) {
		size_t end;
		if (al_credcodec_b64_run(s + i, len - i, &end) >= m->b64_min &&
		    al_credcodec_b64_cores_in(m->cores, s + i, end))
			return false;
		i += end + 1;
	}
	return true;
}

#define STRING_HITS 16

/* The raw occurrences of s, all found before any is masked (one may
 * overlap another's); 0, or -1 when there are too many to keep. */
static int mask_plain(al_credmask *m, char *s, size_t len)
{
	struct {
		size_t at, len;
	} hit[STRING_HITS];
	size_t n = 0;
	for (size_t i = 0; i < m->n; i++) {
		const mval *x = &m->v[i];
		for (size_t at = 0; at + x->len <= len;) {
			const char *h = memmem(s + at, len - at, x->p, x->len);
			if (h == NULL)
				break;
			if (n == STRING_HITS)
				return -1;
			hit[n].at = (size_t)(h - s);
			hit[n++].len = x->len;
			at = (size_t)(h - s) + 1;
		}
	}
	for (size_t i = 0; i < n; i++)
		memset(s + hit[i].at, '*', hit[i].len);
	m->count += n;
	return 0;
}

void al_credmask_string(al_credmask *m, char *s, size_t len)
{
	/* No view decodes more bytes than it reads. The two shortcuts
	 * leave the matchers alone, so only the full feed resets them. */
	if (len < m->lmin)
		return;
	if (plain_only(m, s, len) && mask_plain(m, s, len) == 0)
		return;
	al_credmask_reset(m);
	sctx c = {s, 0};
	al_credmask_feed_end(m, s, len, to_string, &c);
}
