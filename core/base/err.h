/* err: the one error contract of libairlock.
 *
 * A fallible function returns 0 / -1 (or a pointer / NULL) and takes
 * `al_err *err` last. On failure it fills err once, where the failure
 * happens; callers propagate and may add context with al_err_wrap().
 * On success err is left untouched. */
#ifndef AL_ERR_H
#define AL_ERR_H

#include <stddef.h>

typedef enum al_code {
	AL_OK = 0,
	AL_EINVAL,    /* bad argument or field: HTTP 400 */
	AL_EAUTH,     /* missing or wrong credentials: 401 */
	AL_EPERM,     /* authenticated but not allowed: 403 */
	AL_ENOENT,    /* unknown sandbox, template, file: 404 */
	AL_ESTATE,    /* wrong state for the operation: 409 */
	AL_EEXIST,    /* already exists: 409 */
	AL_ETOOBIG,   /* body or frame too large: 413 */
	AL_EPATH,     /* invalid path: 422 */
	AL_ETIMEDOUT, /* deadline passed: 504 */
	AL_EPROTO,    /* peer broke the protocol: 502 */
	AL_EUNAVAIL,  /* service not reachable (shim, db): 503 */
	AL_ENOSPACE,  /* the sandbox pool is (nearly) full: 507 */
	AL_ENOMEM,    /* out of memory: 500 */
	AL_ESYS,      /* a system call failed: 500 */
	AL_EDB,	      /* database error: 500 */
	AL_EINTERNAL, /* bug or impossible state: 500 */
	AL_EQUOTA,    /* over a project's quota: 429 */
	AL_EDISABLED, /* the operator turned it off (a driver): 422 */
	AL_ENOTSUP,   /* the sandbox's driver cannot do that: 422 */
	AL_EMEMORY,   /* it cannot keep memory (ns suspend): 422 */
	AL_CODE_MAX
} al_code;

/* Non-error outcomes (never returned as -1). */
#define AL_AGAIN 1    /* would block: call again when ready */
#define AL_DECLINED 2 /* handler or policy says "not mine" */

typedef struct al_err {
	al_code code;
	int sys_errno; /* errno at the failure, 0 if none */
	char msg[512];
} al_err;

/* Fill err (if not NULL) and return -1. fmt must not be NULL. */
int al_err_set(al_err *err, al_code code, int sys_errno, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Same, with strerror(sys_errno) appended to the message. */
int al_err_sys(al_err *err, al_code code, int sys_errno, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Prefix context ("creating sandbox x: ") to an already filled err. */
void al_err_wrap(al_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void al_err_clear(al_err *err);
/* Stable machine name of a code, used as the API's error.code
 * ("invalid_request", "not_found", ...). */
const char *al_code_name(al_code code);
/* HTTP status a code maps to. */
int al_code_http_status(al_code code);
/* Parse a code name back (for codes relayed over the agent protocol);
 * unknown names map to AL_EINTERNAL. */
al_code al_code_from_name(const char *name);

#endif
