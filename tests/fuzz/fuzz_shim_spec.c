/* Fuzz the unpackers of what a shim is told and what it answers: the
 * spec (al_shim_spec_unpack: a shim's stdin, a CLAIM's payload) and the
 * ready report (al_shim_ready_unpack: the ready line, a CLAIM's RESULT).
 * Whatever the bytes, an unpack returns 0 with a result within its
 * contract (which packs and unpacks to itself) or -1 with an error. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "model/sandbox.h"
#include "model/template.h"
#include "sandbox/shimspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_spec(const al_sandbox *sb, const al_template_version *tv,
		       int has_boot)
{
	if ((sb->id[0] != '\0' && !al_id_valid(sb->id)) ||
	    (sb->project[0] != '\0' && !al_id_valid(sb->project)) ||
	    !al_id_valid(sb->template_name) || !al_id_valid(sb->driver) ||
	    sb->template_version < 0 || sb->env == NULL ||
	    (sb->limits.disk_bytes != 0 &&
	     (sb->limits.memory_bytes == 0 || sb->limits.pids_max == 0 ||
	      sb->limits.cpu_shares == 0)) ||
	    (has_boot && (tv->env == NULL || tv->workdir[0] != '/')))
		abort();
	al_err err = {0};
	char *s = al_shim_spec_pack(sb, has_boot ? tv : NULL, &err);
	al_sandbox again;
	al_template_version tv2;
	int boot2 = 0;
	if (s == NULL ||
	    al_shim_spec_unpack(s, strlen(s), &again, &tv2, &boot2, &err) < 0 ||
	    strcmp(again.id, sb->id) != 0 ||
	    strcmp(again.template_name, sb->template_name) != 0 ||
	    strcmp(again.driver, sb->driver) != 0 ||
	    again.template_version != sb->template_version ||
	    memcmp(&again.limits, &sb->limits, sizeof sb->limits) != 0 ||
	    !json_object_equal(again.env, sb->env) || boot2 != has_boot ||
	    strcmp(again.project, sb->project) != 0 ||
	    !json_object_equal(again.metadata, sb->metadata) ||
	    !json_object_equal(again.network, sb->network) ||
	    (has_boot && (strcmp(tv2.workdir, tv->workdir) != 0 ||
			  strcmp(tv2.user, tv->user) != 0 ||
			  !json_object_equal(tv2.env, tv->env) ||
			  !json_object_equal(tv2.start, tv->start) ||
			  !json_object_equal(tv2.ready, tv->ready))))
		abort();
	free(s);
	al_sandbox_free_fields(&again);
	al_template_version_free(&tv2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	al_sandbox sb;
	al_template_version tv;
	int has_boot = 0;
	al_err err = {0};
	if (al_shim_spec_unpack(data, size, &sb, &tv, &has_boot, &err) == 0) {
		check_spec(&sb, &tv, has_boot);
		al_sandbox_free_fields(&sb);
		al_template_version_free(&tv);
	} else if (err.code == AL_OK || sb.env != NULL || tv.env != NULL) {
		abort();
	}
	al_shim_ready r;
	err.code = AL_OK;
	if (al_shim_ready_unpack(data, size, &r, &err) == 0) {
		if (r.pid <= 0 ||
		    (r.accel[0] != '\0' && strcmp(r.accel, "kvm") != 0 &&
		     strcmp(r.accel, "tcg") != 0))
			abort();
	} else if (err.code == AL_OK) {
		abort();
	}
	return 0;
}
