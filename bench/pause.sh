#!/usr/bin/env bash
# Pause -> resume alone (bench/run.sh runs it last too): a private stack
# (bench/private-stack.sh), then bench/pause.py: for each driver GET
# /v1/info lists, BENCH_PAUSE_ROUNDS rounds of POST pause and resume on
# one busy sandbox beside the mechanism without the API (ns: its freezer
# cgroup; vm: SIGSTOP / SIGCONT of its QEMU), and a check that the
# sandbox still works after. The stack's logs are kept in
# BUILD/bench/pause-logs.
#
# Env: BENCH_PAUSE_ROUNDS (100), AIRLOCK_BUILD (build), BENCH_VM_CACHE
# (see bench/private-stack.sh).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
. bench/private-stack.sh

# The stack's logs outlive it (shim.log has each pause and resume).
bench_before_down() {
	rm -rf "$OUT/pause-logs"
	cp -r "$STATE/log" "$OUT/pause-logs" 2>/dev/null || true
}

private_stack_up
/usr/bin/python3 bench/pause.py --url "$API" --key-file "$KEY_FILE" \
	--state "$STATE" --rounds "${BENCH_PAUSE_ROUNDS:-100}"
