-- 001_init: api keys, templates, sandboxes and their event log.
-- Applied once by al_db_migrate inside a transaction.

CREATE TABLE IF NOT EXISTS schema_migrations (
	version    integer PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
	id         bigserial PRIMARY KEY,
	name       text NOT NULL,
	-- sha256 of the key, lowercase hex; the key itself is never stored
	key_hash   text NOT NULL UNIQUE CHECK (key_hash ~ '^[0-9a-f]{64}$'),
	is_admin   boolean NOT NULL DEFAULT false,
	created_at timestamptz NOT NULL DEFAULT now(),
	revoked_at timestamptz
);

CREATE TABLE templates (
	name       text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
	version    integer NOT NULL DEFAULT 1,
	driver     text NOT NULL,
	memory_mb  integer NOT NULL CHECK (memory_mb > 0),
	pids       integer NOT NULL CHECK (pids > 0),
	cpu_shares integer NOT NULL CHECK (cpu_shares > 0),
	created_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO templates (name, version, driver, memory_mb, pids, cpu_shares)
VALUES ('minimal', 1, 'ns', 512, 512, 1024);

CREATE TABLE sandboxes (
	id           text PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
	template     text NOT NULL REFERENCES templates (name),
	driver       text NOT NULL,
	state        text NOT NULL CHECK (state IN ('creating', 'running',
				'paused', 'suspended', 'error', 'deleted')),
	error        text,
	memory_bytes bigint NOT NULL,
	pids_max     integer NOT NULL,
	cpu_shares   integer NOT NULL,
	env          jsonb NOT NULL DEFAULT '{}',
	metadata     jsonb NOT NULL DEFAULT '{}',
	shim_pid     integer,
	created_at   timestamptz NOT NULL DEFAULT now(),
	expires_at   timestamptz NOT NULL,
	updated_at   timestamptz NOT NULL DEFAULT now(),
	deleted_at   timestamptz
);

CREATE INDEX sandboxes_state_idx ON sandboxes (state);
CREATE INDEX sandboxes_expires_idx ON sandboxes (expires_at)
	WHERE state <> 'deleted';
CREATE INDEX sandboxes_metadata_idx ON sandboxes USING gin (metadata);

CREATE TABLE sandbox_events (
	id         bigserial PRIMARY KEY,
	sandbox_id text NOT NULL REFERENCES sandboxes (id),
	at         timestamptz NOT NULL DEFAULT now(),
	from_state text,
	to_state   text NOT NULL,
	event      text NOT NULL,
	detail     text
);

CREATE INDEX sandbox_events_sandbox_idx ON sandbox_events (sandbox_id, at);
