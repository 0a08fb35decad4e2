-- 008_network: each sandbox's network setting (the API's "network"
-- object, core/net/netspec.h: canonical, checked by fcgi before it is
-- written) and the egress log the controller fills from the gateways'
-- decision files (core/net/egress.h).
ALTER TABLE sandboxes
	ADD COLUMN network jsonb NOT NULL
		DEFAULT '{"mode":"allowlist","allow":[],"deny":[]}'::jsonb;

-- One row per decision, as the gateway recorded it. The sandbox is not a
-- foreign key: the log outlives its sandbox until retention takes it.
CREATE TABLE egress_log (
	id         bigserial PRIMARY KEY,
	sandbox_id text NOT NULL,
	at         timestamptz NOT NULL,
	allow      boolean NOT NULL,
	reason     text NOT NULL,
	protocol   text NOT NULL
		CHECK (protocol IN ('dns', 'http', 'https', 'tcp', 'none')),
	name       text NOT NULL,
	port       integer NOT NULL CHECK (port BETWEEN 0 AND 65535),
	method     text,
	path       text,
	dropped    bigint NOT NULL DEFAULT 0
);
-- GET /v1/sandboxes/{id}/egress: newest first, cursor (at, id).
CREATE INDEX egress_log_sandbox ON egress_log (sandbox_id, at DESC, id DESC);
-- Retention deletes by age.
CREATE INDEX egress_log_at ON egress_log (at);

-- Decisions counted per sandbox since it was created (what metrics read;
-- kept when retention deletes the rows they count), written by the same
-- statement as the rows.
CREATE TABLE egress_counts (
	sandbox_id text PRIMARY KEY,
	allowed    bigint NOT NULL DEFAULT 0,
	denied     bigint NOT NULL DEFAULT 0,
	dropped    bigint NOT NULL DEFAULT 0
);
