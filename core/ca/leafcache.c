/* Leaf LRU: a chained hash table for lookup, a doubly linked list for
 * recency (head = most recent). See leafcache.h. */
#include "ca/leafcache.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
	struct entry *hnext;	   /* hash chain */
	struct entry *prev, *next; /* recency list */
	X509 *leaf;
	uint64_t hash;
	char key[];
} entry;

struct al_leafcache {
	entry **buckets;
	size_t nbuckets, count, max;
	entry *head, *tail;
};

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

al_leafcache *al_leafcache_new(size_t max_entries, al_err *err)
{
	if (max_entries == 0 || max_entries > (1u << 24)) {
		al_err_set(err, AL_EINVAL, 0, "leaf cache size %zu",
			   max_entries);
		return NULL;
	}
	al_leafcache *c = calloc(1, sizeof *c);
	size_t nb = 16;
	while (nb < max_entries)
		nb <<= 1;
	if (c != NULL)
		c->buckets = calloc(nb, sizeof *c->buckets);
	if (c == NULL || c->buckets == NULL) {
		free(c);
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		return NULL;
	}
	c->nbuckets = nb;
	c->max = max_entries;
	return c;
}

static void list_unlink(al_leafcache *c, entry *e)
{
	if (e->prev != NULL)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next != NULL)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->prev = e->next = NULL;
}

static void list_push_head(al_leafcache *c, entry *e)
{
	e->prev = NULL;
	e->next = c->head;
	if (c->head != NULL)
		c->head->prev = e;
	c->head = e;
	if (c->tail == NULL)
		c->tail = e;
}

static entry **find_slot(al_leafcache *c, const char *key, uint64_t h)
{
	entry **pp = &c->buckets[h & (c->nbuckets - 1)];
	while (*pp != NULL &&
	       ((*pp)->hash != h || strcmp((*pp)->key, key) != 0))
		pp = &(*pp)->hnext;
	return pp;
}

static void drop(al_leafcache *c, entry **slot)
{
	entry *e = *slot;
	*slot = e->hnext;
	list_unlink(c, e);
	X509_free(e->leaf);
	free(e);
	c->count--;
}

void al_leafcache_free(al_leafcache *c)
{
	if (c == NULL)
		return;
	for (entry *e = c->head, *n; e != NULL; e = n) {
		n = e->next;
		X509_free(e->leaf);
		free(e);
	}
	free(c->buckets);
	free(c);
}

/* Less than a quarter of its life left (or expired, or unreadable). */
static int stale(X509 *x)
{
	int d_all, s_all, d_left, s_left;
	if (ASN1_TIME_diff(&d_all, &s_all, X509_get0_notBefore(x),
			   X509_get0_notAfter(x)) != 1 ||
	    ASN1_TIME_diff(&d_left, &s_left, NULL, X509_get0_notAfter(x)) != 1)
		return 1;
	long all = d_all * 86400L + s_all, left = d_left * 86400L + s_left;
	return left < all / 4;
}

X509 *al_leafcache_get(al_leafcache *c, const char *key)
{
	uint64_t h = fnv1a(key);
	entry **slot = find_slot(c, key, h);
	if (*slot == NULL)
		return NULL;
	if (stale((*slot)->leaf)) {
		drop(c, slot);
		return NULL;
	}
	entry *e = *slot;
	list_unlink(c, e);
	list_push_head(c, e);
	X509_up_ref(e->leaf);
	return e->leaf;
}

int al_leafcache_put(al_leafcache *c, const char *key, X509 *leaf, al_err *err)
{
	size_t klen = strlen(key);
	if (klen == 0 || klen > AL_LEAFCACHE_KEY_MAX)
		return al_err_set(err, AL_EINVAL, 0, "leaf cache key length");
	uint64_t h = fnv1a(key);
	entry **slot = find_slot(c, key, h);
	if (*slot != NULL)
		drop(c, slot);
	while (c->count >= c->max && c->tail != NULL)
		drop(c, find_slot(c, c->tail->key, c->tail->hash));
	entry *e = calloc(1, sizeof *e + klen + 1);
	if (e == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	memcpy(e->key, key, klen + 1);
	e->hash = h;
	X509_up_ref(leaf);
	e->leaf = leaf;
	slot = &c->buckets[h & (c->nbuckets - 1)];
	e->hnext = *slot;
	*slot = e;
	list_push_head(c, e);
	c->count++;
	return 0;
}

size_t al_leafcache_count(const al_leafcache *c)
{
	return c->count;
}
