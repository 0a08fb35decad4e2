/* egress-tool RUN_DIR SANDBOX N AT_MS
 *
 * Writes N egress decisions for SANDBOX through the gateway's writer
 * (core/net/egress.h), as a gateway would but without its log rate (the
 * test pages through every record; the rate has tests of its own):
 * record i is at AT_MS + i, allowed when i is even, protocol https to
 * host<i>.example:443 GET /p/<i>. Prints "dropped=D suppressed=S". For
 * test_network_api. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "net/egress.h"
#include "proto/agentproto.h"

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: egress-tool RUN_DIR SANDBOX N AT_MS\n");
		return 100;
	}
	long n = strtol(argv[3], NULL, 10);
	int64_t at = strtoll(argv[4], NULL, 10);
	al_err err = {0};
	const al_egress_writer_limits unrated = {
		.batch = AL_EGRESS_BATCH_MAX,
		.flush_ms = AL_EGRESS_FLUSH_MS,
		.files = AL_EGRESS_FILES_MAX,
	};
	al_egress_writer *w = al_egress_writer_open(argv[1], argv[2], &unrated,
						    &err);
	if (w == NULL) {
		fprintf(stderr, "egress-tool: %s\n", err.msg);
		return 111;
	}
	for (long i = 0; i < n; i++) {
		char name[64], path[64];
		snprintf(name, sizeof name, "host%ld.example", i);
		snprintf(path, sizeof path, "/p/%ld", i);
		al_egress_rec r;
		al_egress_rec_set(&r, at + i, argv[2], i % 2 == 0,
				  i % 2 == 0 ? "allow list" : "not allowed",
				  AL_EGRESS_HTTPS, name, 443, "GET", path);
		al_egress_writer_add(w, &r, al_now_ms());
	}
	if (al_egress_writer_flush(w, al_now_ms(), true, &err) < 0) {
		fprintf(stderr, "egress-tool: %s\n", err.msg);
		return 111;
	}
	printf("dropped=%" PRIu64 " suppressed=%" PRIu64 "\n",
	       al_egress_writer_dropped(w), al_egress_writer_suppressed(w));
	al_egress_writer_close(w);
	return 0;
}
