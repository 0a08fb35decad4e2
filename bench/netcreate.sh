#!/bin/bash
# Create latency with a network slot per sandbox beside without: one
# private stack (bench/private-stack.sh) per setting, warm pool as
# configured (default) and cold (AIRLOCK_WARM_POOL=0), bench/netcreate.py
# on each. usage: bench/netcreate.sh [driver] [count]
set -euo pipefail
cd "$(dirname "$0")/.."
driver=${1:-ns}
count=${2:-40}
echo "create latency, template minimal, $count sequential creates each:"
for pool in default 0; do
	for net in on none; do
		(
			REPO=$PWD
			if [ "$pool" = 0 ]; then export AIRLOCK_WARM_POOL=0 AIRLOCK_WARM_POOL_VM=0; fi
			if [ "$net" = none ]; then export AIRLOCK_NET_DEFAULT=none; fi
			# shellcheck source=bench/private-stack.sh
			. bench/private-stack.sh
			private_stack_up >/dev/null
			/usr/bin/python3 bench/netcreate.py --url "$API" \
				--key-file "$KEY_FILE" --driver "$driver" \
				--count "$count" \
				--label "pool $pool, network $net"
		)
	done
done
