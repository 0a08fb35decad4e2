-- The operation under way on a sandbox (core/model/sandbox_op.h): written
-- before its work starts and cleared with the state it leads to, so the
-- public state stays what it was while the work runs and one operation
-- at a time runs on a sandbox. last_activity_at: the last API call,
-- command or stream byte, what idle rules measure.
ALTER TABLE sandboxes
	ADD COLUMN op text CHECK (op IN ('pausing', 'resuming', 'suspending',
		'snapshotting', 'forking')),
	ADD COLUMN op_started_at timestamptz,
	ADD COLUMN last_activity_at timestamptz NOT NULL DEFAULT now(),
	-- What its timeout does: delete it, or suspend it (kept suspended
	-- for a week, then deleted).
	ADD COLUMN on_timeout text NOT NULL DEFAULT 'delete'
		CHECK (on_timeout IN ('delete', 'suspend')),
	-- A call that needs it running resumes it first when suspended.
	ADD COLUMN auto_resume boolean NOT NULL DEFAULT false;

CREATE INDEX sandboxes_op_idx ON sandboxes (op_started_at)
	WHERE op IS NOT NULL;
