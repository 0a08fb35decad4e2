-- 002_vm: the accelerator a vm sandbox runs under ("kvm" or "tcg");
-- NULL for every other driver. Written by the shim once the machine runs.
ALTER TABLE sandboxes ADD COLUMN accel text
	CHECK (accel IS NULL OR accel IN ('kvm', 'tcg'));
