-- 007_stream_leases: the open event streams of each project, counted
-- against its concurrent_streams quota. fcgi writes a lease when it
-- starts a stream and hands it to nginx; only the sandbox's shim sees the
-- stream end, so a start that finds the project at its limit asks the
-- shims which of its older leases are still open and drops the others
-- (core/model/project.h).
CREATE TABLE stream_leases (
	lease      text PRIMARY KEY CHECK (lease ~ '^[0-9a-f]{32}$'),
	project    text NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
	sandbox_id text NOT NULL,
	key_id     bigint NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX stream_leases_project ON stream_leases (project);
CREATE INDEX stream_leases_key ON stream_leases (key_id);
