#!/usr/bin/env bash
# `make bench`: a private stack (temporary state directory, free ports,
# the optimized build/), then create -> exec `true` -> delete through
# nginx for each driver, warm pool and cold, beside a peer:
#
#   ns  200 rounds; peer: bubblewrap running /bin/true in a fresh
#       namespace set over a snapshot of the same template
#   vm  100 rounds; peer: a cold boot of the same guest kernel, initrd
#       and template disk with plain QEMU -M microvm (bench/vmboot), and
#       the memory of 10 idle vm sandboxes (bench/vmrss.py: Rss/Pss of
#       their QEMUs, showing the copy-on-write sharing of guest RAM) and
#       the CPU they cost idle (bench/vmidle.py: QEMU and shim per
#       sandbox, in % of a core, what wakes them)
#   burst  BENCH_BURST (200) ns creates from 32 clients at once,
#       creates/s and p50/p90/p99 (bench/burst.py); peer: as many bwrap
#       runs from 32 workers
#   files  a 200 MiB upload and download per driver (bench/files.py)
#       beside a host `cat` of the file into the sandbox's disk, with
#       the memory of the shim and the fcgi workers before and after
#
# The vm series run only where GET /v1/info lists the vm driver; they
# say so when they are skipped. Tears everything down after.
#
# Env: BENCH_ROUNDS (200, ns), BENCH_BURST (200), BENCH_VM_ROUNDS (100),
# BENCH_VM_PEER_RUNS (8), BENCH_VM_RSS_COUNT (10), BENCH_VM_IDLE_COUNT
# (10), BENCH_FILES_MIB (200), AIRLOCK_BUILD (build).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
ROUNDS=${BENCH_ROUNDS:-200}
VM_ROUNDS=${BENCH_VM_ROUNDS:-100}
BURST=${BENCH_BURST:-200}
VM_PEER_RUNS=${BENCH_VM_PEER_RUNS:-8}
VM_RSS_COUNT=${BENCH_VM_RSS_COUNT:-10}
VM_IDLE_COUNT=${BENCH_VM_IDLE_COUNT:-10}
FILES_MIB=${BENCH_FILES_MIB:-200}
BUILD=$(realpath -m -- "${AIRLOCK_BUILD:-$REPO/build}")
OUT=$BUILD/bench
mkdir -p "$OUT"

cc -std=gnu17 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE \
	-o "$OUT/lifecycle" bench/lifecycle.c -lcurl -ljson-c
cc -std=gnu17 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE \
	-o "$OUT/vmboot" bench/vmboot.c

free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

STATE=$(mktemp -d /tmp/airlock-bench-XXXXXX)
export AIRLOCK_STATE=$STATE AIRLOCK_BUILD=$BUILD
export AIRLOCK_HTTP_PORT=${BENCH_HTTP_PORT:-$(free_port)}
export AIRLOCK_HTTPS_PORT=${BENCH_HTTPS_PORT:-$(free_port)}
export AIRLOCK_POOL_SIZE=${AIRLOCK_POOL_SIZE:-4G}
# Hundreds of creates a minute, all in project default: the create rate
# is what is measured here, not what a project may do.
export AIRLOCK_QUOTA_CREATES_PER_MINUTE=${AIRLOCK_QUOTA_CREATES_PER_MINUTE:-1000000}
# The burst holds BENCH_BURST sandboxes at once.
export AIRLOCK_QUOTA_SANDBOXES=${AIRLOCK_QUOTA_SANDBOXES:-1000}
PEER=$STATE/pool/bench-peer-root
VMPEER=$STATE/pool/bench-vmboot
API=http://127.0.0.1:$AIRLOCK_HTTP_PORT

cleanup() {
	set +e
	if [ -d "$PEER" ]; then
		btrfs subvolume delete "$PEER" >/dev/null 2>&1
	fi
	rm -rf "$VMPEER"
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

info=$(curl -fsS -m 10 -H "Authorization: Bearer $(cat "$STATE/api-key")" \
	"$API/v1/info" 2>&1) || info="GET /v1/info failed: $info"
vm_ok=0
if /usr/bin/python3 -c 'import json,sys; sys.exit(0 if "vm" in json.loads(sys.argv[1]).get("drivers", []) else 1)' "$info" 2>/dev/null; then
	vm_ok=1
	accel=$(/usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])["vm_accel"])' "$info")
fi

lifecycle() {
	"$OUT/lifecycle" --url "$API" --key-file "$STATE/api-key" "$@"
}

# Series 1: a warm host. Each create claims a standby from the warm pool
# (the default, AIRLOCK_WARM_POOL=2); the bench waits, untimed, for the
# controller to refill the pool before each round.
lifecycle --driver ns --rounds "$ROUNDS" --peer-root "$PEER" \
	--label "warm pool (AIRLOCK_WARM_POOL=2)" \
	--wait-pool "$STATE/run/pool:minimal.ns.:2"

# A burst: BENCH_BURST (200) ns creates from 32 clients at once, beside
# as many bwrap runs from 32 workers; the pool sizes itself to the
# creates (AIRLOCK_WARM_POOL_MAX).
/usr/bin/python3 bench/burst.py --url "$API" --key-file "$STATE/api-key" \
	--peer-root "$PEER" --count "$BURST" --clients 32

peer_ms=
if [ $vm_ok -eq 1 ]; then
	# The vm peer: a cold boot of the template's disk with the stack's
	# kernel and initrd, no snapshot (5-10 boots of ~4.5 s under TCG).
	vmdir=$(readlink "$STATE/pool/templates/minimal/.airlock-vm" || true)
	disk=${vmdir:+$vmdir/disk.ext4}
	if [ -z "$disk" ] || [ ! -f "$disk" ]; then
		disk=$(find "$STATE/pool" -name disk.ext4 -print -quit)
	fi
	mkdir -p "$VMPEER"
	if "$OUT/vmboot" --kernel "$STATE/vm/kernel/vmlinuz" \
		--initrd "$STATE/vm/initrd.img" --disk "$disk" \
		--workdir "$VMPEER" --runs "$VM_PEER_RUNS" --accel "$accel" \
		>"$OUT/vmboot.out"; then
		cat "$OUT/vmboot.out"
		peer_ms=$(sed -n 's/^vmboot_p50_ms=//p' "$OUT/vmboot.out")
	else
		cat "$OUT/vmboot.out"
		echo "bench: the vm peer (cold QEMU boot) failed; ratios omitted"
	fi
	rm -rf "$VMPEER"

	lifecycle --driver vm --rounds "$VM_ROUNDS" \
		--label "warm pool (AIRLOCK_WARM_POOL_VM=2), accel $accel" \
		--wait-pool "$STATE/run/pool:minimal.vm.:2" \
		${peer_ms:+--peer-ms "$peer_ms" --peer-label "cold QEMU boot"}
else
	echo
	echo "bench: vm series skipped: the stack does not list the vm driver"
	echo "  ($info)"
fi

# Series 2: every create starts cold (ns: snapshot, cgroups, namespaces,
# agent; vm: rootfs snapshot, disk reflink, QEMU start, restore of the
# template snapshot), as on a host whose pool is drained by a burst.
export AIRLOCK_WARM_POOL=0 AIRLOCK_WARM_POOL_VM=0
scripts/stack.sh restart fcgi >/dev/null
scripts/stack.sh restart controller >/dev/null
seen=$(wc -l <"$STATE/log/shim.log")
lifecycle --driver ns --rounds "$ROUNDS" --peer-root "$PEER" \
	--label "cold start (AIRLOCK_WARM_POOL=0)"
# Where a cold create's time goes, from the shims' own step timings.
/usr/bin/python3 bench/steps.py "$STATE/log/shim.log" --driver ns \
	--since "$seen"
if [ $vm_ok -eq 1 ]; then
	lifecycle --driver vm --rounds "$VM_ROUNDS" \
		--label "cold restore (AIRLOCK_WARM_POOL_VM=0), accel $accel" \
		${peer_ms:+--peer-ms "$peer_ms" --peer-label "cold QEMU boot"}
	/usr/bin/python3 bench/vmrss.py --url "$API" \
		--key-file "$STATE/api-key" --state "$STATE" \
		--count "$VM_RSS_COUNT"
	/usr/bin/python3 bench/vmidle.py --url "$API" \
		--key-file "$STATE/api-key" --state "$STATE" \
		--count "$VM_IDLE_COUNT"
fi

# A 200 MiB file up and down through the API, per driver, beside a host
# `cat` of it into the sandbox's disk, with the shim's and fcgi's memory.
file_drivers=ns
if [ $vm_ok -eq 1 ]; then file_drivers="ns vm"; fi
for d in $file_drivers; do
	/usr/bin/python3 bench/files.py --url "$API" \
		--key-file "$STATE/api-key" --state "$STATE" --driver "$d" \
		--size "$FILES_MIB"
done

# What each step of a start costs (the shims' timing lines): the user
# namespace, uid range and idmapped mount of the ns jail among them.
echo
echo "bench: start steps, from $STATE/log/shim.log"
/usr/bin/python3 bench/steps.py "$STATE/log/shim.log"

bench/policy.sh # egress policy decision time beside a plain C loop
