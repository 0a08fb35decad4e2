/* credstore: see credstore.h. */
#include "credstore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/audit.h"
#include "model/credential.h"

static int effective(void *arg, const char *sandbox, al_credsvc_sandbox *sb,
		     al_cred_set *out, al_err *err)
{
	ctl_credstore *cs = arg;
	al_sandbox_ref ref;
	memset(&ref, 0, sizeof ref);
	if (al_db_ensure(cs->db, err) < 0 ||
	    al_keyring_refresh(&cs->kr, err) < 0 ||
	    al_sandbox_ref_load(cs->db, sandbox, &ref, err) < 0)
		return -1;
	int rc = al_credential_effective(cs->db, &cs->kr, &ref, out, err);
	snprintf(sb->project, sizeof sb->project, "%s", ref.project);
	if (ref.created_by_key > 0)
		snprintf(sb->key_id, sizeof sb->key_id, "%lld",
			 ref.created_by_key);
	else
		sb->key_id[0] = '\0';
	al_sandbox_ref_free(&ref);
	return rc;
}

static const char *or_null(const char *s)
{
	return s[0] != '\0' ? s : NULL;
}

static int audit(void *arg, const al_credsvc_row *rows, size_t n, al_err *err)
{
	ctl_credstore *cs = arg;
	al_audit_rec *recs = calloc(n > 0 ? n : 1, sizeof *recs);
	if (recs == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const al_credsvc_row *r = &rows[i];
		recs[i] = (al_audit_rec){
			.at_us = r->at_ms * 1000,
			.project = or_null(r->sb.project),
			.sandbox = or_null(r->sandbox),
			.key_id = atoll(r->sb.key_id),
			.credential = or_null(r->use.name),
			.action = r->use.action,
			.host = or_null(r->use.host),
			.method = or_null(r->use.method),
			.path = or_null(r->use.path),
			.status = r->use.status,
			.decision = r->use.allow ? "allow" : "deny",
			.reason = or_null(r->use.reason),
		};
	}
	int rc = al_db_ensure(cs->db, err) < 0
			 ? -1
			 : al_audit_insert(cs->db, recs, n, err);
	free(recs);
	return rc;
}

int ctl_credstore_open(ctl_credstore *cs, const al_config *cfg,
		       al_credsvc_store *out, al_err *err)
{
	memset(cs, 0, sizeof *cs);
	if (al_keyring_load(&cs->kr, cfg->state_dir, 0, err) < 0)
		return -1;
	cs->db = al_db_open(cfg->db_conninfo, err);
	if (cs->db == NULL) {
		al_keyring_wipe(&cs->kr);
		return -1;
	}
	*out = (al_credsvc_store){.effective = effective,
				  .audit = audit,
				  .arg = cs};
	return 0;
}

void ctl_credstore_close(ctl_credstore *cs)
{
	if (cs->db != NULL)
		al_db_close(cs->db);
	cs->db = NULL;
	al_keyring_wipe(&cs->kr);
}
