-- 003_templates: template versions built from Airlockfiles, and builds.
-- templates.version is the current version; every version's filesystem
-- lives in pool/template-versions/<name>/<version>/rootfs and stays while
-- a sandbox created from it is alive.

CREATE TABLE template_versions (
	name       text NOT NULL REFERENCES templates (name) ON DELETE CASCADE,
	version    integer NOT NULL CHECK (version > 0),
	build_id   text,
	airlockfile text,
	-- What the template's sandboxes run with: ENV, WORKDIR, USER, and the
	-- START / READY commands (argv arrays) or NULL.
	env        jsonb NOT NULL DEFAULT '{}',
	workdir    text NOT NULL DEFAULT '/',
	run_user   text NOT NULL DEFAULT 'root',
	start_cmd  jsonb,
	ready_cmd  jsonb,
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (name, version)
);

-- The seeded minimal row gets its version 1 from its first build.
CREATE TABLE template_builds (
	id          text PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
	name        text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
	status      text NOT NULL CHECK (status IN ('queued', 'running',
					'succeeded', 'failed')),
	no_cache    boolean NOT NULL DEFAULT false,
	step        integer NOT NULL DEFAULT 0,
	steps       integer NOT NULL DEFAULT 0,
	version     integer,
	error       text,
	builder_pid integer,
	created_at  timestamptz NOT NULL DEFAULT now(),
	finished_at timestamptz
);

CREATE INDEX template_builds_name_idx ON template_builds (name, created_at);

-- Sandboxes keep the version they were created from; a deleted template
-- leaves its deleted sandboxes' history readable.
ALTER TABLE sandboxes ADD COLUMN template_version integer;
UPDATE sandboxes s SET template_version = t.version
	FROM templates t WHERE t.name = s.template;
ALTER TABLE sandboxes DROP CONSTRAINT sandboxes_template_fkey;
