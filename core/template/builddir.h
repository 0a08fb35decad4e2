/* builddir: where a template build's files are. Each build has
 * state/builds/<id>, holding what fcgi received (Airlockfile,
 * context.tar), the builder's log (log.jsonl) and the log streams'
 * tokens and leases (core/template/buildlog.h). The build's row is
 * core/model/build.h's.
 *
 * log.jsonl is append-only, one JSON object per line, written by the
 * builder and streamed by the API as server-sent events (the "event"
 * member is the SSE event name, the line is its data):
 *   {"event":"step","step":2,"steps":5,"line":3,"text":"RUN make",
 *    "cached":false}
 *   {"event":"output","step":2,"stream":"stdout","data":"..."}
 *        (or "data_b64" when the bytes are not UTF-8; a build's output
 *        events stop after 4 MiB with one {"event":"output",...,
 *        "stream":"stderr","truncated":true,"data":"..."} saying so)
 *   {"event":"status","status":"succeeded","version":3}
 *   {"event":"status","status":"failed","step":2,"line":3,
 *    "error":"RUN exited with 2"}
 * The last line of a finished build is its status line. */
#ifndef AL_BUILDDIR_H
#define AL_BUILDDIR_H

#include <stddef.h>

#include "base/config.h"
#include "base/err.h"

/* state/builds/<id> into out; AL_EINVAL for an id that is not
 * al_id_valid or a path longer than outlen. */
int al_builddir_path(const al_config *cfg, const char *id, char *out,
		     size_t outlen, al_err *err);

#endif
