-- 005_disk: each sandbox's disk cap, the qgroup limit on the data its
-- subvolume holds exclusively (what it wrote on top of its template).
-- A template carries the default; a create may ask for another size.
ALTER TABLE templates ADD COLUMN disk_mb integer NOT NULL DEFAULT 4096
	CHECK (disk_mb > 0);
ALTER TABLE sandboxes ADD COLUMN disk_bytes bigint NOT NULL
	DEFAULT 4294967296 CHECK (disk_bytes > 0);
