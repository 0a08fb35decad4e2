-- 011_cpus: each sandbox's CPU cap ("cpus", a CFS quota) in thousandths
-- of a CPU, and the project quota on their sum. Sandboxes made before
-- this migration count as one CPU each (the default) until they end; new
-- rows must name their cap, so a forgotten one fails instead of
-- defaulting.
ALTER TABLE sandboxes ADD COLUMN cpu_millis integer NOT NULL DEFAULT 1000
	CHECK (cpu_millis > 0);
ALTER TABLE sandboxes ALTER COLUMN cpu_millis DROP DEFAULT;
-- NULL: the operator's default (AIRLOCK_QUOTA_CPUS), like the others.
ALTER TABLE projects ADD COLUMN cpu_millis bigint CHECK (cpu_millis >= 0);
