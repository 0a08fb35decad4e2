/* qmp: a minimal client for QEMU's machine protocol (QMP) on a unix
 * socket, enough for the vm driver: greeting, capability negotiation,
 * one command at a time with a deadline, events skipped.
 *
 * QEMU is treated like any peer outside the process: a reply line is
 * bounded (AL_QMP_LINE_MAX), parsed strictly, and anything unexpected
 * fails the call instead of being guessed at. */
#ifndef AL_QMP_H
#define AL_QMP_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "base/err.h"

#define AL_QMP_LINE_MAX (256u << 10)

typedef struct al_qmp al_qmp;

/* Connect to the QMP socket at path (retrying while QEMU has not created
 * it yet), read the greeting and send qmp_capabilities, all before
 * deadline_ms (absolute, al_now_ms() clock). */
al_qmp *al_qmp_connect(const char *path, int64_t deadline_ms, al_err *err);
/* The same over a socket already connected to QEMU's monitor (one end
 * of a socketpair QEMU got as -chardev socket,fd=N). Takes fd, closed on
 * failure too. */
al_qmp *al_qmp_open_fd(int fd, int64_t deadline_ms, al_err *err);
void al_qmp_close(al_qmp *q);

/* Run one command. args (may be NULL) is not consumed. fd >= 0 is passed
 * along with the command (SCM_RIGHTS), for `getfd`. Returns the reply's
 * "return" value (caller puts it) or NULL: AL_ETIMEDOUT past the
 * deadline, AL_EPROTO on a malformed reply or a closed socket,
 * AL_EINTERNAL with QEMU's error description when the command failed. */
json_object *al_qmp_exec(al_qmp *q, const char *cmd, json_object *args, int fd,
			 int64_t deadline_ms, al_err *err);

/* Same, for a command whose return value is not needed. */
int al_qmp_run(al_qmp *q, const char *cmd, json_object *args,
	       int64_t deadline_ms, al_err *err);

/* Classify one reply line (without its line end): the parser behind
 * al_qmp_exec, exposed for tests and fuzzing.
 *   AL_QMP_RETURN    *out = the "return" value (caller puts it);
 *                    *id = the "id" member or -1 if there is none
 *   AL_QMP_EVENT     an asynchronous event (skipped by callers)
 *   AL_QMP_GREETING  the {"QMP":{...}} banner
 *   -1               AL_EINTERNAL for an {"error":{...}} reply (message
 *                    holds its class and desc), AL_EPROTO for anything
 *                    else */
enum { AL_QMP_RETURN = 1, AL_QMP_EVENT = 2, AL_QMP_GREETING = 3 };
int al_qmp_parse_reply(const char *line, size_t len, json_object **out,
		       int64_t *id, al_err *err);

#endif
