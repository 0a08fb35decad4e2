/* gw/fakeip: one sandbox's synthetic address map (AL_NET_SYNTHETIC,
 * 198.18.0.0/15): name -> address for DNS answers, address -> name for
 * the gateway when the guest connects to one.
 *
 * Addresses are handed out in order from 198.18.0.1 and never taken back
 * or reused while the map lives: a guest's DNS cache can keep an answer
 * for as long as it likes and the address still means that name (a
 * restored snapshot keeps its cache, so the map is saved with it). The
 * same name always gets the same address. The map is bounded (cap names,
 * at most AL_FAKEIP_CAP_MAX): past it new names are refused (the server
 * answers SERVFAIL) while known ones keep working. Lookups are O(log n)
 * whatever names the guest picks (a balanced tree, no hash to flood).
 *
 * File format (al_fakeip_save/load), text, one entry a line, in address
 * order, the addresses contiguous from the first:
 *   airlock-fakeip 1\n
 *   198.18.0.1 example.com\n
 *   198.18.0.2 pypi.org\n
 * Every name canonical (al_dnsname_canon) and unique. The loader is
 * strict: anything else is AL_EINVAL naming the line. */
#ifndef AL_GW_FAKEIP_H
#define AL_GW_FAKEIP_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define AL_FAKEIP_CAP_DEFAULT 65536u
/* The /15 less its network and broadcast addresses. */
#define AL_FAKEIP_CAP_MAX 131070u
/* Bytes a journal (al_fakeip_open) grows to at most: it lives on the
 * host's run/ tmpfs, which every sandbox shares, and long names would
 * otherwise take cap x 270 bytes (17 MiB) there. About 50,000 names of a
 * usual length fit, 7,700 of the longest. */
#define AL_FAKEIP_JOURNAL_MAX (2u << 20)
/* Bytes of a saved map at most: header + cap lines of address and name. */
#define AL_FAKEIP_FILE_MAX(cap) (32u + (size_t)(cap) * (16u + 254u))

typedef struct al_fakeip al_fakeip;

/* An empty map of at most cap names (1..AL_FAKEIP_CAP_MAX). NULL and
 * AL_EINVAL / AL_ENOMEM. */
al_fakeip *al_fakeip_new(uint32_t cap, al_err *err);
void al_fakeip_free(al_fakeip *m);

/* The address of name (canonical), given one if it has none yet. 0 and
 * *addr (host order); -1: AL_EINVAL for a name that is not canonical,
 * AL_ENOSPACE when the map is full, AL_ENOMEM. */
int al_fakeip_get(al_fakeip *m, const char *name, uint32_t *addr, al_err *err);
/* The name addr (host order) was given to, or NULL. Valid until the map
 * is freed. */
const char *al_fakeip_name(const al_fakeip *m, uint32_t addr);
/* Names in the map. */
size_t al_fakeip_count(const al_fakeip *m);

/* The map in the file format; *out malloc'd (caller frees), *len bytes.
 * -1 and AL_ENOMEM. */
int al_fakeip_pack(const al_fakeip *m, char **out, size_t *len, al_err *err);
/* A map from len bytes of the file format, of at most cap names (a
 * buffer with more is AL_EINVAL like any other flaw). NULL and err. */
al_fakeip *al_fakeip_unpack(const char *buf, size_t len, uint32_t cap,
			    al_err *err);
/* Write the map to path (tmp file, fsync, rename). */
int al_fakeip_save(const al_fakeip *m, const char *path, al_err *err);
/* Read a map saved by al_fakeip_save; AL_ENOENT when path is missing. */
al_fakeip *al_fakeip_load(const char *path, uint32_t cap, al_err *err);

/* The map kept in a journal file at path (the same format), for a
 * gateway that may be restarted while its guest keeps its DNS cache:
 * loads what the file holds (creating it, mode 0600, when missing; a
 * last line cut short by a crash is dropped), then appends each new name
 * to it before al_fakeip_get hands its address out. A name whose line
 * cannot be written gets no address (AL_ESYS): no address is ever given
 * that a restart would give again to another name. A name whose line
 * would take the file past AL_FAKEIP_JOURNAL_MAX gets none either
 * (AL_ENOSPACE, as past cap). al_fakeip_free closes the file. */
al_fakeip *al_fakeip_open(const char *path, uint32_t cap, al_err *err);

#endif
