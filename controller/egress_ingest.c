/* The egress log's ingest and retention (see egress_ingest.h). */
#include "egress_ingest.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "model/build.h"
#include "model/egress_log.h"
#include "model/sandbox.h"
#include "net/egress.h"

/* Records per INSERT (whole files: one file adds at most 256). */
#define INGEST_BATCH 4096
/* Batches per call: a flood waits for the next tick, it does not hold
 * the loop. */
#define INGEST_ROUNDS 8

/* Empty directories of sandboxes and builds (a build's gateway writes
 * under the build's id) that are not live any more go (one query each
 * for all of them). */
static void tidy_dirs(const al_config *cfg, al_db *db, const al_egress_batch *b)
{
	if (b->n_empty == 0)
		return;
	char(*ids)[64] = NULL;
	int n = 0, nb = 0;
	al_build_pending *builds = NULL;
	al_err err = {0};
	if (al_sandbox_list_live(db, &ids, &n, &err) < 0 ||
	    al_build_list_pending(db, &builds, &nb, &err) < 0) {
		al_warn("egress: %s", err.msg);
		free(ids);
		return;
	}
	for (size_t i = 0; i < b->n_empty; i++) {
		int live = 0;
		for (int k = 0; k < n && !live; k++)
			live = strcmp(ids[k], b->empty[i]) == 0;
		for (int k = 0; k < nb && !live; k++)
			live = strcmp(builds[k].id, b->empty[i]) == 0;
		if (!live)
			al_egress_dir_remove(cfg->run_dir, b->empty[i]);
	}
	free(ids);
	free(builds);
}

/* A batch PostgreSQL refused while the connection works: file by file,
 * so that one file it can never take does not hold back all the rest. */
static void insert_one_by_one(const al_config *cfg, al_db *db,
			      const al_egress_batch *b)
{
	for (size_t i = 0; i < b->n_files; i++) {
		size_t first, n;
		al_err err = {0};
		al_egress_batch_file(b, i, &first, &n);
		if (al_egress_log_insert(db, b->recs + first, n, &err) == 0)
			al_egress_ack_file(cfg->run_dir, b, i);
		else if (al_db_ensure(db, NULL) == 0)
			al_egress_reject_file(cfg->run_dir, b, i, err.msg);
		else
			return; /* the database went: next tick */
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
			al_warn("egress: %s", err.msg);
			/* Down: the files stay for the next try. */
			if (al_db_ensure(db, NULL) == 0)
				insert_one_by_one(cfg, db, &b);
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
