-- 004_tenancy: projects, keys with a project and a role, and the project
-- every sandbox, template and build belongs to. Rows made before this
-- migration move to project 'default'; every key existing then was made
-- by the bootstrap (an admin), so existing templates stay public.

CREATE TABLE projects (
	name       text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
	created_at timestamptz NOT NULL DEFAULT now(),
	-- Quotas; NULL means the operator's default (AIRLOCK_QUOTA_*).
	running_sandboxes  bigint CHECK (running_sandboxes >= 0),
	memory_mb          bigint CHECK (memory_mb >= 0),
	disk_mb            bigint CHECK (disk_mb >= 0),
	concurrent_builds  bigint CHECK (concurrent_builds >= 0),
	concurrent_streams bigint CHECK (concurrent_streams >= 0),
	creates_per_minute bigint CHECK (creates_per_minute >= 0)
);

INSERT INTO projects (name) VALUES ('default');

-- The defaults only carry existing rows over: new rows must name their
-- project, so a forgotten one fails instead of landing in 'default'.
ALTER TABLE api_keys
	ADD COLUMN project text NOT NULL DEFAULT 'default'
		REFERENCES projects (name),
	ADD COLUMN role text NOT NULL DEFAULT 'member'
		CHECK (role IN ('admin', 'member'));
UPDATE api_keys SET role = 'admin' WHERE is_admin;
ALTER TABLE api_keys ALTER COLUMN project DROP DEFAULT,
	ALTER COLUMN role DROP DEFAULT, DROP COLUMN is_admin;

ALTER TABLE sandboxes ADD COLUMN project text NOT NULL DEFAULT 'default'
	REFERENCES projects (name);
ALTER TABLE sandboxes ALTER COLUMN project DROP DEFAULT;
-- Quota checks: recent creates of one project, and its live sandboxes
-- without reading the deleted ones, which pile up over a host's life.
CREATE INDEX sandboxes_project_idx ON sandboxes (project, created_at);
CREATE INDEX sandboxes_project_live_idx ON sandboxes (project)
	WHERE state <> 'deleted';

-- A public template can be created from by every project and changed
-- only by admin keys. Names stay unique across projects.
ALTER TABLE templates
	ADD COLUMN project text NOT NULL DEFAULT 'default'
		REFERENCES projects (name),
	ADD COLUMN public boolean NOT NULL DEFAULT false;
UPDATE templates SET public = true;
ALTER TABLE templates ALTER COLUMN project DROP DEFAULT;

-- public: the build is an admin's, and the template it creates is public.
ALTER TABLE template_builds
	ADD COLUMN project text NOT NULL DEFAULT 'default'
		REFERENCES projects (name),
	ADD COLUMN public boolean NOT NULL DEFAULT false;
UPDATE template_builds SET public = true;
ALTER TABLE template_builds ALTER COLUMN project DROP DEFAULT;
CREATE INDEX template_builds_project_idx ON template_builds (project)
	WHERE status IN ('queued', 'running');
