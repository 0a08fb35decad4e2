#!/usr/bin/env bash
# Bursts on a stack just started, as a user's first burst after
# `make run` meets it: a private stack (bench/private-stack.sh), then
# at once bench/burst.py (BENCH_BURSTS (3) bursts of BENCH_BURST (200)
# ns creates from 32 clients, 10 s apart, bwrap right after each; the
# first burst printed apart from the later ones).
#
# Env: BENCH_BURST (200), BENCH_BURSTS (3), AIRLOCK_BUILD (build: point
# it at another tree's build to measure that tree's programs with the
# same script).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
export AIRLOCK_QUOTA_CREATES_PER_MINUTE=${AIRLOCK_QUOTA_CREATES_PER_MINUTE:-1000000}
export AIRLOCK_QUOTA_SANDBOXES=${AIRLOCK_QUOTA_SANDBOXES:-1000}
. bench/private-stack.sh
PEER=$STATE/pool/bench-peer-root

bench_before_down() {
	if [ -d "$PEER" ]; then
		btrfs subvolume delete "$PEER" >/dev/null 2>&1
	fi
}

private_stack_up
# No wait after `up`: the first burst comes as soon as a user's could.
btrfs subvolume snapshot "$STATE/pool/templates/minimal" "$PEER" >/dev/null
/usr/bin/python3 bench/burst.py --url "$API" --key-file "$KEY_FILE" \
	--peer-root "$PEER" --count "${BENCH_BURST:-200}" --clients 32 \
	--bursts "${BENCH_BURSTS:-3}" --shim-log "$STATE/log/shim.log"
