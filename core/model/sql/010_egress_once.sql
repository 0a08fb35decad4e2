-- Egress decisions recorded exactly once: each row keeps where the
-- controller read it (its gateway file's seq and its line's index in
-- that file), unique per sandbox, so a file ingested again after a
-- crash between the commit and the unlink adds no row and no count
-- (core/model/egress_log.c: ON CONFLICT DO NOTHING). Rows from before this
-- migration have no place (NULL: never in conflict).
ALTER TABLE egress_log ADD COLUMN seq bigint, ADD COLUMN idx integer;
CREATE UNIQUE INDEX egress_log_once ON egress_log (sandbox_id, seq, idx);
