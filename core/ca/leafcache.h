/* gw/leafcache: a bounded LRU of minted leaves, keyed by a string (the
 * gateway: the canonical name; the controller: name + key hash). Entries
 * hold a reference to their X509; a leaf past its renewal point (less
 * than a quarter of its life left) is a miss. Not thread-safe: one owner
 * thread. */
#ifndef AL_GW_LEAFCACHE_H
#define AL_GW_LEAFCACHE_H

#include <stddef.h>

#include <openssl/x509.h>

#include "base/err.h"

typedef struct al_leafcache al_leafcache;

#define AL_LEAFCACHE_KEY_MAX 320

al_leafcache *al_leafcache_new(size_t max_entries, al_err *err);
void al_leafcache_free(al_leafcache *c);
/* The leaf stored under key, up-referenced (caller frees), or NULL. */
X509 *al_leafcache_get(al_leafcache *c, const char *key);
/* Store (a reference to) leaf under key, replacing any older one and
 * evicting the least recently used entry when full. */
int al_leafcache_put(al_leafcache *c, const char *key, X509 *leaf, al_err *err);
size_t al_leafcache_count(const al_leafcache *c);

#endif
