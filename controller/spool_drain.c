/* spool_drain: see spool_drain.h. */
#include "spool_drain.h"

#include "base/log.h"
#include "model/sandbox.h"
#include "sandbox/spool.h"

/* Spooled events recorded in one transaction. */
#define SPOOL_BATCH 256

/* A batch PostgreSQL refused while its connection works: record the
 * events one by one, and put aside (run/events/bad/) each one refused
 * on its own, so that one event cannot hold every later one back. 0,
 * or -1 when the database went away (the rest wait). */
static int apply_one_by_one(const al_config *cfg, al_db *db,
			    const al_spool_entry *ents, int n)
{
	for (int i = 0; i < n; i++) {
		al_err err = {0};
		int applied = 0;
		if (al_sandbox_record_events(db, &ents[i].e, 1, &applied,
					     &err) == 0) {
			al_spool_ack(cfg, &ents[i]);
			continue;
		}
		if (err.code == AL_EUNAVAIL)
			return -1;
		al_spool_reject(cfg, &ents[i], err.msg);
	}
	return 0;
}

/* Record what the shims spooled, a batch per transaction, and take each
 * file away once its batch is committed. PostgreSQL down: the files
 * wait for the next pass. */
void ctl_spool_drain(ctl *c)
{
	const al_config *cfg = c->cfg;
	al_db *db = c->db;
	static al_spool_entry ents[SPOOL_BATCH];
	static al_sandbox_event evs[SPOOL_BATCH];
	for (;;) {
		al_err err = {0};
		int n = al_spool_read(cfg, ents, SPOOL_BATCH, &err);
		if (n < 0)
			al_warn("spool: %s", err.msg);
		if (n <= 0)
			return;
		for (int i = 0; i < n; i++)
			evs[i] = ents[i].e;
		int applied = 0;
		if (al_sandbox_record_events(db, evs, n, &applied, &err) < 0) {
			al_warn("spool: recording %d events: %s%s", n, err.msg,
				err.code == AL_EUNAVAIL ? " (they wait)"
							: " (one by one now)");
			if (err.code == AL_EUNAVAIL ||
			    apply_one_by_one(cfg, db, ents, n) < 0)
				return;
			continue;
		}
		for (int i = 0; i < n; i++)
			al_spool_ack(cfg, &ents[i]);
		al_info("spool: recorded %d events (%d changed a sandbox)", n,
			applied);
		if (n < SPOOL_BATCH)
			return;
	}
}
