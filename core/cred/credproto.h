/* credproto: the payloads of the credential channel (issue 11), one pack
 * and one unpack per message. Frames are core/agentproto's; the types
 * (AL_F_CRED_*, AL_F_GW_CREDCHAN*) are declared there.
 *
 *   shim -> controller   CRED_HELLO   {"sandbox":id} (root peers only)
 *   controller -> gw     CRED_SET     {"version":n,"creds":[al_cred...]}
 *   gw -> controller     CRED_SET_ACK {"version":n}
 *   gw -> controller     CRED_TAKE    {"req":u32,"id":credential id}
 *   controller -> gw     CRED_GRANT   {"req":u32,"ok":bool,"retry_after":s}
 *   gw -> controller     CRED_USE     {"name","host","method","path",
 *                                      "status":int|null,"action",
 *                                      "decision":"allow|deny","reason"}
 *   fcgi -> controller   CRED_REFRESH {"project":id|null}
 *   controller -> fcgi   CRED_REFRESH_DONE {"pushed":n,"acked":n}
 *   gw -> shim (fd 6)    GW_CREDCHAN_REQ (empty payload)
 *   shim -> gw (fd 6)    GW_CREDCHAN  {"ok":bool} + the channel's fd by
 *                                      SCM_RIGHTS when ok
 *
 * Everything unpacked here comes from a peer treated as hostile (the
 * controller parses what gateways send; gateways parse what arrives on
 * fd 7): unknown members, wrong types, out-of-range numbers, strings with
 * bytes outside their alphabet and sizes past the bounds below are
 * AL_EINVAL. Error messages name fields, never values.
 *
 * The credential set type (al_cred_set) lives here, not in the store
 * (core/model/credential.h uses it for al_credential_effective): the gateway
 * links no database code. The al_cred_*_valid checks are the one
 * definition of each field's alphabet: the store validates API input with
 * them, so what it accepts always fits the wire. */
#ifndef AL_CREDPROTO_H
#define AL_CREDPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* The types below are the store's (cred-store's core/model/credential.h had
 * the same): one definition, here, so the gateway needs no store code.
 * Lengths without the NUL. */
#define AL_CRED_ID_LEN 23	  /* "cr_" + 20 hex (any [A-Za-z0-9._-]) */
#define AL_CRED_NAME_MAX 64	  /* [a-z0-9_-], also A-Z and '.' */
#define AL_CRED_HOSTS_MAX 16	  /* per credential */
#define AL_CRED_HOST_MAX 255	  /* canonical name, or "*." + name */
#define AL_CRED_HEADER_MAX 64	  /* an HTTP token */
#define AL_CRED_FORMAT_MAX 256	  /* contains "{value}" */
#define AL_CRED_VALUE_MAX 8192	  /* bytes, no control bytes */
#define AL_CRED_RATE_MAX 1000000  /* requests, and per_seconds */
#define AL_CRED_SET_MAX 64	  /* credentials in one set */
#define AL_CRED_USE_FIELD_MAX 256 /* method, action, reason (with NUL) */
#define AL_CRED_USE_PATH_MAX 2048 /* longer paths are cut by the packer */
#define AL_CRED_RETRY_AFTER_MAX 86400

typedef enum al_cred_scope {
	AL_CRED_GLOBAL,
	AL_CRED_PROJECT,
	AL_CRED_TEMPLATE,
	AL_CRED_METADATA,
	AL_CRED_SANDBOX,
} al_cred_scope; /* ascending by precedence */
#define AL_CRED_SCOPES 5

/* "global", "project", "template", "metadata", "sandbox". */
const char *al_cred_scope_name(al_cred_scope s);
/* -1 when unknown. */
int al_cred_scope_from_name(const char *name);

/* One credential as a gateway uses it. value is malloc'ed and wiped
 * (OPENSSL_cleanse) by al_cred_set_free. */
typedef struct al_cred {
	char id[AL_CRED_ID_LEN + 1];
	char name[AL_CRED_NAME_MAX + 1];
	al_cred_scope scope;
	int version;   /* the row's: 1, +1 per rotation (not on the wire) */
	size_t nhosts; /* 1..AL_CRED_HOSTS_MAX */
	char hosts[AL_CRED_HOSTS_MAX][AL_CRED_HOST_MAX + 1];
	char header[AL_CRED_HEADER_MAX + 1]; /* "" = placeholder form only
					      * (null on the wire) */
	char format[AL_CRED_FORMAT_MAX + 1]; /* "{value}" exactly once */
	int rate_requests;		     /* 0 = no rate limit (null) */
	int rate_per_seconds;		     /* > 0 when rate_requests is */
	char *value;			     /* value_len bytes + NUL */
	size_t value_len;
} al_cred;

/* The credentials applying to one sandbox, one per name. version is
 * the pusher's (credsvc); 0 from the store. */
typedef struct al_cred_set {
	unsigned long long version;
	size_t n;
	al_cred *creds; /* n entries, malloc'ed */
} al_cred_set;

/* Wipe every value and free; the set is empty after (safe twice). */
void al_cred_set_free(al_cred_set *s);
/* The credential of that name, or NULL. */
const al_cred *al_cred_set_find(const al_cred_set *s, const char *name);
const al_cred *al_cred_set_find_id(const al_cred_set *s, const char *id);
/* Which field of c breaks the checks below ("value", "hosts", ...), or
 * NULL when it may go on the wire. */
const char *al_cred_invalid(const al_cred *c);
/* Append one credential (copying c, value included) to s; the store
 * builds sets with it. AL_EINVAL if c does not pass the checks below or
 * its name is already in s, AL_ETOOBIG past AL_CRED_SET_MAX. */
int al_cred_set_add(al_cred_set *s, const al_cred *c, al_err *err);

/* Field alphabets (NUL-terminated input). */
/* [A-Za-z0-9._-], 1..AL_CRED_ID_LEN bytes. */
bool al_cred_id_valid(const char *s);
/* [A-Za-z0-9_.-], 1..AL_CRED_NAME_MAX bytes, starting alnum: what
 * follows "airlock-cred:" in a placeholder. */
bool al_cred_name_valid(const char *s);
/* 1..AL_CRED_VALUE_MAX bytes of 0x21..0x7e or space (no control bytes:
 * a value ends up in a header line). */
bool al_cred_value_valid(const char *s, size_t n);
/* A canonical DNS name (al_dnsname_valid) or "*." and one. */
bool al_cred_host_valid(const char *s);
/* An HTTP token (RFC 9110 tchar), 1..AL_CRED_HEADER_MAX bytes. */
bool al_cred_header_valid(const char *s);
/* Printable ASCII, <= AL_CRED_FORMAT_MAX bytes, "{value}" exactly once. */
bool al_cred_format_valid(const char *s);

/* ---- CRED_HELLO ---- */
char *al_cred_hello_pack(const char *sandbox, al_err *err);
/* sandbox: al_id_valid. */
int al_cred_hello_unpack(const void *payload, size_t len, char sandbox[64],
			 al_err *err);

/* ---- CRED_SET ----
 * The text holds the values: the caller wipes it (OPENSSL_cleanse) before
 * free. AL_ETOOBIG when it would pass AL_FRAME_MAX_PAYLOAD. Unpack into
 * out (zeroed first; al_cred_set_free on success); it wipes the values in
 * its own parse tree, the caller wipes payload. */
char *al_cred_set_pack(const al_cred_set *s, al_err *err);
int al_cred_set_unpack(const void *payload, size_t len, al_cred_set *out,
		       al_err *err);

/* ---- CRED_SET_ACK ---- */
char *al_cred_set_ack_pack(uint64_t version, al_err *err);
int al_cred_set_ack_unpack(const void *payload, size_t len, uint64_t *version,
			   al_err *err);

/* ---- CRED_TAKE ---- */
typedef struct al_cred_take {
	uint32_t req;
	char id[AL_CRED_ID_LEN + 1];
} al_cred_take;
char *al_cred_take_pack(const al_cred_take *t, al_err *err);
int al_cred_take_unpack(const void *payload, size_t len, al_cred_take *out,
			al_err *err);

/* ---- CRED_GRANT ---- */
typedef struct al_cred_grant {
	uint32_t req;
	bool ok;
	uint32_t retry_after; /* seconds, 0 when ok; <= RETRY_AFTER_MAX */
} al_cred_grant;
char *al_cred_grant_pack(const al_cred_grant *g, al_err *err);
int al_cred_grant_unpack(const void *payload, size_t len, al_cred_grant *out,
			 al_err *err);

/* ---- CRED_USE ---- one audit record; the controller adds time,
 * sandbox, project and key. Strings: printable ASCII (pack replaces any
 * other byte by '?' and cuts to the bound, so a guest's path never breaks
 * the record), name al_cred_name_valid, host al_dnsname_valid or "". */
typedef struct al_cred_use {
	char name[AL_CRED_NAME_MAX + 1];
	char host[AL_CRED_HOST_MAX + 1];
	char method[AL_CRED_USE_FIELD_MAX];
	char path[AL_CRED_USE_PATH_MAX];
	int status; /* upstream HTTP status 100..599, -1 = none (null) */
	char action[AL_CRED_USE_FIELD_MAX]; /* "use", "denied_placeholder",
					     * "rate_limited", ...: [a-z_] */
	bool allow;			    /* decision */
	char reason[AL_CRED_USE_FIELD_MAX];
} al_cred_use;
char *al_cred_use_pack(const al_cred_use *u, al_err *err);
int al_cred_use_unpack(const void *payload, size_t len, al_cred_use *out,
		       al_err *err);

/* ---- CRED_REFRESH ---- project "" = null: a global credential changed,
 * every connected sandbox is recomputed. */
char *al_cred_refresh_pack(const char *project, al_err *err);
int al_cred_refresh_unpack(const void *payload, size_t len, char project[64],
			   al_err *err);

/* ---- CRED_REFRESH_DONE ---- */
typedef struct al_cred_refresh_done {
	uint32_t pushed, acked;
} al_cred_refresh_done;
char *al_cred_refresh_done_pack(const al_cred_refresh_done *d, al_err *err);
int al_cred_refresh_done_unpack(const void *payload, size_t len,
				al_cred_refresh_done *out, al_err *err);

/* ---- GW_CREDCHAN_REQ: empty; unpack refuses any payload ---- */
int al_gw_credchan_req_unpack(const void *payload, size_t len, al_err *err);

/* ---- GW_CREDCHAN ---- */
char *al_gw_credchan_pack(bool ok, al_err *err);
int al_gw_credchan_unpack(const void *payload, size_t len, bool *ok,
			  al_err *err);

#endif
