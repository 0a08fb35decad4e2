-- 009_credentials: credentials sealed with the master key (never the
-- key, never a plaintext: core/cred/credcrypt.h), the audit log of their use
-- and management, and the key that created each sandbox (for the audit).

-- project NULL is global (scope_kind 'global'). The scope columns hold
-- what the kind names and nothing else.
CREATE TABLE credentials (
	id               text PRIMARY KEY CHECK (id ~ '^cr_[0-9a-f]{20}$'),
	project          text REFERENCES projects (name),
	name             text NOT NULL CHECK (name ~ '^[a-z0-9_-]{1,64}$'),
	scope_kind       text NOT NULL CHECK (scope_kind IN
				('global', 'project', 'template', 'sandbox',
				 'metadata')),
	scope_template   text,
	scope_sandbox    text,
	scope_metadata   jsonb,
	hosts            text[] NOT NULL CHECK (cardinality(hosts) > 0),
	header           text,
	format           text NOT NULL,
	rate_requests    integer CHECK (rate_requests > 0),
	rate_per_seconds integer CHECK (rate_per_seconds > 0),
	ciphertext       bytea NOT NULL,
	key_id           integer NOT NULL CHECK (key_id > 0),
	version          integer NOT NULL DEFAULT 1 CHECK (version > 0),
	created_at       timestamptz NOT NULL DEFAULT now(),
	updated_at       timestamptz NOT NULL DEFAULT now(),
	CHECK ((project IS NULL) = (scope_kind = 'global')),
	CHECK ((scope_template IS NOT NULL) = (scope_kind = 'template')),
	CHECK ((scope_sandbox IS NOT NULL) = (scope_kind = 'sandbox')),
	CHECK ((scope_metadata IS NOT NULL) = (scope_kind = 'metadata')),
	CHECK ((rate_requests IS NULL) = (rate_per_seconds IS NULL))
);
-- One per (project, name, scope).
CREATE UNIQUE INDEX credentials_scope_idx ON credentials
	(coalesce(project, ''), name, scope_kind, coalesce(scope_template, ''),
	 coalesce(scope_sandbox, ''), coalesce(scope_metadata, '{}'::jsonb));
-- The effective set of a sandbox reads its project's and the globals.
CREATE INDEX credentials_project_idx ON credentials (project, name);
-- Master key rotation finds the rows of older keys.
CREATE INDEX credentials_key_idx ON credentials (key_id);

-- credential is the name (rows outlive credentials and sandboxes).
CREATE TABLE audit_log (
	id         bigserial PRIMARY KEY,
	at         timestamptz NOT NULL DEFAULT now(),
	project    text,
	sandbox    text,
	key_id     bigint,
	credential text,
	action     text NOT NULL,
	host       text,
	method     text,
	path       text,
	status     integer,
	decision   text,
	reason     text
);
CREATE INDEX audit_log_at_idx ON audit_log (at DESC, id DESC);
CREATE INDEX audit_log_project_idx ON audit_log (project, at DESC, id DESC);
CREATE INDEX audit_log_credential_idx ON audit_log (credential, at DESC);
CREATE INDEX audit_log_sandbox_idx ON audit_log (sandbox, at DESC);

ALTER TABLE sandboxes ADD COLUMN created_by_key bigint;
