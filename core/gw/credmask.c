/* gw/credmask: KMP matchers of every value over the gw/credcodec views,
 * and a ring of the raw bytes not yet released. */
#include "gw/credmask.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gw/credcodec.h"

/* View 0 is the raw bytes (the unescape view misses a plain value next
 * to a '%' or '\\' it reads as an escape), 1 the unescape view, 2..
 * base64. */
#define VIEW_RAW 0
#define VIEW_UNESCAPE 1
#define VIEW_B64 2
#define VIEWS (VIEW_B64 + AL_CREDCODEC_B64_PHASES)

typedef struct mval {
	unsigned char *p;
	size_t len;
	size_t *fail; /* KMP failure function */
	size_t q[VIEWS];
} mval;

typedef struct mview {
	uint64_t *starts; /* raw start of the last decoded bytes (ring) */
	uint64_t j;	  /* decoded bytes so far */
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
	unsigned long count;
};

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
	x->fail[0] = 0;
	for (size_t i = 1, k = 0; i < x->len; i++) {
		while (k > 0 && x->p[i] != x->p[k])
			k = x->fail[k - 1];
		if (x->p[i] == x->p[k])
			k++;
		x->fail[i] = k;
	}
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
	for (; m->n < n; m->n++)
		if (value_add(&m->v[m->n], &values[m->n]) < 0) {
			m->n++;
			goto oom;
		}
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

static void view_byte(al_credmask *m, int vi, unsigned char c, uint64_t at)
{
	mview *w = &m->view[vi];
	w->starts[w->j & m->smask] = at;
	w->j++;
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
	}
}

static void view_break(al_credmask *m, int vi)
{
	for (size_t i = 0; i < m->n; i++)
		m->v[i].q[vi] = 0;
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

void al_credmask_feed(al_credmask *m, const char *buf, size_t len,
		      al_credmask_out out, void *arg)
{
	vctx vr = {m, VIEW_RAW}, vu = {m, VIEW_UNESCAPE};
	vctx vb[AL_CREDCODEC_B64_PHASES];
	for (unsigned p = 0; p < AL_CREDCODEC_B64_PHASES; p++)
		vb[p] = (vctx){m, VIEW_B64 + (int)p};
	for (size_t i = 0; i < len; i++) {
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
		on_emit(&vr, c, at, 0);
		al_credcodec_unescape_byte(&m->un, c, at, on_emit, &vu);
		for (unsigned p = 0; p < AL_CREDCODEC_B64_PHASES; p++)
			al_credcodec_b64_byte(&m->b64[p], c, at, on_emit,
					      on_break, &vb[p]);
	}
	release(m, keep_from(m), out, arg);
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

void al_credmask_string(al_credmask *m, char *s, size_t len)
{
	sctx c = {s, 0};
	al_credmask_reset(m);
	al_credmask_feed(m, s, len, to_string, &c);
	al_credmask_end(m, to_string, &c);
}
