/* gw/credcodec: the decodings credentials and their placeholders hide in,
 * as streaming byte decoders that say where each decoded byte came from.
 *
 * gw/credscan (placeholders in requests) and gw/credmask (values in
 * responses) both look for a text behind the encodings a client or an
 * echoing server may apply. Each decoder turns the raw stream into a
 * "view" and reports, for every decoded byte, the raw stream offset of
 * the first raw byte it came from, so a match in the view maps back to
 * a raw range:
 *
 *  - unescape: percent-encoding (%XX, either case, any mix with plain
 *    bytes) and JSON string escapes (\uXXXX as UTF-8, \/ \\ \" \b \f \n
 *    \r \t) undone in one pass; every other byte passes as it is, so the
 *    view also holds the plain text. An escape that turns out not to be
 *    one (a '%' not followed by two hex digits) passes its raw bytes.
 *  - base64 at one of the 4 phases of a run: a run is a maximal string of
 *    base64 characters (both alphabets, RFC 4648 4 and 5; CR and LF inside
 *    a run are skipped, as MIME encoders insert them, but more than 2 in
 *    a row end it, which bounds how far apart a run's characters lie;
 *    '=' and any other byte end it); phase k decodes from the run's k-th character on, so
 *    the 4 phases together decode an encoding that starts anywhere in a
 *    run, and its decoded text holds the searched text at any of the 3
 *    byte alignments. The end of a run is reported as a break (the view
 *    is discontinuous there).
 * State is a few bytes per decoder: nothing is buffered but an escape
 * being read (at most 5 bytes). */
#ifndef AL_GW_CREDCODEC_H
#define AL_GW_CREDCODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bits of a decoded byte's origin (unescape). */
#define AL_CREDCODEC_PERCENT 1u /* it was %XX */
#define AL_CREDCODEC_JSON 2u	/* it was a JSON escape */
#define AL_CREDCODEC_BASE64 4u	/* it came out of a base64 view */

#define AL_CREDCODEC_B64_PHASES 4

/* A decoded byte c, first raw byte at raw offset `at`, origin bits. */
typedef void (*al_credcodec_emit)(void *arg, unsigned char c, uint64_t at,
				  unsigned flags);
/* The view is discontinuous here (a base64 run ended). */
typedef void (*al_credcodec_break)(void *arg);

typedef struct al_credcodec_unescape {
	unsigned char pend[6]; /* an escape being read */
	unsigned n;	       /* bytes in pend */
	uint64_t at;	       /* raw offset of pend[0] */
} al_credcodec_unescape;

typedef struct al_credcodec_b64 {
	unsigned phase; /* characters of a run skipped first */
	unsigned run;	/* characters of the current run, up to phase */
	uint32_t bits;
	unsigned nbits;
	unsigned crlf;	/* CR and LF in a row inside the run */
	uint64_t first; /* raw offset of the oldest pending bits' char */
} al_credcodec_b64;

void al_credcodec_unescape_init(al_credcodec_unescape *u);
/* One raw byte at raw offset `at`. */
void al_credcodec_unescape_byte(al_credcodec_unescape *u, unsigned char c,
				uint64_t at, al_credcodec_emit emit, void *arg);
/* End of the stream: an unfinished escape passes raw. */
void al_credcodec_unescape_end(al_credcodec_unescape *u, al_credcodec_emit emit,
			       void *arg);
/* Raw offset of the oldest byte still pending inside u (an escape being
 * read), or `next` (the offset of the next raw byte) when none is. */
uint64_t al_credcodec_unescape_pending(const al_credcodec_unescape *u,
				       uint64_t next);

void al_credcodec_b64_init(al_credcodec_b64 *b, unsigned phase);
void al_credcodec_b64_byte(al_credcodec_b64 *b, unsigned char c, uint64_t at,
			   al_credcodec_emit emit, al_credcodec_break brk,
			   void *arg);
void al_credcodec_b64_end(al_credcodec_b64 *b, al_credcodec_break brk,
			  void *arg);
uint64_t al_credcodec_b64_pending(const al_credcodec_b64 *b, uint64_t next);
/* 0..63 for a character of either base64 alphabet, -1 otherwise. */
int al_credcodec_b64_value(unsigned char c);
/* Base64 characters in the run starting at buf[0], up to its end (a
 * byte that is neither base64 nor CR/LF) at buf[*end]; *end = len when
 * the piece ends first. A run of k characters decodes at most 6k/8
 * bytes in any phase: one shorter than AL_CREDCODEC_B64_RUN_MIN(n)
 * cannot hold n decoded bytes, and the decoders may skip it. (3 CR/LF
 * in a row end a decoder's run; counted as one run it is only longer.) */
size_t al_credcodec_b64_run(const char *buf, size_t len, size_t *end);
#define AL_CREDCODEC_B64_RUN_MIN(n) ((4 * (size_t)(n) + 2) / 3)

/* Which bytes of a stream its base64 decoders need to see: none between
 * runs (a decoder at its start passes over what is not base64), none of
 * a run shorter than min characters whose end is known (in this piece,
 * or the piece is the stream's last: `whole`), and every byte of any
 * other run up to the one that ends it. A matcher over the decoders
 * then finds nothing of min or more decoded bytes that the skipped runs
 * would have given it. Zeroed: at a stream's start. */
typedef struct al_credcodec_b64_gate {
	bool on;	   /* in a run the decoders read */
	uint64_t skip_end; /* raw offset where the last skipped run ends */
	bool resume; /* on again at skip_end (al_credcodec_b64_gate_skip) */
} al_credcodec_b64_gate;
/* KMP's failure function of p (len >= 1): fail[i] is the length of
 * the longest proper prefix of p[0..i] that is also its suffix. */
void al_credcodec_kmp_fail(const unsigned char *p, size_t len, size_t *fail);

/* The base64 cores of texts. For each text and each of the 3 byte
 * alignments at which a phase may decode it, its core is the characters
 * of its encoding that its own bits alone decide (6 bits each). A run
 * from which some phase decodes a text holds one of that text's cores,
 * contiguous once CR and LF are dropped and both alphabets read alike;
 * a run that holds no core decodes to no text, and its decoders may
 * skip it like a short one. A text too short for a core at some
 * alignment is in every run. */
typedef struct al_credcodec_b64_cores al_credcodec_b64_cores;
/* NULL on OOM. */
al_credcodec_b64_cores *
al_credcodec_b64_cores_new(const unsigned char *const *texts,
			   const size_t *lens, size_t n);
void al_credcodec_b64_cores_free(al_credcodec_b64_cores *c);
/* Whether the run buf[0..len) (as al_credcodec_b64_run measured it)
 * holds a core; linear in len for each core. */
bool al_credcodec_b64_cores_in(const al_credcodec_b64_cores *c, const char *buf,
			       size_t len);
/* The index of the last character of the first core in buf[0..len), or
 * len when none ends there; 0 when some core has no characters. Any
 * byte that is not base64 is passed over as CR and LF are: the caller
 * bounds buf by the run. */
size_t al_credcodec_b64_cores_first_end(const al_credcodec_b64_cores *c,
					const char *buf, size_t len);
/* The most characters a core has; 0 when some core has none (it is in
 * every run: no run may be passed over for lack of it). */
size_t al_credcodec_b64_cores_longest(const al_credcodec_b64_cores *c);

/* The decoders pass over the run being read up to raw offset `to` (the
 * caller ended their runs) and read every byte from there on, as from a
 * new run, until one ends it. */
void al_credcodec_b64_gate_skip(al_credcodec_b64_gate *g, uint64_t to);
/* For byte buf[i] of a piece of len bytes, at raw offset at: true if
 * the decoders must be fed it. cores: NULL, or a run whose end is known
 * and that holds none is skipped too. */
bool al_credcodec_b64_gate_pass(al_credcodec_b64_gate *g, const char *buf,
				size_t i, size_t len, bool whole, size_t min,
				const al_credcodec_b64_cores *cores,
				uint64_t at);

#endif
