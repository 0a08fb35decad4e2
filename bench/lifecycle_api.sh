#!/usr/bin/env bash
# Suspend, resume and fork alone (bench/run.sh runs them too): a private
# stack without a warm pool (bench/private-stack.sh; the creates beside
# which resume and fork are shown are cold), then
#   bench/lifecycle_api.py  through the API, for each driver GET /v1/info
#                           lists (vm skipped, saying so, where not);
#   bench/vmcapture         where vm is listed: the capture beside QEMU's
#                           migrate to a file, at the driver level, on
#                           the same stack's template and pool.
# The stack's logs are kept in BUILD/bench/lifecycle-logs (shim.log has
# each start's timing line and each snapshot's bytes and dirty pages).
#
# Env: BENCH_LC_ROUNDS (5), BENCH_LC_FORK (10), BENCH_LC_WRITE_MIB (64),
# BENCH_LC_PEER_ROUNDS (3), AIRLOCK_BUILD (build), BENCH_VM_CACHE (see
# bench/private-stack.sh).
set -euo pipefail

# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck disable=SC2086
bench_cc vmcapture bench/vmcapture.c "$BUILD/libairlock.a" $AL_LIBS

export AIRLOCK_WARM_POOL=0 AIRLOCK_WARM_POOL_VM=0
export AIRLOCK_QUOTA_CREATES_PER_MINUTE=${AIRLOCK_QUOTA_CREATES_PER_MINUTE:-1000000}
. bench/private-stack.sh

bench_before_down() {
	rm -rf "$OUT/lifecycle-logs"
	cp -r "$STATE/log" "$OUT/lifecycle-logs" 2>/dev/null || true
}

private_stack_up
private_stack_drivers
/usr/bin/python3 bench/lifecycle_api.py --url "$API" --key-file "$KEY_FILE" \
	--state "$STATE" --rounds "${BENCH_LC_ROUNDS:-5}" \
	--fork "${BENCH_LC_FORK:-10}" --write-mib "${BENCH_LC_WRITE_MIB:-64}"
if [ "$vm_ok" -eq 1 ]; then
	"$OUT/vmcapture" --template "$STATE/pool/templates/minimal" \
		--rounds "${BENCH_LC_PEER_ROUNDS:-3}" \
		--mib "${BENCH_LC_WRITE_MIB:-64}"
else
	echo
	echo "bench: vm capture peer skipped: the stack does not list the vm driver"
	echo "  ($info)"
fi
