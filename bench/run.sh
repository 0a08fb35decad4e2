#!/usr/bin/env bash
# `make bench`: a private stack (temporary state directory, free ports,
# the optimized build/), 200 rounds of create -> exec `true` -> delete
# through nginx, and beside it bubblewrap running /bin/true in a fresh
# namespace set over a snapshot of the same template. Tears down after.
#
# Env: BENCH_ROUNDS (200), AIRLOCK_BUILD (build).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
ROUNDS=${BENCH_ROUNDS:-200}
BUILD=$(realpath -m -- "${AIRLOCK_BUILD:-$REPO/build}")
OUT=$BUILD/bench
mkdir -p "$OUT"

cc -std=gnu17 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE \
	-o "$OUT/lifecycle" bench/lifecycle.c -lcurl -ljson-c

free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

STATE=$(mktemp -d /tmp/airlock-bench-XXXXXX)
export AIRLOCK_STATE=$STATE AIRLOCK_BUILD=$BUILD
export AIRLOCK_HTTP_PORT=${BENCH_HTTP_PORT:-$(free_port)}
export AIRLOCK_HTTPS_PORT=${BENCH_HTTPS_PORT:-$(free_port)}
export AIRLOCK_POOL_SIZE=${AIRLOCK_POOL_SIZE:-4G}
PEER=$STATE/pool/bench-peer-root

cleanup() {
	set +e
	if [ -d "$PEER" ]; then
		btrfs subvolume delete "$PEER" >/dev/null 2>&1
	fi
	scripts/stack.sh down
	if mountpoint -q "$STATE/pool"; then umount -l "$STATE/pool"; fi
	for dev in $(losetup -j "$STATE/pool.img" -n -O NAME 2>/dev/null); do
		losetup -d "$dev"
	done
	rm -rf "$STATE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "bench: starting a private stack in $STATE"
scripts/stack.sh up >"$OUT/stack-up.log" 2>&1 || {
	cat "$OUT/stack-up.log"
	cp -r "$STATE/log" "$OUT/failed-logs" 2>/dev/null || true
	exit 1
}

btrfs subvolume snapshot "$STATE/pool/templates/minimal" "$PEER" >/dev/null

# Series 1: a warm host. Each create claims a standby from the warm pool
# (the default, AIRLOCK_WARM_POOL=2); the bench waits, untimed, for the
# controller to refill the pool before each round.
"$OUT/lifecycle" --url "http://127.0.0.1:$AIRLOCK_HTTP_PORT" \
	--key-file "$STATE/api-key" --rounds "$ROUNDS" --peer-root "$PEER" \
	--label "warm pool (AIRLOCK_WARM_POOL=2)" \
	--wait-pool "$STATE/run/pool:2"

# Series 2: every create starts cold (snapshot, cgroups, namespaces,
# agent), as on a host whose pool is drained by a burst.
AIRLOCK_WARM_POOL=0 scripts/stack.sh restart fcgi >/dev/null
AIRLOCK_WARM_POOL=0 scripts/stack.sh restart controller >/dev/null
"$OUT/lifecycle" --url "http://127.0.0.1:$AIRLOCK_HTTP_PORT" \
	--key-file "$STATE/api-key" --rounds "$ROUNDS" --peer-root "$PEER" \
	--label "cold start (AIRLOCK_WARM_POOL=0)"
