/* Fuzz the CLI's text/event-stream parser: arbitrary bytes from a server,
 * fed in irregular pieces. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../../cli/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_event(const char *event, const char *d, void *ctx)
{
	size_t *count = ctx;
	/* Touch every byte so ASan sees out-of-bounds strings. */
	*count += strlen(event) + strlen(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sse_parser p;
	size_t count = 0;
	cli_sse_init(&p, on_event, &count);
	size_t off = 0, step = 1;
	while (off < size) {
		size_t n = size - off < step ? size - off : step;
		if (cli_sse_feed(&p, (const char *)data + off, n) < 0)
			break;
		off += n;
		step = step * 3 % 17 + 1;
	}
	cli_sse_free(&p);
	return 0;
}
