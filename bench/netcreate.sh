#!/bin/bash
# Create latency with a network (slot and gateway) beside without
# ("network":{"mode":"none"}): one private stack (bench/private-stack.sh)
# with the warm pool as configured, one cold (AIRLOCK_WARM_POOL=0); on
# each, bench/netcreate.py alternates the two settings in rounds, so
# that the machine's load falls on both alike. Then where the shims say
# the starts went (bench/steps.py; net: the slot's lease).
# usage: bench/netcreate.sh [driver] [count per round] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
driver=${1:-ns}
count=${2:-20}
rounds=${3:-2}
echo "create latency, template minimal, $driver, $rounds rounds of $count sequential creates each:"
for pool in default 0; do
	(
		REPO=$PWD
		if [ "$pool" = 0 ]; then export AIRLOCK_WARM_POOL=0 AIRLOCK_WARM_POOL_VM=0; fi
		bench_before_down() {
			/usr/bin/python3 bench/steps.py "$STATE/log/shim.log" \
				--driver "$driver" || true
		}
		# shellcheck source=bench/private-stack.sh
		. bench/private-stack.sh
		private_stack_up >/dev/null
		for r in $(seq "$rounds"); do
			for net in on none; do
				/usr/bin/python3 bench/netcreate.py --url "$API" \
					--key-file "$KEY_FILE" --driver "$driver" \
					--network "$net" --count "$count" \
					--label "pool $pool, net $net, round $r"
			done
		done
	)
done
