/* Fuzz core/policy's lifecycle decision: arbitrary bytes as a policy's
 * source and as the fields of a sandbox. Whatever they are: no crash, and
 * a decision always in range (a call that fails decides nothing; one that
 * answers has every duration within bounds and a known action).
 *
 * Input: fields separated by NUL:
 *   source driver state meta-key meta-value */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const al_policy_limits limits = {2u << 20, 1u << 20, 3000};

static void check(al_policy *p, const al_lifecycle_req *r)
{
	al_lifecycle_decision d;
	int rc = al_policy_lifecycle(p, r, &d);
	if (rc < 0) {
		if (d.idle_action != AL_IDLE_NONE || d.snapshot_every != 0 ||
		    d.snapshot_keep != 0)
			abort(); /* a failure decides nothing */
		return;
	}
	if ((unsigned)d.idle_action >= AL_IDLE_ACTION_MAX || d.idle_after < 1 ||
	    d.idle_after > AL_LIFECYCLE_SECONDS_MAX || d.snapshot_every < 0 ||
	    d.snapshot_every > AL_LIFECYCLE_SECONDS_MAX ||
	    d.snapshot_keep < 0 || d.snapshot_keep > AL_LIFECYCLE_SECONDS_MAX)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int logs;
	if (!logs) {
		al_log_init("fuzz_policy_lifecycle", AL_LOG_ERROR);
		logs = 1;
	}
	char *buf = malloc(size + 1);
	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	char *end = buf + size;
	char *f[5] = {0};
	char *cur = buf;
	for (size_t i = 0; i < 5; i++) {
		f[i] = cur;
		if (cur < end)
			cur += strlen(cur) + 1;
		if (cur > end)
			cur = end;
	}
	al_policy *p = al_policy_open_source("fuzz.lua", f[0], strlen(f[0]),
					     &al_policy_lifecycle_kind, &limits,
					     NULL);
	if (p != NULL) {
		al_policy_kv meta = {f[3], f[4]};
		al_lifecycle_req r = {.sandbox = "sb1",
				      .template_name = "minimal",
				      .project = "default",
				      .driver = f[1],
				      .state = f[2],
				      .metadata = &meta,
				      .n_metadata = 1};
		check(p, &r);
		check(p, &r); /* the same state answers again */
		al_policy_close(p);
	}
	free(buf);
	return 0;
}
