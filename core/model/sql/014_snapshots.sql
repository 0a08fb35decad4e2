-- Snapshots of sandboxes (core/model/snapshot.h): a read-only copy of a
-- sandbox's root filesystem and, for a vm, its memory and device state,
-- in pool/snapshots/<id>. A row is written 'pending' before the shim
-- takes the snapshot and turns 'ready' once the shim committed it (the
-- rename of its directory), so a directory without a ready row is
-- unfinished and one a row names is never removed by a sweep.
CREATE TABLE snapshots (
	id               text PRIMARY KEY
		CHECK (id ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
	sandbox_id       text NOT NULL REFERENCES sandboxes (id),
	project          text NOT NULL REFERENCES projects (name),
	kind             text NOT NULL
		CHECK (kind IN ('suspend', 'rolling', 'named', 'fork')),
	name             text,
	status           text NOT NULL DEFAULT 'pending'
		CHECK (status IN ('pending', 'ready', 'broken')),
	-- true: the machine's memory is in it (vm); false: files only
	memory           boolean NOT NULL DEFAULT false,
	driver           text NOT NULL,
	template         text NOT NULL,
	template_version integer,
	bytes            bigint NOT NULL DEFAULT 0,
	created_at       timestamptz NOT NULL DEFAULT now(),
	expires_at       timestamptz
);

CREATE INDEX snapshots_sandbox_idx ON snapshots (sandbox_id, created_at);
CREATE UNIQUE INDEX snapshots_name_idx ON snapshots (sandbox_id, name)
	WHERE name IS NOT NULL;

-- The snapshot a suspended sandbox resumes from; recovered_from: the
-- snapshot a sandbox that lost its machine (a host restart) was brought
-- back suspended to.
ALTER TABLE sandboxes ADD COLUMN resume_snapshot text
	REFERENCES snapshots (id);
ALTER TABLE sandboxes ADD COLUMN recovered_from text;
