/* Stream leases and their shims (streamlease.h). */
#include "sandbox/streamlease.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "model/project.h"
#include "sandbox/shimctl.h"

#define SHIM_ANSWER_MS 3000

int al_streamlease_check(const al_config *cfg, al_db *db, const char *sandbox,
			 char (*lease)[AL_STREAM_LEASE_LEN + 1], size_t n,
			 al_code end, const char *message, al_err *err)
{
	al_frame f;
	char *req = al_streams_pack(lease, n, end, message, err);
	if (req == NULL)
		return -1;
	int rc = al_shimctl_request(cfg, sandbox, AL_F_STREAMS, req,
				    al_now_ms() + SHIM_ANSWER_MS, &f, err);
	free(req);
	al_streams_msg live = {0};
	if (rc == 0) {
		rc = al_streams_unpack(f.payload, f.len, &live, err);
		al_frame_free(&f);
	} else if (err->code == AL_EUNAVAIL) {
		/* No shim, no process: every stream of it is over. */
		*err = (al_err){0};
		rc = 0;
	}
	if (rc < 0)
		return -1; /* cannot tell: they stay counted */
	int open = 0;
	for (size_t i = 0; i < n; i++) {
		bool on = false;
		for (size_t j = 0; j < live.n && !on; j++)
			on = strcmp(lease[i], live.lease[j]) == 0;
		if (on)
			open++;
		else
			al_project_stream_release(db, lease[i]);
	}
	al_streams_msg_free(&live);
	return open;
}
