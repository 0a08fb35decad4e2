/* The egress log's ingest and retention (see egress_ingest.h). */
#include "egress_ingest.h"

#include "egress.h"
#include "egress_log.h"
#include "log.h"
#include "sandbox.h"

/* Records per INSERT (whole files: one file adds at most 256). */
#define INGEST_BATCH 4096
/* Batches per call: a flood waits for the next tick, it does not hold
 * the loop. */
#define INGEST_ROUNDS 8

static void tidy_dirs(const al_config *cfg, al_db *db, const al_egress_batch *b)
{
	for (size_t i = 0; i < b->n_empty; i++) {
		al_sandbox sb;
		al_err err = {0};
		if (al_sandbox_get(db, b->empty[i], &sb, &err) == 0) {
			int live = sb.state != AL_ST_ERROR;
			al_sandbox_free_fields(&sb);
			if (live)
				continue;
		} else if (err.code != AL_ENOENT) {
			continue;
		}
		al_egress_dir_remove(cfg->run_dir, b->empty[i]);
	}
}

void ctl_egress_ingest(const al_config *cfg, al_db *db, bool tidy)
{
	static al_egress_batch b;
	for (int round = 0; round < INGEST_ROUNDS; round++) {
		al_err err = {0};
		int files = al_egress_read(cfg->run_dir, INGEST_BATCH, &b,
					   &err);
		if (files < 0) {
			al_warn("egress: %s", err.msg);
			return;
		}
		if (tidy && round == 0)
			tidy_dirs(cfg, db, &b);
		if (files == 0)
			return;
		if (al_egress_log_insert(db, b.recs, b.n, &err) < 0) {
			/* The files stay for the next try; a batch that
			 * can never go in is found by its bad file
			 * (every file was checked when read). */
			al_warn("egress: %s", err.msg);
			return;
		}
		al_egress_ack(cfg->run_dir, &b);
		al_debug("egress: recorded %zu decisions from %d files", b.n,
			 files);
	}
}

void ctl_egress_retain(const al_config *cfg, al_db *db)
{
	al_err err = {0};
	long long n = al_egress_log_prune(db, cfg->egress_retention_days, &err);
	if (n < 0)
		al_warn("egress retention: %s", err.msg);
	else if (n > 0)
		al_info("egress retention: deleted %lld decisions older than"
			" %u days",
			n, cfg->egress_retention_days);
}
