-- 006_warm_pool: per-template warm pool bounds set by an admin
-- (PUT /v1/templates/{name}/warm_pool); NULL follows the operator's
-- AIRLOCK_WARM_POOL* defaults. A rebuild keeps them (same row).
ALTER TABLE templates
	ADD COLUMN pool_ns_min integer CHECK (pool_ns_min BETWEEN 0 AND 64),
	ADD COLUMN pool_ns_max integer CHECK (pool_ns_max BETWEEN 0 AND 64),
	ADD COLUMN pool_vm_min integer CHECK (pool_vm_min BETWEEN 0 AND 64),
	ADD COLUMN pool_vm_max integer CHECK (pool_vm_max BETWEEN 0 AND 64);
